"""An agent that uses SREGym's MCP mounts as SREGym's own tools do: fastmcp's Client over
SSETransport, one connection per call, the kubectl mount keyed by an `sregym_ssid` header, the
addresses built from SREGym's variables (API_HOSTNAME, MCP_SERVER_PORT, API_PORT). It calls every
tool SREGym serves, prints each answer as a `=== name` block for the test to read, fixes the
scale-to-zero problem, and submits both stages (the diagnosis through the MCP server's `submit`,
the mitigation through the conductor's `/submit_mcp`).

fastmcp raises ToolError on a result flagged as an error, as it does in Stratus: an answer that
is not plain text ends this agent, which is the point.
"""

import asyncio
import json
import os
import time
import urllib.request
import uuid

from fastmcp import Client
from fastmcp.client import SSETransport

HOST = os.environ["API_HOSTNAME"]
MCP_PORT = os.environ["MCP_SERVER_PORT"]
API_PORT = os.environ["API_PORT"]
CONDUCTOR = f"http://{HOST}:{API_PORT}"


def show(name, text):
    print(f"=== {name}\n{text}", flush=True)


async def call(mount, tool, args=None, ssid=None, base=None):
    url = f"{base or f'http://{HOST}:{MCP_PORT}'}/{mount}/sse"
    headers = {"sregym_ssid": ssid} if ssid else {}
    async with Client(SSETransport(url=url, headers=headers)) as client:
        result = await client.call_tool(tool, args or {})
        return "\n".join(part.text for part in result)


async def tools(mount):
    async with Client(SSETransport(url=f"http://{HOST}:{MCP_PORT}/{mount}/sse")) as client:
        return sorted(t.name for t in await client.list_tools())


def get(path):
    with urllib.request.urlopen(CONDUCTOR + path, timeout=30) as resp:
        return json.loads(resp.read())


def wait_for_stage(stage):
    # The next stage opens once the last submission is evaluated, as SREGym's drivers wait for.
    while get("/status")["stage"] != stage:
        time.sleep(0.2)


async def main():
    ns = get("/get_app")["namespace"]
    for mount in ["kubectl", "prometheus", "jaeger", "loki", "submit"]:
        show(f"tools {mount}", json.dumps(await tools(mount)))

    mine, other = str(uuid.uuid4()), str(uuid.uuid4())
    kubectl = "exec_kubectl_cmd_safely"
    show("refused", await call("kubectl", kubectl, {"cmd": f"kubectl get pods -n {ns} | grep user"}, mine))
    show("get pods", await call("kubectl", kubectl, {"cmd": f"kubectl get pods -n {ns}"}, mine))
    fix = f"kubectl -n {ns} scale deployment/user-service --replicas=1"
    show("fix", await call("kubectl", kubectl, {"cmd": fix}, mine))
    show("rollbackable mine", await call("kubectl", "get_previous_rollbackable_cmd", {}, mine))
    show("rollbackable other", await call("kubectl", "get_previous_rollbackable_cmd", {}, other))

    show("get_metrics", await call("prometheus", "get_metrics", {"query": "up"}))
    show("get_alerts", await call("prometheus", "get_alerts"))
    show("get_services", await call("jaeger", "get_services"))
    show("get_operations", await call("jaeger", "get_operations", {"service": "user-service"}))
    show("get_traces", await call("jaeger", "get_traces", {"service": "compose-post-service", "last_n_minutes": 15}))
    show("get_dependency_graph", await call("jaeger", "get_dependency_graph", {"last_n_minutes": 30}))
    show("get_labels", await call("loki", "get_labels"))
    show("get_label_values", await call("loki", "get_label_values", {"label": "namespace"}))
    show("get_logs", await call("loki", "get_logs", {"query": f'{{namespace="{ns}"}}', "last_n_minutes": 15}))
    show("bad promql", await call("prometheus", "get_metrics", {"query": "up{"}))

    diagnosis = "The user-service Deployment was scaled to zero replicas, so its Service has no endpoints."
    show("submit diagnosis", await call("submit", "submit", {"ans": diagnosis}))
    wait_for_stage("mitigation")
    show("submit mitigation", await call("submit_mcp", "submit", {"ans": ""}, base=CONDUCTOR))
    show("submit after done", await call("submit_mcp", "submit", {"ans": ""}, base=CONDUCTOR))


asyncio.run(main())
