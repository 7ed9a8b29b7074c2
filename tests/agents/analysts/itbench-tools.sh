#!/usr/bin/env bash
# An SRE working through ITBench's offline analysis tools on the session's MCP server, driven by
# the official MCP inspector CLI: reads the alert summary, finds when services changed
# (service_change_points), reads the trace error tree around that instant and submits the
# root-cause suspect it names. Each answer is printed for the test to read.
set -eu
. "$(dirname "$0")/../mcp.sh"
summary=$(mcp alert_summary '{"base_dir": "alerts/"}' | text)
printf 'alert_summary: %s\n' "$(printf '%s' "$summary" | jq -c .)"
points=$(mcp service_change_points '{}' | text)
pivot=$(printf '%s' "$points" | jq -r '[.services[] | .error_rate_pct.changed_at // empty][0]')
printf 'pivot: %s\n' "$pivot"
tree=$(mcp get_trace_error_tree "$(jq -n --arg p "$pivot" '{pivot_time: $p, delta_time: "3m"}')" | text)
suspect=$(printf '%s' "$tree" | jq -r '[.critical_paths[] | .root_cause_suspect.service // empty][0]')
printf 'suspect: %s\n' "$suspect"
ns=$(curl -sf "$FAULTLINE_SUBMIT_URL/get_app" | jq -r .namespace)
mcp submit "$(jq -n --arg a "Root cause: Service $suspect ($ns/Service/$suspect): calls to it fail." '{ans: $a}')" >/dev/null
# A live session asks for a mitigation next; this analyst leaves that to others.
mcp submit '{"ans": ""}' >/dev/null || true
