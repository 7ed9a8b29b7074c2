# Shared by the scripted test agents: the application's namespace and SREGym-style submission.
# Sourced, not run. Needs curl and jq.
set -u
ns=$(curl -sf "$FAULTLINE_SUBMIT_URL/get_app" | jq -r .namespace)
submit() {
  curl -sf -X POST "$FAULTLINE_SUBMIT_URL/submit" -H 'Content-Type: application/json' \
    -d "$(jq -n --arg s "$1" '{solution: $s}')"
  echo
}
