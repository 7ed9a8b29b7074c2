#!/usr/bin/env bash
# The reference SRE working through the session's MCP server only (SREGym's tool names), driven by
# the official MCP inspector CLI: looks around, submits $DIAGNOSIS with the `submit` tool, applies
# each line of $FIX_FILE with `exec_kubectl_cmd_safely`, submits the mitigation.
set -eu
mcp() {
  npx --no -- @modelcontextprotocol/inspector@2.12.0 --cli --format json -q \
    --transport http --server-url "$FAULTLINE_MCP_URL" \
    --method tools/call --tool-name "$1" --tool-args-json "$2"
  echo
}
app=$(curl -sf "$FAULTLINE_SUBMIT_URL/get_app")
ns=$(printf '%s' "$app" | jq -r .namespace)
mcp exec_kubectl_cmd_safely "$(jq -n --arg c "kubectl -n $ns get pods" '{cmd: $c}')"
mcp get_metrics '{"query": "sum(kube_pod_status_ready{condition=\"true\"})"}'
mcp get_alerts '{}'
mcp submit "$(jq -n --arg a "$DIAGNOSIS" '{ans: $a}')"
while IFS= read -r cmd || [ -n "$cmd" ]; do
  [ -n "$cmd" ] || continue
  mcp exec_kubectl_cmd_safely "$(jq -n --arg c "$cmd" '{cmd: $c}')"
done <"$FIX_FILE"
mcp submit '{"ans": ""}'
