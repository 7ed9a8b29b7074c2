"""Paths inside a trial's root, resolved as if that root were `/`.

A trial's files are reached from outside it: by the provider (through
/proc/<init>/root, which shows the trial's own mounts) and by the trial's init
(to find mount points). Whoever can write in the trial (the agent) can plant
symlinks such as /logs/verifier/reward.json -> /etc/shadow, and a plain
open() from outside would follow them on the host. So every path is walked one
component at a time with *at() calls on directory descriptors: symlinks are
read and resolved against the trial's root, `..` never climbs above it, and
every open refuses to follow a symlink, so a symlink swapped in between the
check and the open makes the operation fail instead of escaping.

Standard library only: the trial's init imports this module too.
"""

import errno
import os
import stat
from collections import deque
from pathlib import Path

MAX_SYMLINKS = 40  # as the kernel's own path walk
_DIR_PATH = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_READ = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_COPY_CHUNK = 1 << 20


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def locate(
    root_fd: int,
    path: str,
    *,
    follow_symlinks: bool = True,
    create_parents: bool = False,
) -> tuple[int, str]:
    """Resolve `path` inside the tree at `root_fd`.

    Returns (fd of the parent directory, last name); the caller owns the fd.
    The last component need not exist. The root itself is (root, ".").
    Without follow_symlinks, a symlink anywhere on the path is an error (ELOOP).
    With create_parents, missing directories on the way are made (mode 0755).
    """
    stack = [os.dup(root_fd)]  # directories walked so far; stack[0] is the root
    pending = deque(_components(path))
    links = 0
    try:
        while pending:
            name = pending.popleft()
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                continue
            is_last = not pending
            try:
                mode = os.lstat(name, dir_fd=stack[-1]).st_mode
            except FileNotFoundError:
                if is_last:
                    return stack.pop(), name
                if not create_parents:
                    raise
                os.mkdir(name, 0o755, dir_fd=stack[-1])
                mode = stat.S_IFDIR
            if stat.S_ISLNK(mode):
                links += 1
                if not follow_symlinks or links > MAX_SYMLINKS:
                    raise OSError(errno.ELOOP, "symlink not followed" if not follow_symlinks else "too many symlinks", path)
                target = os.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop())
                pending.extendleft(reversed(_components(target)))
                continue
            if is_last:
                return stack.pop(), name
            stack.append(os.open(name, _DIR_PATH, dir_fd=stack[-1]))
        return stack.pop(), "."
    finally:
        for fd in stack:
            os.close(fd)


def open_dir(
    root_fd: int,
    path: str,
    *,
    create: bool = False,
    flags: int = os.O_PATH,
    follow_symlinks: bool = True,
) -> int:
    """An fd of the directory `path` inside the root (O_PATH unless flags say
    otherwise), made with its missing parents if asked."""
    parent, name = locate(root_fd, path, create_parents=create, follow_symlinks=follow_symlinks)
    try:
        if create and name != ".":
            try:
                os.mkdir(name, 0o755, dir_fd=parent)
            except FileExistsError:
                pass
        return os.open(name, flags | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    finally:
        os.close(parent)


def open_file(root_fd: int, path: str, flags: int, *, follow_symlinks: bool = True) -> int:
    """os.open() of `path` inside the root. The last component is opened with
    O_NOFOLLOW: it was resolved first, so only a symlink swapped in meanwhile fails."""
    parent, name = locate(root_fd, path, follow_symlinks=follow_symlinks)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    finally:
        os.close(parent)


def make(dir_fd: int, name: str, *, directory: bool) -> None:
    """An empty directory or file `name` in `dir_fd` (say, a mount point),
    unless something is there already."""
    try:
        if directory:
            os.mkdir(name, 0o755, dir_fd=dir_fd)
        else:
            os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd))
    except FileExistsError:
        pass


def _copy_fd(source_fd: int, target_fd: int) -> None:
    while chunk := os.read(source_fd, _COPY_CHUNK):
        os.write(target_fd, chunk)


def copy_file_in(source: Path, dir_fd: int, name: str) -> None:
    """Copy a host file to `name` in the directory `dir_fd`, keeping its mode."""
    mode = stat.S_IMODE(os.stat(source).st_mode)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    target = os.open(name, flags, mode, dir_fd=dir_fd)
    try:
        with open(source, "rb") as reader:
            _copy_fd(reader.fileno(), target)
        os.fchmod(target, mode)  # the umask and a pre-existing file both lose it
    finally:
        os.close(target)


def copy_tree_in(source: Path, dir_fd: int) -> None:
    """Copy the contents of host directory `source` into `dir_fd`, keeping modes."""
    for entry in os.scandir(source):
        copy_entry_in(Path(entry.path), dir_fd, entry.name)


def copy_entry_in(source: Path, dir_fd: int, name: str) -> None:
    """Copy a host file, symlink or directory tree to `name` in `dir_fd`.

    Existing directories are merged into; symlinks are copied as symlinks (they
    are only ever followed inside the trial). A symlink found where a directory
    is expected is an error, not a door out.
    """
    if source.is_symlink():
        _replace_with_symlink(os.readlink(source), dir_fd, name)
    elif source.is_dir():
        mode = stat.S_IMODE(source.stat().st_mode)
        try:
            os.mkdir(name, mode, dir_fd=dir_fd)
            created = True
        except FileExistsError:
            created = False
        child = os.open(name, _DIR_READ, dir_fd=dir_fd)
        try:
            if created:
                os.fchmod(child, mode)  # past the umask
            copy_tree_in(source, child)
        finally:
            os.close(child)
    elif source.is_file():
        copy_file_in(source, dir_fd, name)


def _replace_with_symlink(target: str, dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    os.symlink(target, name, dir_fd=dir_fd)


def copy_file_out(source_fd: int, target: Path) -> None:
    """Copy an open file of the trial to a host path, keeping its permission bits."""
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = stat.S_IMODE(os.fstat(source_fd).st_mode) & 0o777  # no set-id bits on the host
    with open(target, "wb") as writer:
        _copy_fd(source_fd, writer.fileno())
    os.chmod(target, mode)


def copy_tree_out(dir_fd: int, target: Path) -> None:
    """Copy a trial directory (an fd opened with O_RDONLY) to a host directory.

    Only regular files and directories are copied. Symlinks are left behind:
    once on the host, a link to /etc/shadow would point at the host's.
    """
    target.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(dir_fd):
        if entry.is_dir(follow_symlinks=False):
            child = os.open(entry.name, _DIR_READ, dir_fd=dir_fd)
            try:
                copy_tree_out(child, target / entry.name)
            finally:
                os.close(child)
        elif entry.is_file(follow_symlinks=False):
            source = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            try:
                copy_file_out(source, target / entry.name)
            finally:
                os.close(source)
