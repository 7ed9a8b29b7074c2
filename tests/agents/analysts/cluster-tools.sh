#!/usr/bin/env bash
# An SRE on a cluster asking the session's analysis tools (its MCP server, driven by the MCP
# inspector CLI) until the traces show where calls fail: the error rate's change point, the trace
# error tree around it and the suspect it names; then the topology around that suspect and an
# entity of the injection plane. Prints each answer for the test to read; submits nothing.
set -eu
. "$(dirname "$0")/../mcp.sh"
suspect=""
# The fault has just been injected: its failing traffic is what the tools wait for.
for _ in $(seq 40); do
  pivot=$(mcp service_change_points '{}' | text \
    | jq -r '[.services[] | .error_rate_pct.changed_at // empty][0] // empty')
  if [ -n "$pivot" ]; then
    tree=$(mcp get_trace_error_tree "$(jq -n --arg p "$pivot" '{pivot_time: $p, delta_time: "1m"}')" | text)
    suspect=$(printf '%s' "$tree" | jq -r '[.critical_paths[] | .root_cause_suspect.service // empty][0] // empty')
    [ -n "$suspect" ] && break
  fi
  sleep 3
done
printf 'suspect: %s\n' "$suspect"
printf 'topology: %s\n' "$(mcp topology_analysis "$(jq -n --arg e "$suspect" '{entity: $e}')" | text | jq -c .)"
printf 'plane: %s\n' "$(mcp topology_analysis '{"entity": "faultline/ConfigMap/journal"}' | text | tr '\n' ' ')"
