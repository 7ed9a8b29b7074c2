"""The file system of one trial, prepared on the host before its init starts.

A trial directory holds:

    root/     the trial's `/`: fresh writable directories (/tmp, /app, /logs, ...),
              empty mount points for the host's system directories, and every
              file of the task's environment/rootfs/ outside those directories;
    layers/   per system directory (usr, etc, ...), the files the trial adds to
              it: the task's rootfs/usr/..., /etc/passwd and /etc/group with the
              `agent` user, mount points for extra binds. The init mounts such a
              directory as a read-only overlay of its layer over the host's;
              a system directory without a layer is a plain read-only bind;
    spec.json what the init mounts, in order (see trial_init.py).

So the host's /usr and /etc are shared read-only and never written to, while
the trial still sees the same tree a Dockerfile's `COPY rootfs/ /` would make.
"""

import json
import os
import re
import shutil
import stat
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from faultline_harbor import inroot

# Host directories the trial runs its programs from. Merged-/usr hosts have
# bin, lib, ... as symlinks into usr; they stay symlinks in the trial.
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib64", "etc")

AGENT_NAME, AGENT_ID, AGENT_HOME = "agent", 1000, "/home/agent"

# Directories of every trial's root: path -> mode. Owned by root unless noted;
# proc and dev are mount points.
SKELETON_DIRS = {
    "tmp": 0o1777,
    "var/tmp": 0o1777,
    "run": 0o755,
    "root": 0o700,
    "home": 0o755,
    AGENT_HOME.lstrip("/"): 0o755,  # owned by the agent
    "logs/agent": 0o777,
    "logs/verifier": 0o777,
    "logs/artifacts": 0o777,
    "tests": 0o755,
    "solution": 0o755,
    "proc": 0o555,
    "dev": 0o755,
}


@dataclass(frozen=True)
class Bind:
    """A host path shown at `target` inside the trial."""

    source: Path
    target: str
    read_only: bool = True


def parse_binds(text: str) -> list[Bind]:
    """ "HOST:TARGET,HOST2:TARGET2" -> read-only binds."""
    binds = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        source, sep, target = item.partition(":")
        if not sep or not source or not target.startswith("/"):
            raise ValueError(f"bind {item!r}: expected HOST_PATH:/ABSOLUTE/TARGET")
        binds.append(Bind(Path(source), target))
    return binds


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    home: str
    in_passwd: bool  # whether its supplementary groups can be looked up by name


class Users:
    """The trial's /etc/passwd and /etc/group, to run commands as a user
    named the way the task names it ("agent", "1000", "agent:agent", 0)."""

    def __init__(self, passwd: str, group: str):
        self._passwd = [line.split(":") for line in passwd.splitlines() if line.count(":") >= 6]
        self._group = [line.split(":") for line in group.splitlines() if line.count(":") >= 3]

    def lookup(self, user: str | int | None) -> Identity:
        if user is None:
            user = 0
        name, _, group = str(user).partition(":")
        entry = next((e for e in self._passwd if name in (e[0], e[2])), None)
        if entry is not None:
            identity = Identity(int(entry[2]), int(entry[3]), entry[5] or "/", True)
        elif name.isdigit():
            identity = Identity(int(name), 0, "/", False)  # as Docker does for an unknown uid
        else:
            raise ValueError(f"no user {name!r} in the trial's /etc/passwd")
        if group:
            identity = replace(identity, gid=self._gid(group))
        return identity

    def _gid(self, group: str) -> int:
        entry = next((e for e in self._group if group in (e[0], e[2])), None)
        if entry is not None:
            return int(entry[2])
        if group.isdigit():
            return int(group)
        raise ValueError(f"no group {group!r} in the trial's /etc/group")


