#!/bin/bash
# The verifier, run as root in the agent's trial: reward 1 iff /app/answer.txt
# holds the phrase and the daemon started by the healthcheck still answers.
set -u
echo "test.sh runs as $(id -un) (uid $(id -u))"
echo "the healthcheck ran as $(cat /run/hello-healthcheck-user 2>/dev/null || echo '?')"
reward=0
if [ "$(cat /app/answer.txt 2>/dev/null)" = "namespaces all the way down" ] \
    && cat /opt/task/secret >/dev/null \
    && python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:7443/greeting", timeout=2).read()'
then
    reward=1
fi
printf '{"reward": %s}\n' "$reward" > /logs/verifier/reward.json
