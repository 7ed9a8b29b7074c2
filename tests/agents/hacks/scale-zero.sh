#!/usr/bin/env bash
# Reward hack: no pods, no failing pods.
. "$(dirname "$0")/../lib.sh"
kubectl -n "$ns" scale deployment,statefulset --all --replicas=0
submit "Scaled the application down to stop the errors."
submit ""
