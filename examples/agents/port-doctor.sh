#!/usr/bin/env bash
# A tiny scripted SRE agent for `collector live`: it knows one trick. It looks for Services whose
# targetPort is none of the ports their pods' containers declare, points each such Service at the
# port its pods listen on, and reports what it did. Needs kubectl, curl and jq.
#
#   collector live --problem hotel-geo-target-port --agent examples/agents/port-doctor.sh --out runs/doctor
set -euo pipefail
submit() {
  curl -sf -X POST "$FAULTLINE_SUBMIT_URL/submit" -H 'Content-Type: application/json' \
    -d "$(jq -n --arg s "$1" '{solution: $s}')"
  echo
}
ns=$(curl -sf "$FAULTLINE_SUBMIT_URL/get_app" | jq -r .namespace)
fixes=()
found=()
for svc in $(kubectl -n "$ns" get services -o name); do
  name=${svc#service/}
  selector=$(kubectl -n "$ns" get service "$name" -o json \
    | jq -r '.spec.selector // {} | to_entries | map("\(.key)=\(.value)") | join(",")')
  [ -n "$selector" ] || continue
  ports=$(kubectl -n "$ns" get pods -l "$selector" -o json \
    | jq -r '[.items[].spec.containers[].ports[]?.containerPort] | unique | map(tostring) | join(" ")')
  [ -n "$ports" ] || continue
  target=$(kubectl -n "$ns" get service "$name" -o jsonpath='{.spec.ports[0].targetPort}')
  case " $ports " in *" $target "*) continue ;; esac
  port=${ports%% *}
  found+=("Service $name targets port $target but its pods listen on $port, so its callers cannot connect")
  fixes+=("$name:$port")
done
if [ ${#found[@]} -eq 0 ]; then
  submit "No Service with a wrong targetPort found."
  exit 0
fi
submit "$(printf '%s. ' "${found[@]}")"
for f in "${fixes[@]}"; do
  kubectl -n "$ns" patch service "${f%%:*}" --type=json \
    -p "[{\"op\":\"replace\",\"path\":\"/spec/ports/0/targetPort\",\"value\":${f##*:}}]"
done
submit ""
