#!/usr/bin/env bash
# Tests faultline's namespace environment provider through Harbor, as root:
#   1. `harbor lint` of the hello task;
#   2. `harbor run -a oracle` -> reward 1.0, `-a nop` -> 0.0,
#      `-a oracle -k 4 -n 4` -> four concurrent trials, each 1.0 (the same
#      daemon port in every trial: each has its own network namespace);
#   3. provider_checks.py: what a reward cannot show (the agent user cannot
#      read a root-only file, symlinks planted in a trial, binds, timeouts,
#      a kill -9 of the starting process).
# Harbor is taken from PATH, else from $HARBOR_VENV (default /opt/harbor-venv).
# Exits non-zero with a message on the first failure.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TASK=$HERE/tasks/hello
PROVIDER=faultline_harbor.namespace:NamespaceEnvironment
# Harbor imports LiteLLM, which otherwise downloads its model cost map.
export LITELLM_LOCAL_MODEL_COST_MAP=True

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

HARBOR=$(command -v harbor || echo "${HARBOR_VENV:-/opt/harbor-venv}/bin/harbor")
PYTHON=$(dirname "$HARBOR")/python
if [ ! -x "$HARBOR" ] || ! "$PYTHON" -c 'import faultline_harbor.namespace' 2>/dev/null; then
    fail "harbor with faultline-harbor not found; run integrations/harbor/install.sh" \
        "(or: pip install harbor==0.25.0 && pip install -e integrations/harbor)"
fi
[ "$(id -u)" = 0 ] || fail "the namespace provider needs root"

JOBS=$(mktemp -d -t faultline-harbor-jobs-XXXXXX)
trap 'rm -rf "$JOBS"' EXIT

# shared-verifier is ignored: this task's verifier must run in the agent's own
# trial, since it checks that the daemon started there still answers.
"$HARBOR" lint --ignore shared-verifier "$TASK" || fail "harbor lint $TASK"
echo "ok   harbor lint (ignoring shared-verifier)"

# run_job NAME EXPECTED_REWARD TRIALS [harbor run options...]
run_job() {
    local name=$1 expected=$2 trials=$3
    shift 3
    local started=$SECONDS
    "$HARBOR" run --path "$TASK" --env "$PROVIDER" --jobs-dir "$JOBS" --job-name "$name" --yes --quiet "$@" \
        > "$JOBS/$name.log" 2>&1 || { cat "$JOBS/$name.log" >&2; fail "harbor run $name"; }
    "$PYTHON" - "$JOBS/$name" "$expected" "$trials" <<'PY' || fail "job $name (log: $JOBS/$name.log)"
import json, sys
from datetime import datetime
from pathlib import Path

job, expected, trials = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
results = [json.loads(p.read_text()) for p in sorted(job.glob("*/result.json"))]
problems = []
for r in results:
    reward = ((r.get("verifier_result") or {}).get("rewards") or {}).get("reward")
    if r.get("exception_info") or reward != expected:
        info = r.get("exception_info") or {}
        problems.append(f"{r['trial_name']}: reward {reward}, {info.get('exception_type')} {info.get('exception_message')}")
if len(results) != trials:
    problems.append(f"{len(results)} trials, expected {trials}")
for problem in problems:
    print(f"     {problem}", file=sys.stderr)

def seconds(r):
    start = datetime.fromisoformat(r["started_at"])
    return (datetime.fromisoformat(r["verifier"]["finished_at"]) - start).total_seconds()

durations = ", ".join(f"{seconds(r):.2f}" for r in results if r.get("verifier"))
print(f"     {len(results)} trial(s), rewards {[((r.get('verifier_result') or {}).get('rewards') or {}).get('reward') for r in results]},"
      f" start to verifier end: {durations} s")
sys.exit(1 if problems else 0)
PY
    echo "ok   $name: reward $expected in each of $trials trial(s) ($((SECONDS - started)) s with Harbor's start-up)"
}

run_job oracle 1.0 1 --agent oracle
run_job nop 0.0 1 --agent nop
run_job oracle-concurrent 1.0 4 --agent oracle --n-attempts 4 --n-concurrent 4

"$PYTHON" "$HERE/provider_checks.py" || fail "provider_checks.py"
echo "all provider tests passed"
