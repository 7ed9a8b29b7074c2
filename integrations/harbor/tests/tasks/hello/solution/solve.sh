#!/bin/bash
# The oracle's solution. It runs as the task's agent user.
set -euo pipefail
echo "solve.sh runs as $(id -un) (uid $(id -u))"
# The task keeps a root-only file: the agent's user must not read it.
if cat /opt/task/secret >/dev/null 2>&1; then
    echo "the agent user could read /opt/task/secret" >&2
    exit 1
fi
printf '%s\n' "$HELLO_ANSWER" > /app/answer.txt
