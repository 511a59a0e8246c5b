"""The state directory (`/var/lib/jetbench`): as much a hardware path as a sysfs file.

It holds the journal and the board lock, so it is checked before use. Every component under the
root (`var`, `var/lib`, `var/lib/jetbench`; the root itself is the operator's choice) must be:
a real directory (never a symlink: a symlinked `var/lib` would carry root's writes elsewhere);
owned by root or by the user running jetbench; not writable by every user; writable by its
group only when that group is `jetbench` (what `install-service` sets up: root:jetbench, mode
2775, so group members run apply/measure without sudo). A parent (not the state directory
itself) with the sticky bit, like /tmp, may be writable by others: they cannot rename or remove
what they do not own there. It is walked with `O_NOFOLLOW` directory descriptors, so a link
swapped in after the check is refused too, and callers work relative to the descriptor
(`state_dir_fd`).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from ..errors import HardwareError
from ..hw.fs import STATE_DIR, Root

__all__ = ["STATE_DIR", "state_dir_fd"]
GROUP = "jetbench"
FILE_MODE = 0o644  # clock values are no secret; readable by every member of the group
# mkdir mode for the state directory and any missing parent (the umask may take more away).
DIR_MODE = 0o755
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Temporaries jetbench leaves only when killed mid-replace: `.NAME.<random or pid>.tmp`.
TEMP_RE = re.compile(r"^\.[A-Za-z0-9_.-]+\.[0-9A-Za-z]+\.tmp$")


NO_SPACE = (errno.ENOSPC, errno.EDQUOT)  # a full disk, or a user's quota used up


def hint_for(err: OSError, directory: object) -> str:
    """What to do about an OSError writing the state directory: free space there when it is
    full (sudo would not help: root writes into the same full disk), else sudo or the group."""
    if err.errno in NO_SPACE:
        return (f"the disk holding {directory} is full: free space there (df -h {directory}; "
                "nothing else is needed)")
    return "run with sudo, or as a member of the jetbench group"


def _group_name(gid: int) -> Optional[str]:
    try:
        import grp

        return grp.getgrgid(gid).gr_name
    except (KeyError, ImportError):
        return None


def _fix_hint(path: Path) -> str:
    return (f"make it a plain directory owned by root: sudo rm -r {path} (jetbench recreates "
            f"it; check `jetbench restore` first), or sudo jetbench install-service to set it "
            f"up for the {GROUP} group")


def _check_stat(st: os.stat_result, path: Path, *, final: bool) -> None:
    """The checks on one component (`final`: the state directory itself)."""
    if stat.S_ISLNK(st.st_mode):
        raise HardwareError("a symlink stands in the state directory's path", path=str(path),
                            hint=f"remove the link (sudo rm {path}); jetbench recreates "
                                 "the directory")
    if not stat.S_ISDIR(st.st_mode):
        raise HardwareError("the state directory's path holds something other than a "
                            "directory", path=str(path), hint=_fix_hint(path))
    # Someone else who can write a parent could rename the state directory under us; the
    # sticky bit (like /tmp) keeps others' hands off what they do not own, in a parent only.
    what = "the state directory" if final else "a parent of the state directory"
    sticky = not final and st.st_mode & stat.S_ISVTX
    if st.st_uid not in (0, os.geteuid()):
        raise HardwareError(f"{what} is owned by uid {st.st_uid}, not root", path=str(path),
                            hint=f"sudo chown root {path}")
    if st.st_mode & stat.S_IWOTH and not sticky:
        raise HardwareError(f"{what} is writable by every user", path=str(path),
                            hint=f"sudo chmod o-w {path}")
    if st.st_mode & stat.S_IWGRP and not sticky and _group_name(st.st_gid) != GROUP:
        raise HardwareError(f"{what} is writable by group "
                            f"{_group_name(st.st_gid) or st.st_gid}, not {GROUP}",
                            path=str(path),
                            hint=f"sudo chmod g-w {path}" + (
                                f", or sudo chgrp {GROUP} {path} to share the board with the "
                                f"{GROUP} group" if final else ""))


def check_state_dir(root: Root, path: Path) -> None:
    """Refuse a state directory that someone other than its owner could redirect."""
    try:
        st = os.lstat(path)
    except OSError as err:
        raise HardwareError(f"cannot inspect the state directory ({err.strerror})",
                            path=str(path)) from err
    _check_stat(st, path, final=True)
    real = os.path.realpath(path)
    base = os.path.realpath(root.base)
    if base != "/" and not (real + "/").startswith(base.rstrip("/") + "/"):
        raise HardwareError("the state directory resolves outside the root", path=str(path),
                            hint=_fix_hint(path))


def _open_walk(root: Root, create: bool) -> Optional[int]:
    """A descriptor of the checked state directory, walked from the root one component at a
    time without following links; None when it is missing and `create` is false."""
    try:
        fd = os.open(root.base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise HardwareError(f"cannot open the root ({err.strerror})", path=str(root.base)) \
            from err
    current = Path(root.base)
    parts = Path(STATE_DIR.lstrip("/")).parts
    try:
        for k, part in enumerate(parts):
            current = current / part
            final = k == len(parts) - 1
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    return None
                try:
                    os.mkdir(part, DIR_MODE, dir_fd=fd)
                except FileExistsError:
                    pass  # made by a concurrent jetbench: checked like any other below
                except OSError as err:
                    raise HardwareError(f"cannot create the state directory ({err.strerror})",
                                        path=str(current),
                                        hint=hint_for(err, current.parent)) from err
                child = _open_component(part, fd, current)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.ENOTDIR):
                    _check_stat(os.stat(part, dir_fd=fd, follow_symlinks=False), current,
                                final=final)
                raise HardwareError(f"cannot open the state directory ({err.strerror})",
                                    path=str(current), hint="run with sudo") from err
            os.close(fd)
            fd = child
            _check_stat(os.fstat(fd), current, final=final)
        result, fd = fd, -1
        return result
    finally:
        if fd >= 0:
            os.close(fd)


def _open_component(part: str, dir_fd: int, current: Path) -> int:
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            _check_stat(os.stat(part, dir_fd=dir_fd, follow_symlinks=False), current,
                        final=True)
        raise HardwareError(f"cannot open the state directory ({err.strerror})",
                            path=str(current)) from err


@contextmanager
def state_dir_fd(root: Root, create: bool) -> Iterator[Optional[int]]:
    """`with state_dir_fd(root, create=True) as fd:` a checked directory descriptor (None when
    the directory does not exist and `create` is false). Nothing is created when not asked."""
    fd = _open_walk(root, create)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def ensure_state_dir(root: Root) -> Path:
    """The checked state directory, created (0755) with its parents when missing."""
    with state_dir_fd(root, create=True):
        pass
    path = root.path(STATE_DIR)
    check_state_dir(root, path)
    return path


def remove_stale_temporaries(dir_fd: int, prefix: str) -> int:
    """Remove `.PREFIX.*.tmp` files a kill -9 left in the state directory: regular files only
    (a link or anything else with that name is left alone, never followed). The count."""
    removed = 0
    for name in os.listdir(dir_fd):
        if not (name.startswith(f".{prefix}.") and TEMP_RE.match(name)):
            continue
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                os.unlink(name, dir_fd=dir_fd)
                removed += 1
        except OSError:
            pass  # gone already, or not ours to remove
    return removed


def replace_file(dir_fd: int, name: str, text: str, mode: int = FILE_MODE) -> None:
    """Write `name` in the state directory as a new file (exclusive, random name, never through
    a link), fsync it, rename it over `name`, fsync the directory: a reader sees the old file
    or the new one, never half of either."""
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 mode, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, mode)  # whatever the umask: other group members read it
            data = text.encode("utf-8", errors="surrogateescape")
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    os.fsync(dir_fd)


def keep_state_file(root: Root, name: str, text: str) -> bool:
    """Write `name` in the state directory (replace_file), creating the directory where it is
    missing; False where it cannot take it (full, read-only): a fact jetbench only remembers
    for later, which the run goes on without."""
    try:
        with state_dir_fd(root, create=True) as dir_fd:
            assert dir_fd is not None
            replace_file(dir_fd, name, text)
    except OSError:
        return False
    return True
