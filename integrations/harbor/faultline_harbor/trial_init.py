"""The init of one trial: `python -m faultline_harbor.trial_init SPEC.json`.

Started by NamespaceEnvironment.start(). This process (the *launcher*) enters
new mount, network, UTS and IPC namespaces and forks the trial's PID 1 into a
new PID namespace. PID 1 builds the trial's file system from the spec, swaps
its root for it (pivot_root, so not even root inside can reach the host's /),
brings loopback up, prints "ready" and then only reaps orphans: daemons
started by one exec are reparented to it and keep running across later execs.

Lifetime: killing PID 1 makes the kernel kill everything in the trial. PID 1
dies with the launcher (PR_SET_PDEATHSIG) and the launcher kills PID 1 when the
process that started it (harbor) exits, even by kill -9, so a crashed harbor
leaves no trial running. Mounts live only in the trial's mount namespace and
vanish with it.

Protocol on stdout: "pid <host pid of PID 1>", then "ready". Errors go to
stderr and the launcher exits non-zero.

Standard library only, and every module is imported before pivot_root: after
it, the host's Python library is out of reach.
"""

import ctypes
import fcntl
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import traceback

from faultline_harbor import inroot

# <sys/mount.h>, <linux/prctl.h>, <linux/sockios.h>, <net/if.h>
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1

DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
    "ptmx": "pts/ptmx",
}

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {source} on {target}")


def umount(target: str, flags: int) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def set_parent_death_signal() -> None:
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


class TrialRoot:
    """Mounting inside the future root. Targets are resolved with inroot so a
    symlink shipped in the task's rootfs cannot send a mount onto the host's tree;
    the mount goes onto the resolved descriptor through /proc/self/fd."""

    def __init__(self, path: str):
        self.path = path
        self.fd = os.open(path, os.O_PATH | os.O_DIRECTORY)

    def target(self, path: str) -> int:
        parent, name = inroot.locate(self.fd, path)
        try:
            return os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        finally:
            os.close(parent)

    def mount(self, source: str | None, path: str, fstype: str | None, flags: int, data: str | None = None) -> None:
        fd = self.target(path)
        try:
            mount(source, f"/proc/self/fd/{fd}", fstype, flags, data)
        finally:
            os.close(fd)

    def bind(self, source: str, path: str, read_only: bool) -> None:
        self.mount(source, path, None, MS_BIND)
        if read_only:
            # A bind mount's own flags are set by a remount; keep the source's
            # nosuid/nodev/noexec, which the kernel may refuse to drop.
            self.mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(source))

    def create(self, path: str, *, directory: bool) -> None:
        parent, name = inroot.locate(self.fd, path, create_parents=True)
        try:
            inroot.make(parent, name, directory=directory)
        finally:
            os.close(parent)


def _locked_flags(path: str) -> int:
    """The nosuid, nodev and noexec of the mount `path` is on."""
    f_flag = os.statvfs(path).f_flag
    return (
        (MS_NOSUID if f_flag & os.ST_NOSUID else 0)
        | (MS_NODEV if f_flag & os.ST_NODEV else 0)
        | (MS_NOEXEC if f_flag & os.ST_NOEXEC else 0)
    )


def build_filesystem(spec: dict) -> None:
    # Nothing mounted from here on may show up in the host's mount table.
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount(spec["root"], spec["root"], None, MS_BIND)  # pivot_root wants a mount point
    root = TrialRoot(spec["root"])

    for entry in spec["mounts"]:
        if entry["kind"] == "overlay":
            # Lower layers only: a read-only merge of the task's files over the host's.
            lowers = ":".join(entry["lowers"])
            root.mount("overlay", entry["target"], "overlay", MS_RDONLY, f"lowerdir={lowers}")
        else:
            root.bind(entry["source"], entry["target"], entry["read_only"])

    root.mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    build_dev(root)
    pivot_into(root.path)


def build_dev(root: TrialRoot) -> None:
    """A small /dev: the harmless character devices, a private devpts for
    terminals, and a /dev/shm, without any of the host's disks."""
    root.mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k")
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            root.create(f"/dev/{name}", directory=False)
            root.mount(f"/dev/{name}", f"/dev/{name}", None, MS_BIND)
    dev = inroot.open_dir(root.fd, "/dev")
    try:
        for name, target in DEV_LINKS.items():
            os.symlink(target, name, dir_fd=dev)
    finally:
        os.close(dev)
    root.create("/dev/pts", directory=True)
    root.mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
    root.create("/dev/shm", directory=True)
    root.mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")


def pivot_into(path: str) -> None:
    """Make `path` the root of this mount namespace and drop the host's root.

    pivot_root(".", ".") stacks the old root over the new one; detaching it
    leaves the new root alone. (util-linux's pivot_root, as os has no wrapper.)
    """
    os.chdir(path)
    subprocess.run(["pivot_root", ".", "."], check=True)
    umount(".", MNT_DETACH)
    os.chdir("/")


def bring_up_loopback() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def reap_forever() -> None:
    """PID 1's only job once the trial is up: collect every exited child,
    including daemons reparented here. SIGCHLD is blocked and waited for, so
    no exit is missed between a reap and the wait."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        signal.sigwait({signal.SIGCHLD})


def run_pid1(spec: dict) -> None:
    set_parent_death_signal()
    try:
        build_filesystem(spec)
        bring_up_loopback()
        socket.sethostname(spec["hostname"])
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    print("ready", flush=True)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    reap_forever()


def supervise(pid1: int, starter: int) -> int:
    """Wait for PID 1 to exit, or for the starter to die and then kill PID 1."""
    pid1_fd = os.pidfd_open(pid1)
    while True:
        readable, _, _ = select.select([pid1_fd, starter], [], [])
        if starter in readable:
            os.kill(pid1, signal.SIGKILL)
        if pid1_fd in readable or starter in readable:
            return os.waitstatus_to_exitcode(os.waitpid(pid1, 0)[1])


def main() -> int:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    starter = os.pidfd_open(os.getppid())
    if os.getppid() != spec["starter_pid"]:
        return 1  # the starter is already gone
    os.unshare(os.CLONE_NEWNS | os.CLONE_NEWPID | os.CLONE_NEWNET | os.CLONE_NEWUTS | os.CLONE_NEWIPC)
    pid1 = os.fork()
    if pid1 == 0:
        os.close(starter)
        run_pid1(spec)
    print(f"pid {pid1}", flush=True)
    return supervise(pid1, starter)


if __name__ == "__main__":
    sys.exit(main())
