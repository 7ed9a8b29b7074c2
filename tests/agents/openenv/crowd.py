"""Many OpenEnv episodes at once on one server, with the stock async GenericEnvClient: N clients
reset together (the server's --max-sessions is N), one more is refused CAPACITY_REACHED, each of
the N takes a step, and all close. Prints one JSON line: how many reset and stepped, the refusal,
and each reset's latency in seconds.

Usage: python crowd.py URL N SUITE
"""

import asyncio
import json
import sys
import time

from openenv.core.generic_client import GenericEnvClient


async def reset(url: str, suite: str, seed: int):
    client = GenericEnvClient(base_url=url, message_timeout_s=600)
    await client.connect()
    t0 = time.monotonic()
    result = await client.reset(suite=suite, seed=seed, variant="quiet")
    return client, result, time.monotonic() - t0


async def main(url: str, n: int, suite: str) -> None:
    started = await asyncio.gather(*(reset(url, suite, seed) for seed in range(n)))
    refused = None
    extra = GenericEnvClient(base_url=url, message_timeout_s=600)
    try:
        await extra.reset(suite=suite, seed=n)
    except Exception as e:  # the client raises the server's error message with its code
        refused = str(e)
    finally:
        await extra.disconnect()
    steps = await asyncio.gather(
        *(c.step({"tool": "get_alerts", "args": {}}) for c, _, _ in started))
    states = await asyncio.gather(*(c.state() for c, _, _ in started))
    for c, _, _ in started:
        await c.close()
    print(json.dumps({
        "reset": sum(1 for _, r, _ in started if r.observation.get("instruction")),
        "episodes": len({s["episode_id"] for s in states}),
        "stepped": sum(1 for s in steps if s.observation.get("error") is False),
        "refused": refused,
        "reset_secs": [round(t, 3) for _, _, t in started],
    }))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
