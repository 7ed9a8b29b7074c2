"""A Harbor environment without a container runtime: Linux namespaces.

    harbor run -p TASK -a AGENT --env faultline_harbor.namespace:NamespaceEnvironment \\
        [--ek binds=HOST:/TARGET,HOST2:/TARGET2]

One trial is one long-lived init process (trial_init.py) in new mount, PID,
network, UTS and IPC namespaces, over a per-trial root (rootfs.py): the host's
/usr, /bin, /lib, /lib64, /sbin and /etc read-only, the task's
environment/rootfs/ laid over them, fresh writable /tmp, /app, /logs, ... .
The network namespace has loopback only, so concurrent trials can each listen
on 127.0.0.1:6443. Commands enter the trial with nsenter and drop to the
task's user with setpriv (util-linux). Runs as root on Linux.

What it does not do: build images (the task's Dockerfile is not read; its
`COPY rootfs/ /` is what environment/rootfs/ reproduces), give network access
beyond loopback, or enforce CPU/memory limits. Root inside a trial is the
host's root with all capabilities (no user namespace); the agent's user is
not.
"""

import asyncio
import os
import shutil
import signal
import stat
import sys
import tempfile
from pathlib import Path, PurePosixPath

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import (
    EnvironmentCapabilities,
    EnvironmentResourceCapabilities,
)

from faultline_harbor import inroot
from faultline_harbor.rootfs import SYSTEM_DIRS, Bind, Identity, TrialFs, Users, hostname_for, parse_binds

BINDS_ENV = "FAULTLINE_HARBOR_BINDS"
DEFAULT_WORKDIR = "/app"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
REQUIRED_TOOLS = ("nsenter", "setpriv", "pivot_root", "bash")
READY_TIMEOUT_SEC = 60
# After a command exits, how long its output may still arrive: a background
# job it started may hold the pipes open for good.
OUTPUT_GRACE_SEC = 1.0
TIMEOUT_RETURN_CODE = 124  # as timeout(1)