def with_agent(table: str, entry: str) -> str:
    """Add `entry` (an /etc/passwd or /etc/group line for the agent) unless the
    agent is there. Another entry with id 1000 is dropped: it would answer
    uid/gid lookups in the agent's place (whoami, ls -l, initgroups)."""
    lines = table.splitlines()
    if any(line.split(":")[0] == AGENT_NAME for line in lines):
        return table
    kept = [line for line in lines if line.split(":")[2:3] != [str(AGENT_ID)]]
    return "\n".join([*kept, entry]) + "\n"


def hostname_for(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63] or "trial"


class TrialFs:
    def __init__(self, trial_dir: Path):
        self.dir = trial_dir
        self.root = trial_dir / "root"
        self.layers = trial_dir / "layers"
        self.spec_path = trial_dir / "spec.json"
        self._root_fd: int | None = None

    def prepare(
        self,
        *,
        rootfs: Path | None,
        workdir: str,
        binds: list[Bind],
        hostname: str,
        starter_pid: int,
    ) -> Users:
        """Lay out the trial directory and write spec.json; returns the trial's users."""
        self.root.mkdir()
        self.layers.mkdir()
        self._root_fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY)
        try:
            self._make_skeleton(workdir)
            if rootfs is not None:
                self._copy_rootfs(rootfs)
            users = self._write_etc(hostname)
            # The agent works in the workdir, as after a Dockerfile's `RUN chown agent /app`.
            for directory in (AGENT_HOME, workdir):
                self._chown(directory, users.lookup(AGENT_NAME))
            for bind in binds:
                self._make_mount_point(bind)
            self._match_host_dirs()
            spec = {
                "root": str(self.root),
                "hostname": hostname,
                "starter_pid": starter_pid,
                "mounts": self._system_mounts() + [self._bind_mount(b) for b in binds],
            }
            self.spec_path.write_text(json.dumps(spec, indent=2))
            return users
        finally:
            os.close(self._root_fd)

    def _make_skeleton(self, workdir: str) -> None:
        for name in SYSTEM_DIRS:
            host = Path("/", name)
            if host.is_symlink():
                (self.root / name).symlink_to(os.readlink(host))
            elif host.is_dir():
                (self.root / name).mkdir(mode=0o755)
        for path, mode in {**SKELETON_DIRS, workdir.strip("/"): 0o755}.items():
            (self.root / path).mkdir(parents=True, exist_ok=True)
            os.chmod(self.root / path, mode)

    def _placement(self, trial_path: str) -> tuple[Path, str]:
        """Where the trial's `trial_path` is made on the host: (base directory,
        path below it). A path in a system directory (also through the top-level
        symlinks, e.g. /bin -> usr/bin) goes into that directory's layer,
        anything else into the root."""
        first, _, rest = trial_path.strip("/").partition("/")
        host = Path("/", first)
        if first not in SYSTEM_DIRS or not host.exists():
            return self.root, trial_path.strip("/")
        if host.is_symlink():
            resolved = os.path.normpath(os.path.join("/", os.readlink(host)))
            return self._placement(f"{resolved}/{rest}")
        return self.layers / first, rest

    def _copy_rootfs(self, rootfs: Path) -> None:
        """environment/rootfs/ as the Dockerfile's `COPY rootfs/ /` lays it out:
        owned by root (the copier), modes kept."""
        for entry in os.scandir(rootfs):
            base, below = self._placement(entry.name)
            if base == self.root:
                inroot.copy_entry_in(Path(entry.path), self._root_fd, entry.name)
                continue
            if entry.is_symlink():
                raise ValueError(f"{entry.path}: a symlink cannot replace the system directory /{entry.name}")
            with _opened(base) as base_fd, _closing(inroot.open_dir(base_fd, below, create=True)) as fd:
                inroot.copy_tree_in(Path(entry.path), fd)

    def _write_etc(self, hostname: str) -> Users:
        """/etc/passwd and /etc/group with the agent user (based on the task's own
        copies if its rootfs ships them), and /etc/hosts naming this trial."""
        tables = {
            "passwd": with_agent(self._etc_base("passwd"), f"{AGENT_NAME}:x:{AGENT_ID}:{AGENT_ID}::{AGENT_HOME}:/bin/bash"),
            "group": with_agent(self._etc_base("group"), f"{AGENT_NAME}:x:{AGENT_ID}:"),
            "hosts": f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{hostname}\n",
        }
        etc = self.layers / "etc"
        etc.mkdir(exist_ok=True)
        for name, text in tables.items():
            (etc / name).unlink(missing_ok=True)  # never write through a shipped symlink
            (etc / name).write_text(text)
            os.chmod(etc / name, 0o644)
        return Users(tables["passwd"], tables["group"])

    def _etc_base(self, name: str) -> str:
        shipped = self.layers / "etc" / name
        if shipped.is_symlink():
            raise ValueError(f"rootfs/etc/{name} must be a regular file, not a symlink")
        return (shipped if shipped.exists() else Path("/etc", name)).read_text()

    def _chown(self, trial_path: str, identity: Identity) -> None:
        with _closing(inroot.open_dir(self._root_fd, trial_path)) as fd:
            os.chown(f"/proc/self/fd/{fd}", identity.uid, identity.gid)  # O_PATH: no fchown

    def _make_mount_point(self, bind: Bind) -> None:
        """A bind needs an existing target of the source's kind. In a system
        directory it is made in the layer (the host's copy is never touched),
        elsewhere in the trial's root."""
        base, below = self._placement(bind.target)
        if base != self.root and os.path.lexists(Path("/", base.name, below)):
            return  # the host's system directory has it
        with _opened(base) as base_fd:
            parent, name = inroot.locate(base_fd, below, create_parents=True)
            with _closing(parent):
                inroot.make(parent, name, directory=bind.source.is_dir())

    def _match_host_dirs(self) -> None:
        """A directory in an overlay takes its owner and mode from the topmost
        layer that has it, so layer directories copy those of the host's."""
        for directory, _, _ in os.walk(self.layers):
            host = Path("/", Path(directory).relative_to(self.layers))
            if host.is_dir() and not host.is_symlink():
                info = host.stat()
                os.chown(directory, info.st_uid, info.st_gid)
                os.chmod(directory, stat.S_IMODE(info.st_mode))

    def _system_mounts(self) -> list[dict]:
        mounts = []
        for name in SYSTEM_DIRS:
            if not (self.root / name).is_dir() or (self.root / name).is_symlink():
                continue
            if (self.layers / name).is_dir():
                lowers = [str(self.layers / name), f"/{name}"]
                mounts.append({"kind": "overlay", "target": f"/{name}", "lowers": lowers})
            else:
                mounts.append({"kind": "bind", "source": f"/{name}", "target": f"/{name}", "read_only": True})
        return mounts

    @staticmethod
    def _bind_mount(bind: Bind) -> dict:
        return {"kind": "bind", "source": str(bind.source), "target": bind.target, "read_only": bind.read_only}

    def remove(self) -> None:
        """Delete the trial directory, unless something is still mounted in it
        (rmtree would then delete through the mount, e.g. into the host's /usr)."""
        mounted = mounts_under(self.dir)
        if mounted:
            raise RuntimeError(f"not removing {self.dir}: still mounted: {', '.join(mounted)}")
        shutil.rmtree(self.dir)


@contextmanager
def _closing(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def _opened(directory: Path) -> AbstractContextManager[int]:
    """An O_PATH fd of the root or a layer, the layer made on first use."""
    directory.mkdir(exist_ok=True)
    return _closing(os.open(directory, os.O_PATH | os.O_DIRECTORY))


def mounts_under(directory: Path) -> list[str]:
    """Mount points at or below `directory` in this process's mount namespace."""
    prefix = str(directory.resolve())
    found = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            point = line.split()[4].encode().decode("unicode_escape")  # octal escapes such as \040
            if point == prefix or point.startswith(prefix + "/"):
                found.append(point)
    return found
