"""Episodes played back to back with the stock GenericEnvClient, as an RL rollout worker plays
them: reset -> 10 tool calls -> submit (a diagnosis, then the mitigation). Prints one JSON line:
each episode's reset latency and wall time, and its reward.

Usage: python throughput.py URL EPISODES SUITE
"""

import json
import sys
import time

from openenv.core.generic_client import GenericEnvClient

CALLS = [
    ("get_alerts", {}),
    ("exec_kubectl_cmd_safely", {"cmd": "kubectl get pods -A"}),
    ("get_metrics", {"query": "sum by (service) (rate(http_requests_total[1m]))"}),
    ("exec_kubectl_cmd_safely", {"cmd": "kubectl get events -A"}),
    ("get_services", {}),
    ("get_metrics", {"query": "up"}),
    ("get_labels", {}),
    ("exec_kubectl_cmd_safely", {"cmd": "kubectl get deployments -A"}),
    ("get_metric_names", {}),
    ("exec_kubectl_cmd_safely", {"cmd": "kubectl get services -A"}),
]


def main(url: str, episodes: int, suite: str) -> None:
    client = GenericEnvClient(base_url=url, message_timeout_s=600).sync()
    client.connect()
    played = []
    for seed in range(episodes):
        t0 = time.monotonic()
        client.reset(suite=suite, seed=seed)
        t1 = time.monotonic()
        for tool, args in CALLS:
            client.step({"tool": tool, "args": args})
        client.step({"tool": "submit", "args": {"ans": "the service is failing"}})
        end = client.step({"tool": "submit", "args": {"ans": ""}})
        played.append({"reset_secs": t1 - t0, "episode_secs": time.monotonic() - t0,
                       "reward": end.reward, "done": end.done})
    client.close()
    print(json.dumps(played))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
