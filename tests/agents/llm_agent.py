#!/usr/bin/env python3
"""A small LLM-driven SRE agent for tests: a tool-calling loop over an OpenAI-compatible
chat completions endpoint, with the Python standard library only.

Each step sends the conversation to $OPENAI_BASE_URL/chat/completions with three tools and runs
the tool calls the model answers with, feeding their results back:
  kubectl(args)   runs the real kubectl (with $KUBECONFIG) and returns its output;
  promql(query)   runs an instant query against $PROMETHEUS_URL/api/v1/query;
  submit(answer)  POSTs {"solution": answer} to $FAULTLINE_SUBMIT_URL/submit (the session's
                  submission API), or prints it when unset,
                  and ends the run.
The run also ends when the model answers without tool calls, or after --max-steps calls.

Environment: OPENAI_BASE_URL (required), OPENAI_API_KEY (optional), KUBECONFIG,
PROMETHEUS_URL, FAULTLINE_SUBMIT_URL. Exit status: 0 when an answer was submitted, 1 when the run
ended without one, 2 on a usage or LLM error.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

SYSTEM = (
    "You are an SRE agent. A service in the Kubernetes cluster is failing. Investigate with the "
    "kubectl and promql tools, mitigate the fault, then call submit with your diagnosis."
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "kubectl",
            "description": "Run kubectl with these arguments against the cluster.",
            "parameters": {
                "type": "object",
                "properties": {
                    "args": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "arguments after `kubectl`, e.g. [\"get\", \"pods\", \"-A\"]",
                    }
                },
                "required": ["args"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "promql",
            "description": "Run a PromQL instant query against the cluster's Prometheus.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Submit the final diagnosis and end the investigation.",
            "parameters": {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"],
            },
        },
    },
]

# Tool output fed back to the model is cut to this many characters, as real agents do.
MAX_TOOL_OUTPUT = 16000


def log(*parts):
    print("[llm_agent]", *parts, file=sys.stderr, flush=True)


def post_json(url, body, headers, timeout):
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST")
    req.add_header("Content-Type", "application/json")
    for k, v in headers.items():
        req.add_header(k, v)
    return urllib.request.urlopen(req, timeout=timeout)


def read_stream(resp):
    """Assembles a streamed chat completion (SSE) into the message a non-streamed call returns."""
    content, calls = [], {}
    data_lines = []
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith("data:"):
            data_lines.append(line[5:].lstrip(" "))
            continue
        if line or not data_lines:
            continue
        data, data_lines = "\n".join(data_lines), []
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                content.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    tc.get("index", 0),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if tc.get("id"):
                    slot["id"] = tc["id"]
                fn = tc.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
    message = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def ask(args, messages):
    base = os.environ["OPENAI_BASE_URL"].rstrip("/")
    headers = {}
    if os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["OPENAI_API_KEY"]
    body = {"model": args.model, "messages": messages, "tools": TOOLS}
    if args.stream:
        body["stream"] = True
    with post_json(base + "/chat/completions", body, headers, args.timeout) as resp:
        if args.stream:
            return read_stream(resp)
        answer = json.load(resp)
    return answer["choices"][0]["message"]


def run_kubectl(call_args):
    if isinstance(call_args, str):
        call_args = shlex.split(call_args)
    if not isinstance(call_args, list) or not all(isinstance(a, str) for a in call_args):
        return "error: kubectl args must be a list of strings"
    try:
        out = subprocess.run(
            ["kubectl", *call_args], capture_output=True, text=True, timeout=60
        )
    except FileNotFoundError:
        return "error: kubectl is not installed"
    except subprocess.TimeoutExpired:
        return "error: kubectl timed out after 60 s"
    text = out.stdout
    if out.returncode != 0:
        text += f"\n(exit status {out.returncode})\n{out.stderr}"
    return text


def run_promql(query):
    base = os.environ.get("PROMETHEUS_URL")
    if not base:
        return "error: PROMETHEUS_URL is not set"
    url = base.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": query})
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return f"error: HTTP {e.code}: {e.read().decode('utf-8', 'replace')}"
    except (urllib.error.URLError, OSError) as e:
        return f"error: {e}"


def submit(answer):
    url = os.environ.get("FAULTLINE_SUBMIT_URL")
    if not url:
        print(json.dumps({"submitted": answer}), flush=True)
        return "submitted"
    try:
        with post_json(url.rstrip("/") + "/submit", {"solution": answer}, {}, 60) as resp:
            return f"submitted: HTTP {resp.status}"
    except urllib.error.HTTPError as e:
        return f"error: submit answered HTTP {e.code}: {e.read().decode('utf-8', 'replace')}"
    except (urllib.error.URLError, OSError) as e:
        return f"error: submit failed: {e}"


def run_tool(name, raw_arguments):
    """Runs one tool call; returns (result text, whether an answer was submitted)."""
    try:
        arguments = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError as e:
        return f"error: the arguments are not JSON: {e}", False
    if not isinstance(arguments, dict):
        return "error: the arguments must be a JSON object", False
    if name == "kubectl":
        return run_kubectl(arguments.get("args", [])), False
    if name == "promql":
        return run_promql(str(arguments.get("query", ""))), False
    if name == "submit":
        result = submit(str(arguments.get("answer", "")))
        return result, not result.startswith("error")
    return f"error: unknown tool {name!r}", False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="Find and fix what is failing in the cluster.")
    p.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    p.add_argument("--max-steps", type=int, default=20, help="LLM calls at most")
    p.add_argument("--stream", action="store_true", help="ask for streamed completions")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per LLM call")
    args = p.parse_args()
    if not os.environ.get("OPENAI_BASE_URL"):
        log("OPENAI_BASE_URL is not set")
        return 2

    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": args.task}]
    for step in range(1, args.max_steps + 1):
        try:
            message = ask(args, messages)
        except urllib.error.HTTPError as e:
            log(f"step {step}: LLM answered HTTP {e.code}: {e.read().decode('utf-8', 'replace')}")
            return 2
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError) as e:
            log(f"step {step}: LLM call failed: {e!r}")
            return 2
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            log(f"step {step}: the model answered without a tool call; stopping")
            return 1
        for call in calls:
            fn = call.get("function") or {}
            log(f"step {step}: {fn.get('name')} {fn.get('arguments')}")
            result, done = run_tool(fn.get("name"), fn.get("arguments"))
            messages.append(
                {"role": "tool", "tool_call_id": call.get("id", ""), "content": result[:MAX_TOOL_OUTPUT]}
            )
            if done:
                log(f"step {step}: answer submitted")
                return 0
    log(f"stopped after {args.max_steps} steps without an answer")
    return 1


if __name__ == "__main__":
    sys.exit(main())
