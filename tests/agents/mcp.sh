# Shared by the scripted agents that work through the session's MCP server: one tool call with the
# official MCP inspector CLI, and the text of its answer. Sourced, not run. Needs npx and jq.
mcp() {
  npx --no -- @modelcontextprotocol/inspector@2.12.0 --cli --format json -q \
    --transport http --server-url "$FAULTLINE_MCP_URL" \
    --method tools/call --tool-name "$1" --tool-args-json "$2"
}
text() { jq -r '(.content // .result.content)[0].text'; }