class NamespaceEnvironment(BaseEnvironment):
    def __init__(self, *args, binds: str | list[str] | None = None, **kwargs):
        """`binds` (--ek binds=HOST:/TARGET,...) and $FAULTLINE_HARBOR_BINDS add
        read-only binds of host paths, e.g. a collector binary at
        /usr/local/bin/collector."""
        if isinstance(binds, list):
            binds = ",".join(binds)
        self._extra_binds = parse_binds(binds or "") + parse_binds(os.environ.get(BINDS_ENV, ""))
        self._trial: TrialFs | None = None
        self._users: Users | None = None
        self._launcher: asyncio.subprocess.Process | None = None
        self._pid1: int | None = None  # host pid of the trial's PID 1
        self._pid1_fd: int | None = None  # a pidfd of it: kill() cannot hit a reused pid
        self._root_fd: int | None = None  # the trial's / (set once it is ready)
        super().__init__(*args, **kwargs)

    # -- what this provider is ------------------------------------------------

    @staticmethod
    def type() -> str:
        return "faultline-namespace"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        # Each trial has its own network namespace with loopback only.
        return EnvironmentCapabilities(disable_internet=True)

    @classmethod
    def resource_capabilities(cls) -> EnvironmentResourceCapabilities:
        # Nothing is enforced: asking for CPU or memory limits is refused, and a
        # task's fractional cpus is accepted as the hint it then is.
        return EnvironmentResourceCapabilities(fractional_cpus=True)

    @classmethod
    def preflight(cls) -> None:
        if not sys.platform.startswith("linux") or os.geteuid() != 0:
            raise SystemExit(f"{cls.__name__} needs Linux and root (it creates namespaces and mounts).")
        missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
        if missing:
            raise SystemExit(f"{cls.__name__} needs {', '.join(missing)} on PATH (util-linux, bash).")

    def _validate_definition(self):
        if not self.environment_dir.is_dir():
            raise FileNotFoundError(f"{self.environment_dir} not found: a task needs an environment/ directory.")
        for mount in self._host_mounts:
            if mount.get("type") != "bind":
                raise ValueError(f"{self.type()} supports bind mounts only, not {mount.get('type')!r}.")
        for bind in self._binds():
            if not bind.source.exists():
                raise FileNotFoundError(f"bind source {bind.source} (for {bind.target}) not found")
        top = PurePosixPath(self._workdir).parts[1:2]
        if top and top[0] in SYSTEM_DIRS:
            raise ValueError(f"workdir {self._workdir} lies in a read-only system directory.")

    @property
    def _workdir(self) -> str:
        return self.task_env_config.workdir or DEFAULT_WORKDIR

    def _binds(self) -> list[Bind]:
        """--ek binds, $FAULTLINE_HARBOR_BINDS, then Harbor's --mounts. (Not
        Harbor's automatic /logs mounts: without the `mounted` capability it
        downloads /logs, and a bind would have it copy each file onto itself.)"""
        user_mounts = [
            Bind(Path(m["source"]), m["target"], read_only=bool(m.get("read_only"))) for m in self._host_mounts
        ]
        return self._extra_binds + user_mounts

    # -- lifecycle --------------------------------------------------------------

    async def start(self, force_build: bool) -> None:
        if self._network_is_public:
            self.logger.warning(
                "network_mode is public but %s gives trials loopback only", self.type()
            )
        trial_dir = Path(tempfile.mkdtemp(prefix=f"faultline-harbor-{hostname_for(self.environment_name)}-"))
        self._trial = TrialFs(trial_dir)
        rootfs = self.environment_dir / "rootfs"
        self._users = await asyncio.to_thread(
            self._trial.prepare,
            rootfs=rootfs if rootfs.is_dir() else None,
            workdir=self._workdir,
            binds=self._binds(),
            hostname=hostname_for(self.environment_name),
            starter_pid=os.getpid(),
        )
        await self._launch(self._trial.spec_path)
        self._pid1_fd = os.pidfd_open(self._pid1)
        # Reached through the init, the root shows the trial's own mounts.
        self._root_fd = os.open(f"/proc/{self._pid1}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self.logger.debug("trial %s: init pid %s, root %s", self.session_id, self._pid1, trial_dir)
        await self._upload_environment_dir_after_start()
        await self.ensure_dirs(self._mount_targets(writable_only=True))

    async def _launch(self, spec_path: Path) -> None:
        """Start the trial's init and wait until it is ready."""
        package_parent = str(Path(__file__).resolve().parent.parent)
        python_path = os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))
        self._launcher = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "faultline_harbor.trial_init", str(spec_path),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # a ^C to harbor is for harbor; the trial ends in stop()
            env={**os.environ, "PYTHONPATH": python_path},
        )
        try:
            await asyncio.wait_for(self._read_handshake(), READY_TIMEOUT_SEC)
        except (TimeoutError, RuntimeError) as error:
            self._launcher.kill()  # PID 1 follows it
            await self._launcher.wait()
            stderr = (await self._launcher.stderr.read()).decode(errors="replace").strip()
            raise RuntimeError(f"trial init failed ({error}): {stderr}") from None

    async def _read_handshake(self) -> None:
        """ "pid N" then "ready" (in either order) from trial_init."""
        ready = False
        while self._pid1 is None or not ready:
            line = (await self._launcher.stdout.readline()).decode().strip()
            if not line:
                raise RuntimeError("the init exited before it was ready")
            if line.startswith("pid "):
                self._pid1 = int(line.split()[1])
            ready = ready or line == "ready"

    async def stop(self, delete: bool):
        """Kill PID 1: the kernel kills every process of the trial, and the
        launcher reaps PID 1 only once they are all gone. The trial's mounts
        vanish with its mount namespace. Then remove the trial directory if asked."""
        if self._root_fd is not None:
            os.close(self._root_fd)  # it would keep the trial's mounts alive
        if self._pid1_fd is not None:
            try:
                signal.pidfd_send_signal(self._pid1_fd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(self._pid1_fd)
        elif self._launcher is not None:
            self._launcher.kill()  # stopped while starting: PID 1 dies with it
        if self._launcher is not None:
            await self._launcher.wait()
        self._pid1 = self._pid1_fd = self._root_fd = self._launcher = None
        if self._trial is not None:
            if delete:
                await asyncio.to_thread(self._trial.remove)
            else:
                self.logger.info("trial files kept in %s", self._trial.dir)

    # -- commands ---------------------------------------------------------------

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        """`bash -c command` in the trial, as `user` (default: the environment's
        default user, else root), in `cwd` (default: the workdir)."""
        pid1 = self._running()
        who = self._users.lookup(self._resolve_user(user))
        argv = [
            # nsenter would resolve a --wd=DIR on the host: take the init's root
            # and cwd, and let env(1) change directory inside the trial.
            "nsenter", f"--target={pid1}",
            "--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd",
            *_drop_privileges(who),
            "env", f"--chdir={cwd or self._workdir}", "bash", "-c", command,
        ]
        environment = {"PATH": DEFAULT_PATH, "HOME": who.home, "LANG": "C.UTF-8", **(self._merge_env(env) or {})}
        result = await run_captured(argv, environment, timeout_sec)
        if (callback := self._output_callback()) is not None and result.stdout:
            await callback(result.stdout, "stdout")
        return result

    def _running(self) -> int:
        """PID 1's host pid, if the trial is up."""
        if self._root_fd is None:
            raise RuntimeError(f"{self.type()} environment {self.session_id} is not running")
        return self._pid1

    # -- files ------------------------------------------------------------------
    # Paths are the trial's, resolved inside its root (see inroot.py): a symlink
    # planted in the trial cannot send an upload onto the host. Downloads go
    # further and follow no symlink at all, so the agent cannot have Harbor
    # fetch, say, the trial's /etc/shadow (the host's) as /logs/agent/x.

    async def upload_file(self, source_path: Path | str, target_path: str):
        await asyncio.to_thread(self._upload_file, Path(source_path), target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str):
        await asyncio.to_thread(self._upload_dir, Path(source_dir), target_dir)

    async def download_file(self, source_path: str, target_path: Path | str):
        await asyncio.to_thread(self._download_file, source_path, Path(target_path))

    async def download_dir(self, source_dir: str, target_dir: Path | str):
        await asyncio.to_thread(self._download_dir, source_dir, Path(target_dir))

    def _trial_root(self) -> int:
        self._running()
        return self._root_fd

    def _absolute(self, path: str) -> str:
        return str(PurePosixPath(self._workdir, path))  # relative paths are the workdir's

    def _upload_file(self, source: Path, target: str) -> None:
        parent, name = inroot.locate(self._trial_root(), self._absolute(target), create_parents=True)
        try:
            inroot.copy_file_in(source, parent, name)
        finally:
            os.close(parent)

    def _upload_dir(self, source: Path, target: str) -> None:
        directory = inroot.open_dir(self._trial_root(), self._absolute(target), create=True)
        try:
            inroot.copy_tree_in(source, directory)
        finally:
            os.close(directory)

    def _download_file(self, source: str, target: Path) -> None:
        fd = inroot.open_file(self._trial_root(), self._absolute(source), os.O_RDONLY, follow_symlinks=False)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise IsADirectoryError(f"{source} in the trial is not a regular file")
            inroot.copy_file_out(fd, target)
        finally:
            os.close(fd)

    def _download_dir(self, source: str, target: Path) -> None:
        directory = inroot.open_dir(
            self._trial_root(), self._absolute(source), flags=os.O_RDONLY, follow_symlinks=False
        )
        try:
            inroot.copy_tree_out(directory, target)
        finally:
            os.close(directory)


def _drop_privileges(who: Identity) -> list[str]:
    """setpriv arguments to become `who`, with no way back up (no_new_privs
    makes set-uid binaries inert); nothing for root."""
    if who.uid == 0:
        return []
    groups = "--init-groups" if who.in_passwd else "--clear-groups"
    return ["setpriv", f"--reuid={who.uid}", f"--regid={who.gid}", groups, "--no-new-privs", "--"]


class _Capture:
    """What arrives on the read end of a pipe, until EOF.

    After detach() the pipe is still drained, into nothing, until EOF: a
    background job of the command (`server &`) may write to it for as long as
    it lives, and closing the read end would kill it with SIGPIPE or make its
    writes fail (python -m http.server then drops its connections)."""

    def __init__(self, fd: int):
        self._fd = fd
        self._loop = asyncio.get_running_loop()
        self._keep = True
        self.data = bytearray()
        self.eof = asyncio.Event()
        os.set_blocking(fd, False)
        self._loop.add_reader(fd, self._read)

    def _read(self) -> None:
        try:
            chunk = os.read(self._fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self.eof.set()
        elif self._keep:
            self.data += chunk

    def detach(self) -> str | None:
        """Stop collecting; returns what was collected."""
        self._keep = False
        return self.data.decode(errors="replace") or None


async def run_captured(argv: list[str], env: dict[str, str], timeout_sec: float | None) -> ExecResult:
    """Run argv in its own process group and return its output and exit code.

    On timeout the whole group is killed and the code is 124. The command's
    background jobs (same group) live on after a normal exit, as daemons must;
    what they write after OUTPUT_GRACE_SEC is discarded.
    """
    (out_read, out_write), (err_read, err_write) = os.pipe(), os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=out_write, stderr=err_write,
            env=env, start_new_session=True,
        )
    except BaseException:
        for fd in (out_read, err_read):
            os.close(fd)
        raise
    finally:
        os.close(out_write)
        os.close(err_write)
    captures = (_Capture(out_read), _Capture(err_read))
    timed_out = False
    try:
        try:
            await asyncio.wait_for(process.wait(), timeout_sec)
        except TimeoutError:
            timed_out = True
            _kill_group(process.pid)
            await process.wait()
        waiters = [asyncio.create_task(capture.eof.wait()) for capture in captures]
        _, late = await asyncio.wait(waiters, timeout=OUTPUT_GRACE_SEC)
        for waiter in late:
            waiter.cancel()
    finally:
        if process.returncode is None:  # cancelled
            _kill_group(process.pid)
        stdout, stderr = (capture.detach() for capture in captures)
    if timed_out:
        note = f"Command timed out after {timeout_sec} seconds"
        return ExecResult(stdout=stdout, stderr=f"{stderr or ''}{note}\n", return_code=TIMEOUT_RETURN_CODE)
    code = process.returncode
    return ExecResult(stdout=stdout, stderr=stderr, return_code=128 - code if code < 0 else code)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass

