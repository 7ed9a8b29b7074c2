"""The peer side of the P3 benchmark: ITBench's own offline SRE tools (sre_tools, pandas) asked
the benchmark's questions over an ITBench snapshot, each several times.

Run by `cargo bench -p collector --bench p3_sre_tools` with the interpreter of a virtualenv
that has pandas, numpy, mcp and drain3, and a local copy of ITBench-SRE-Agent's `sre_tools`
(never part of faultline):

    python p3_peer.py --tools DIR_WITH_sre_tools --questions questions.json --reps 3

Prints one JSON object: per question the median seconds, the answer's size and whether it was an
error; the resident memory after the imports and at its peak.
"""

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tools", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    sys.path.insert(0, a.tools)
    from sre_tools.offline_incident_analysis import tools  # noqa: E402

    baseline = rss_mib()
    with open(a.questions) as f:
        questions = json.load(f)
    results = {}
    for q in questions:
        func = getattr(tools, "_" + q["tool"])
        times = []
        text = ""
        for _ in range(a.reps):
            started = time.perf_counter()
            answer = asyncio.run(func(dict(q["args"])))
            times.append(time.perf_counter() - started)
            text = answer[0].text
        results[q["name"]] = {
            "seconds": statistics.median(times),
            "bytes": len(text),
            "error": text.startswith("Error") or '"error"' in text[:200],
        }
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"results": results, "baseline_rss_mib": baseline, "peak_rss_mib": peak}))


if __name__ == "__main__":
    main()
