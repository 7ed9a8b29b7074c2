#!/usr/bin/env bash
# A scripted SRE: looks around the way an agent does (kubectl, PromQL, Loki), submits the diagnosis
# it is given ($DIAGNOSIS), applies the fix it is given ($FIX_FILE: one shell command per line,
# kubectl with $KUBECONFIG), and submits the mitigation.
. "$(dirname "$0")/../lib.sh"
set -e
curl -sf "$FAULTLINE_SUBMIT_URL/status"; echo
kubectl -n "$ns" get pods -o wide
kubectl -n "$ns" get events --sort-by=.lastTimestamp | tail -5
curl -sf "$PROMETHEUS_URL/api/v1/query" --data-urlencode 'query=sum by (namespace) (kube_pod_status_ready{condition="true"})'; echo
curl -sf "$LOKI_URL/loki/api/v1/labels"; echo
submit "$DIAGNOSIS"
while IFS= read -r cmd || [ -n "$cmd" ]; do
  [ -n "$cmd" ] || continue
  echo "+ $cmd"
  sh -c "$cmd"
done <"$FIX_FILE"
submit ""
