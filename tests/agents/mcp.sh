# Shared by the scripted agents that work through the session's MCP server: one tool call with the
# official MCP inspector CLI (installed globally, as on an SRE's machine: an agent's sandbox has no
# npx cache and no registry), and the text of its answer. Sourced, not run. Needs jq.
mcp() {
  mcp-inspector --cli --format json -q \
    --transport http --server-url "$FAULTLINE_MCP_URL" \
    --method tools/call --tool-name "$1" --tool-args-json "$2"
}
text() { jq -r '(.content // .result.content)[0].text'; }
