#!/usr/bin/env bash
# The reference SRE working through the session's MCP server only (SREGym's tool names), driven by
# the official MCP inspector CLI: looks around, submits $DIAGNOSIS with the `submit` tool, applies
# each line of $FIX_FILE with `exec_kubectl_cmd_safely`, submits the mitigation.
set -eu
. "$(dirname "$0")/../mcp.sh"
# Each answer on a line of its own in the agent's output.
call() { mcp "$@"; echo; }
app=$(curl -sf "$FAULTLINE_SUBMIT_URL/get_app")
ns=$(printf '%s' "$app" | jq -r .namespace)
call exec_kubectl_cmd_safely "$(jq -n --arg c "kubectl -n $ns get pods" '{cmd: $c}')"
call get_metrics '{"query": "sum(kube_pod_status_ready{condition=\"true\"})"}'
call get_alerts '{}'
call submit "$(jq -n --arg a "$DIAGNOSIS" '{ans: $a}')"
while IFS= read -r cmd || [ -n "$cmd" ]; do
  [ -n "$cmd" ] || continue
  call exec_kubectl_cmd_safely "$(jq -n --arg c "$cmd" '{cmd: $c}')"
done <"$FIX_FILE"
call submit '{"ans": ""}'
