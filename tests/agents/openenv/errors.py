"""Bad messages on one WebSocket of an OpenEnv server, sent raw (with `websockets`, the library
OpenEnv's client is built on): prints each answer's error code as one JSON line."""

import asyncio
import json
import sys

from websockets.asyncio.client import connect


async def main(url: str) -> None:
    codes = {}
    async with connect(url.replace("http://", "ws://") + "/ws", max_size=None) as ws:
        async def ask(name: str, message: str) -> dict:
            await ws.send(message)
            answer = json.loads(await ws.recv())
            codes[name] = answer["data"].get("code") if answer["type"] == "error" else answer["type"]
            return answer

        await ask("unknown_type", json.dumps({"type": "jump"}))
        await ask("invalid_json", "{not json")
        await ask("step_before_reset", json.dumps({"type": "step", "data": {"tool": "get_alerts"}}))
        await ask("unknown_field", json.dumps({"type": "reset", "data": {"problme": "x"}}))
        refused = await ask("not_offered", json.dumps(
            {"type": "reset", "data": {"problem": "astro-cart-target-port"}}))
        codes["not_offered_message"] = refused["data"].get("message")
        await ask("reset", json.dumps({"type": "reset", "data": {"seed": 1}}))
        await ask("unknown_tool", json.dumps({"type": "step", "data": {"tool": "rm_rf"}}))
        await ws.send(json.dumps({"type": "close"}))
    print(json.dumps(codes))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
