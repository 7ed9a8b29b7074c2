"""Direct checks of NamespaceEnvironment: what a Harbor reward cannot show.

Run as root with the Python that has Harbor and faultline-harbor installed:

    python integrations/harbor/tests/provider_checks.py

Prints one line per check and exits 1 if any failed. run_provider.sh runs it.
"""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harbor.models.task.config import NetworkPolicy
from harbor.models.task.task import Task
from harbor.models.trial.paths import TrialPaths

from faultline_harbor.namespace import NamespaceEnvironment
from faultline_harbor.rootfs import mounts_under

TASK = Path(__file__).resolve().parent / "tasks" / "hello"
# Shared with the --crash-child process, which cannot clean up after itself.
SCRATCH = Path(os.environ.get("PROVIDER_CHECKS_SCRATCH") or tempfile.mkdtemp(prefix="faultline-provider-checks-"))
PROBE = "python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:{port}/greeting\", timeout=2).read().decode())'"
failures: list[str] = []


def check(ok: bool, what: str, detail: object = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}" + ("" if ok or detail == "" else f"\n     {detail}"))
    if not ok:
        failures.append(what)


def make_env(name: str = "hello", **kwargs) -> NamespaceEnvironment:
    task = Task(TASK)
    paths = TrialPaths(Path(tempfile.mkdtemp(prefix=f"{name}-", dir=SCRATCH)))
    paths.mkdir()
    return NamespaceEnvironment(
        environment_dir=task.paths.environment_dir,
        environment_name=name,
        session_id=f"{name}__checks__env",
        trial_paths=paths,
        task_env_config=task.config.environment,
        network_policy=NetworkPolicy(network_mode=task.config.environment.network_mode),
        **kwargs,
    )


async def check_users(env: NamespaceEnvironment) -> None:
    result = await env.exec("cat /opt/task/secret", user="agent")
    check(result.return_code != 0 and "Permission denied" in (result.stderr or ""),
          "the agent user cannot read /opt/task/secret (mode 0600, root)", result)
    result = await env.exec("cat /opt/task/secret")
    check(result.return_code == 0 and "hello-secret" in (result.stdout or ""), "root can", result)
    result = await env.exec("id -un; id -u; grep -E '^(NoNewPrivs|CapEff)' /proc/self/status; pwd", user="agent")
    lines = (result.stdout or "").split()
    check(lines[:2] == ["agent", "1000"] and "NoNewPrivs:" in lines and lines[lines.index("NoNewPrivs:") + 1] == "1"
          and lines[lines.index("CapEff:") + 1] == "0000000000000000" and lines[-1] == "/app",
          "user=agent runs as uid 1000, no capabilities, no_new_privs, in the workdir", result)


async def check_background_jobs(env: NamespaceEnvironment) -> None:
    started = time.monotonic()
    # No redirection: the server keeps this command's output pipes open.
    result = await env.exec("python3 -m http.server 6443 --bind 127.0.0.1 --directory /srv/hello & sleep 0.5", user="agent")
    elapsed = time.monotonic() - started
    check(result.return_code == 0 and elapsed < 5,
          f"an exec returns although its background job holds its output ({elapsed:.1f} s)", result)
    result = await env.exec(PROBE.format(port=6443))
    check("hello from the trial" in (result.stdout or ""), "the background job answers in a later exec", result)
    result = await env.exec("ps -o ppid= -C python3 | sort -u | tr -d ' '")
    check("1" in (result.stdout or "").split(), "it was reparented to the trial's init (PID 1)", result)


async def check_timeout(env: NamespaceEnvironment) -> None:
    started = time.monotonic()
    result = await env.exec("sleep 60 & sleep 60", timeout_sec=1)
    elapsed = time.monotonic() - started
    check(result.return_code == 124 and elapsed < 5, f"timeout_sec=1 ends the command with 124 ({elapsed:.1f} s)", result)
    result = await env.exec("pgrep -x sleep || echo none")
    check((result.stdout or "").strip() == "none", "and kills its process group", result)


async def check_transfers(env: NamespaceEnvironment) -> None:
    await env.exec(
        "ln -s /etc/shadow /logs/agent/shadow && ln -s / /logs/agent/root && echo fine > /logs/agent/fine.txt"
        " && ln -s /etc /app/etc-link && ln -s ../../../../../../.. /app/up",
        user="agent",
    )
    try:
        await env.download_file("/logs/agent/shadow", SCRATCH / "shadow")
        refused = False
    except OSError:
        refused = True
    check(refused and not (SCRATCH / "shadow").exists(), "download_file refuses a symlink planted by the agent")
    await env.download_dir("/logs/agent", SCRATCH / "agent")
    copied = sorted(p.name for p in (SCRATCH / "agent").iterdir())
    check(copied == ["fine.txt"], "download_dir copies the files and skips the symlinks", copied)

    marker = f"faultline-provider-check-{os.getpid()}"
    payload = SCRATCH / marker
    payload.write_text("payload\n")
    try:
        await env.upload_file(payload, f"/app/etc-link/{marker}")
        raised = None
    except OSError as error:
        raised = error
    check(raised is not None and not Path("/etc", marker).exists(),
          "an upload through a planted symlink to /etc lands in the trial's read-only /etc, not the host's", raised)
    await env.upload_file(payload, f"/app/up/tmp/{marker}")
    result = await env.exec(f"cat /tmp/{marker}")
    check(result.stdout == "payload\n" and not Path("/tmp", marker).exists(),
          "'..' in a planted symlink stops at the trial's root", result)

    await env.upload_dir(TASK / "tests", "/checks/tests")
    result = await env.exec("stat -c '%a %U' /checks/tests/test.sh")
    check((result.stdout or "").strip() == "755 root", "upload_dir keeps modes, files owned by root", result)


