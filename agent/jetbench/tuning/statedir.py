"""The state directory (`/var/lib/jetbench`): as much a hardware path as a sysfs file.

It holds the journal and the board lock, so it is checked before use: inside the root after
resolution, not a symlink, owned by root (or by the user running jetbench), and not writable
by others (group-writable only for the `jetbench` group that `install-service` sets up).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import HardwareError
from ..hw.fs import Root

STATE_DIR = "/var/lib/jetbench"
GROUP = "jetbench"


def _group_ok(gid: int) -> bool:
    try:
        import grp

        return grp.getgrgid(gid).gr_name == GROUP
    except (KeyError, ImportError):
        return False


def check_state_dir(root: Root, path: Path) -> None:
    """Refuse a state directory that someone other than its owner could redirect."""
    try:
        st = os.lstat(path)
    except OSError as err:
        raise HardwareError(f"cannot inspect the state directory ({err.strerror})",
                            path=str(path)) from err
    fix = f"remove it and let jetbench recreate it (sudo rm -r {path})"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise HardwareError("the state directory is not a plain directory (a symlink?)",
                            path=str(path), hint=fix)
    real = os.path.realpath(path)
    base = os.path.realpath(root.base)
    if base != "/" and not (real + "/").startswith(base.rstrip("/") + "/"):
        raise HardwareError("the state directory resolves outside the root", path=str(path),
                            hint=fix)
    if st.st_uid not in (0, os.geteuid()):
        raise HardwareError(f"the state directory is owned by uid {st.st_uid}, not root",
                            path=str(path), hint=fix)
    if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and not _group_ok(st.st_gid)):
        raise HardwareError("the state directory is writable by other users", path=str(path),
                            hint=f"sudo chmod go-w {path}")


def ensure_state_dir(root: Root) -> Path:
    """The checked state directory, created (0755) with its parents when missing."""
    path = root.path(STATE_DIR)
    # Each parent must be a real directory too: a symlinked /var/lib would redirect us.
    rel_parts = Path(STATE_DIR.lstrip("/")).parts
    current = Path(root.base)
    for part in rel_parts:
        current = current / part
        try:
            os.mkdir(current, 0o755)
        except FileExistsError:
            pass
        except OSError as err:
            raise HardwareError(f"cannot create the state directory ({err.strerror})",
                                path=str(current), hint="run with sudo") from err
        if os.path.islink(current):
            raise HardwareError("a symlink stands in the state directory's path",
                                path=str(current), hint=f"remove the link: sudo rm {current}")
    check_state_dir(root, path)
    return path
