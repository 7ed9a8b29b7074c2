#!/usr/bin/env bash
# Submits a diagnosis, says it is at work, then works for a long time (while $SLOW_MARKER exists):
# a session to kill mid-way.
. "$(dirname "$0")/../lib.sh"
submit "looking into it"
echo "at work"
while [ -e "$SLOW_MARKER" ]; do sleep 0.2; done
submit ""