async def check_binds() -> None:
    collector = SCRATCH / "collector"
    collector.write_text("#!/bin/sh\necho collector-ok\n")
    collector.chmod(0o755)
    (SCRATCH / "data").mkdir()
    (SCRATCH / "data" / "x.txt").write_text("data-ok\n")
    host_had = {p: p.exists() for p in (Path("/usr/local/bin/collector"), Path("/usr/bin/collector2"))}
    os.environ["FAULTLINE_HARBOR_BINDS"] = f"{collector}:/bin/collector2"  # through merged-/usr's /bin -> usr/bin
    try:
        env = make_env("binds", binds=f"{collector}:/usr/local/bin/collector,{SCRATCH / 'data'}:/opt/data")
    finally:
        del os.environ["FAULTLINE_HARBOR_BINDS"]
    await env.start(force_build=False)
    try:
        result = await env.exec("collector && collector2 && cat /opt/data/x.txt && hello-daemon-up && echo up")
        check(result.stdout == "collector-ok\ncollector-ok\ndata-ok\nup\n",
              "binds (--ek binds, $FAULTLINE_HARBOR_BINDS) show host files in the read-only /usr, beside rootfs/usr", result)
        result = await env.exec("touch /opt/data/y /usr/local/bin/collector 2>&1; echo x >> /usr/local/bin/collector")
        check("Read-only file system" in (result.stdout or "") + (result.stderr or "") and not (SCRATCH / "data" / "y").exists()
              and collector.read_text().endswith("collector-ok\n"), "they are read-only", result)
        check(all(p.exists() == had for p, had in host_had.items()), "the host's /usr got no mount points")
    finally:
        await env.stop(delete=True)


async def check_isolation() -> None:
    envs = [make_env(f"iso{i}") for i in range(2)]
    await asyncio.gather(*(env.start(force_build=False) for env in envs))
    try:
        serve = "setsid python3 -m http.server 6443 --bind 127.0.0.1 --directory /srv/hello >/dev/null 2>&1 < /dev/null & sleep 0.5"
        await asyncio.gather(*(env.exec(serve) for env in envs))
        results = await asyncio.gather(*(env.exec(PROBE.format(port=6443) + " && hostname") for env in envs))
        check(all(r.return_code == 0 for r in results) and results[0].stdout != results[1].stdout,
              "two trials each listen on 127.0.0.1:6443", results)
        result = await envs[0].exec("ip -o link | awk '{print $2}'; python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), 2)' 2>&1 | tail -1")
        check((result.stdout or "").startswith("lo:\n") and "unreachable" in (result.stdout or ""),
              "a trial has loopback only", result)
    finally:
        await asyncio.gather(*(env.stop(delete=True) for env in envs))


async def check_stop() -> None:
    env = make_env("stop")
    await env.start(force_build=False)
    await env.exec("setsid sleep 1000 >/dev/null 2>&1 < /dev/null &")
    trial_dir, pid1 = env._trial.dir, env._pid1
    namespace = os.readlink(f"/proc/{pid1}/ns/pid")
    await env.stop(delete=True)
    check(not trial_dir.exists() and not _processes_in(namespace),
          "stop(delete=True) ends every process of the trial and removes its directory")


def _processes_in(pid_namespace: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "ns/pid") == pid_namespace:
                found.append(int(entry.name))
        except OSError:
            pass
    return found


async def crash_child() -> None:
    """Start a trial with a daemon, report it, and wait to be killed."""
    env = make_env("crash")
    await env.start(force_build=False)
    await env.exec("setsid sleep 1000 >/dev/null 2>&1 < /dev/null &")
    namespace = os.readlink(f"/proc/{env._pid1}/ns/pid")
    print(json.dumps({"namespace": namespace, "trial_dir": str(env._trial.dir)}), flush=True)
    await asyncio.sleep(3600)


def check_crash() -> None:
    child = subprocess.Popen(
        [sys.executable, __file__, "--crash-child"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PROVIDER_CHECKS_SCRATCH": str(SCRATCH)},
    )
    report = json.loads(child.stdout.readline())
    alive_before = _processes_in(report["namespace"])
    child.kill()  # as a kill -9 of harbor
    child.wait()
    deadline = time.monotonic() + 5
    while _processes_in(report["namespace"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _processes_in(report["namespace"])
    check(len(alive_before) >= 2 and not left,
          f"kill -9 of the process that started a trial ends all its {len(alive_before)} processes", left)
    trial_dir = Path(report["trial_dir"])
    if not mounts_under(trial_dir):
        shutil.rmtree(trial_dir)  # left behind, as nothing was there to delete it


async def main() -> None:
    env = make_env()
    await env.start(force_build=False)
    try:
        await env.run_healthcheck()  # as Harbor does; it starts the task's daemon and makes its secret root-only
        await check_users(env)
        await check_background_jobs(env)
        await check_timeout(env)
        await check_transfers(env)
    finally:
        await env.stop(delete=True)
    await check_binds()
    await check_isolation()
    await check_stop()
    check_crash()


if __name__ == "__main__":
    if sys.argv[1:] == ["--crash-child"]:
        asyncio.run(crash_child())
    try:
        asyncio.run(main())
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
