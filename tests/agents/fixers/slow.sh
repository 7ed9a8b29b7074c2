#!/usr/bin/env bash
# Submits a diagnosis, then works for a long time (while $SLOW_MARKER exists): a session to kill
# mid-way. Writes its process id into $PID_DIR when it has started.
. "$(dirname "$0")/../lib.sh"
echo $$ >"$PID_DIR/$$"
submit "looking into it"
while [ -e "$SLOW_MARKER" ]; do sleep 0.2; done
submit ""
