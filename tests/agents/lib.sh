# Shared by the scripted test agents: the application's namespace and SREGym-style submission.
# Sourced, not run. Needs curl and jq.
set -u
ns=$(curl -sf "$FAULTLINE_SUBMIT_URL/get_app" | jq -r .namespace)
stage() { curl -sf "$FAULTLINE_SUBMIT_URL/status" | jq -r .stage; }
# A submitted stage is evaluated before the next one opens (SREGym's conductor): wait for that, as
# SREGym's drivers do, so that the next submission is not taken for a duplicate.
submit() {
  local before
  before=$(stage)
  curl -sf -X POST "$FAULTLINE_SUBMIT_URL/submit" -H 'Content-Type: application/json' \
    -d "$(jq -n --arg s "$1" '{solution: $s}')"
  echo
  [ "$before" = diagnosis ] || return 0
  while [ "$(stage)" = "$before" ]; do sleep 0.1; done
}
