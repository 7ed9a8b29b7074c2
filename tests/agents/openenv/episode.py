"""One OpenEnv episode with the stock GenericEnvClient, as a training loop's scripted agent would
play it: reset, look around with the tools, submit a diagnosis, fix the system with the real
kubectl through the kubeconfig the observation hands over, submit the mitigation, and print what
came back (reward, done, the run record's reward parts) as one JSON line.

Usage: python episode.py URL [--problem ID] [--suite GLOBS] [--seed N] [--diagnosis TEXT]
                             [--fix-file FILE] [--episode-id ID] [--steps N] [--leave]
--leave: disconnect after the first step, without closing (a client that dies mid-episode).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from openenv.core.generic_client import GenericEnvClient


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--problem")
    p.add_argument("--suite")
    p.add_argument("--seed", type=int)
    p.add_argument("--diagnosis", default="")
    p.add_argument("--fix-file")
    p.add_argument("--episode-id")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--leave", action="store_true")
    a = p.parse_args()

    reset_args = {k: v for k, v in {
        "problem": a.problem, "suite": a.suite, "seed": a.seed, "episode_id": a.episode_id,
    }.items() if v is not None}
    # Grading a mitigation takes seconds; the client's default wait per message is 60 s.
    client = GenericEnvClient(base_url=a.url, message_timeout_s=600).sync()
    client.connect()
    first = client.reset(**reset_args)
    obs = first.observation
    names = [t["name"] for t in obs["tools"]]
    looks = [
        {"tool": "exec_kubectl_cmd_safely", "args": {"cmd": "kubectl get pods -A"}},
        {"tool": "get_alerts", "args": {}},
        {"tool": "get_metrics", "args": {"query": "up"}},
    ]
    outputs = []
    for action in looks[: a.steps]:
        r = client.step(action)
        outputs.append({"tool": action["tool"], "error": r.observation.get("error"),
                        "chars": len(r.observation.get("output", ""))})
        if a.leave:
            # Gone without a word: the socket is dropped, no close message.
            os._exit(0)
    state = client.state()
    diagnosed = client.step({"tool": "submit", "args": {"ans": a.diagnosis}})
    end = diagnosed
    if not diagnosed.done:
        if a.fix_file:
            with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False) as kc:
                kc.write(obs["endpoints"]["kubeconfig"])
            env = dict(os.environ, KUBECONFIG=kc.name)
            with open(a.fix_file) as f:
                for cmd in filter(None, (line.strip() for line in f)):
                    subprocess.run(["sh", "-c", cmd], env=env, check=True,
                                   stdout=subprocess.DEVNULL)
        end = client.step({"tool": "submit", "args": {"ans": ""}})
    after = client.state()
    client.close()
    print(json.dumps({
        "tools": names,
        "instruction": obs["instruction"],
        "endpoints": sorted(obs["endpoints"]),
        "looked": outputs,
        "state_mid": state,
        "stage_after_diagnosis": diagnosed.observation.get("stage"),
        "reward": end.reward,
        "done": end.done,
        "result": end.observation.get("result"),
        "state_end": after,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
