"""Root-relative reads and writes of hardware files.

Every access to /sys, /proc, /etc and debugfs goes through a `Root`. Paths are given as they are
on a board (`/sys/devices/...`) and are looked up under the root (`--root`, default `/`), so the
same code runs on a real board, a simulated board or a snapshot copied off a board.

Writes are confined to an allowlist of clock and power-control locations, checked after
resolving symlinks and `..`, and always inside the root. Raw `OSError`s become jetbench errors
that carry the path and a hint.
"""

from __future__ import annotations

import errno
import fnmatch
import os
from pathlib import Path
from typing import Iterator, List, Optional, Union

from ..errors import (
    HardwareError,
    LinkedAway,
    MissingFile,
    PermissionDenied,
    UnsafePath,
    WriteRejected,
)

# jetbench's state directory under the root (the journal, the board lock, this boot's facts):
# ownership/statedir.py checks it before use; hw/ only reads the facts kept there.
STATE_DIR = "/var/lib/jetbench"
# Board-relative prefixes (no leading slash) under which jetbench may write.
WRITE_ALLOWLIST = (
    "sys/devices/system/cpu",
    "sys/devices",
    "sys/class/devfreq",
    "sys/kernel/debug/clock",
    "sys/kernel/debug/clk",
    "sys/kernel/debug/bpmp",
    "sys/kernel/debug/tegra_fan",
    "sys/kernel/cluster",
    "sys/devices/pwm-fan",
    "sys/kernel/nvpmodel_clk_cap",  # the mode's EMC cap: lifted only by --beyond-power-mode
    "sys/kernel/nvpmodel_emc_cap",
)
# Files under sys/devices that unbind, remove, reset or reprogram hardware: never a tuning knob,
# whatever the knob table below says (names, then names by parent directory).
WRITE_DENY_NAMES = frozenset(
    {"remove", "rescan", "reset", "reset_method", "bind", "unbind", "new_id", "remove_id",
     "uevent", "driver_override", "delete_device", "new_device", "authorized",
     "authorized_default", "delete", "eject", "loading", "sriov_numvfs", "nowayout",
     "pretimeout", "pretimeout_governor", "timeout"}
)
# Parent directories whose files are never knobs: memory hotplug (`memoryN/online`), watchdogs.
WRITE_DENY_PARENTS = ("memory*", "watchdog*")
# The clock/power knobs jetbench writes: (file name glob, parent directory glob, under prefix).
# Everything a planner, a profile's [[write]] or a journal entry writes must match one row.
_DEBUGFS = "sys/kernel/debug"
KNOB_FILES = (
    ("scaling_*", "cpufreq", ""),          # scaling_governor/min_freq/max_freq/setspeed
    ("scaling_*", "policy[0-9]*", ""),     # the same files seen through cpufreq/policyN
    ("online", "cpu[0-9]*", ""),           # CPU hotplug (never memoryN/online)
    ("disable", "state[0-9]*", ""),        # cpuidle/stateK/disable
    ("enable", "tegra_cpuquiet", ""),      # R24 cpuquiet
    ("current_governor", "cpuquiet", ""),
    ("immediate", "cluster", ""), ("force", "cluster", ""), ("active", "cluster", ""),  # R24
    ("governor", "*", ""), ("min_freq", "*", ""), ("max_freq", "*", ""),  # devfreq nodes
    ("set_freq", "userspace", ""),         # devfreq userspace governor
    ("railgate_enable", "*", ""),
    ("control", "power", ""),              # runtime PM: `on` keeps a device (Thor's GPU) powered
    ("target_pwm", "*", ""), ("temp_control", "*", ""),  # pwm-fan, debugfs tegra_fan
    ("pwm[0-9]", "*", ""), ("pwm[0-9]_enable", "*", ""),  # hwmon fan
    ("rate", "*", _DEBUGFS), ("state", "override.*", _DEBUGFS),  # debugfs clock overrides (R24)
    ("clk_state", "override.*", _DEBUGFS), ("clk_update_rate", "override.*", _DEBUGFS),
    ("mrq_rate_locked", "*", _DEBUGFS), ("min_rate", "*", _DEBUGFS),  # BPMP clocks
    ("max_rate", "*", _DEBUGFS),
    ("state", "emc", _DEBUGFS), ("bwmgr_halt", "bwmgr", _DEBUGFS),  # R36+ EMC lock recipe
    ("emc", "nvpmodel_clk_cap", ""), ("emc_iso_cap", "nvpmodel_emc_cap", ""),  # EMC mode caps
)
# A sysfs store gets at most one page; no knob holds more.
MAX_KNOB_BYTES = 4096

_HINT_PERMISSION = (
    "run with sudo, or install the udev rules (udev/) and add yourself to the jetbench group"
)
_HINT_DEBUGFS_ROOT = "debugfs is readable by root only: run with sudo"
_HINT_DEBUGFS_MOUNT = "debugfs is not mounted: sudo mount -t debugfs none /sys/kernel/debug"
_HINT_MISSING = "this board or L4T release does not have this file (see `jetbench info`)"

_Raise = object()


def _board_rel(path: str) -> str:
    """'/sys/x/../y' -> 'sys/y' (lexical; symlinks are handled by `resolve`)."""
    if "\x00" in str(path):
        raise UnsafePath(f"a NUL character in a path: {str(path)!r}")
    parts: List[str] = []
    for part in str(path).split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise UnsafePath(f"path climbs above the root: {path}")
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def is_knob(rel: str) -> bool:
    """Whether a resolved board-relative path is a clock/power knob (and not a denied file)."""
    parts = rel.split("/")
    name, parent = parts[-1], parts[-2] if len(parts) > 1 else ""
    if name in WRITE_DENY_NAMES or "reset" in name:
        return False
    if any(fnmatch.fnmatchcase(part, pat) for part in parts[:-1] for pat in WRITE_DENY_PARENTS):
        return False
    return any(
        fnmatch.fnmatchcase(name, name_pat) and fnmatch.fnmatchcase(parent, parent_pat)
        and (not under or rel.startswith(under + "/"))
        for name_pat, parent_pat, under in KNOB_FILES
    )


def check_knob_value(text: str, path: str) -> None:
    """Refuse a value no knob takes: control characters (one trailing newline aside, as `echo`
    writes it) or more than a sysfs page. A newline inside would be two writes in one."""
    body = text[:-1] if text.endswith("\n") else text
    bad = next((c for c in body if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise UnsafePath(f"refusing a value with a control character ({bad!r}): {body[:40]!r}",
                         path=path, hint="a knob takes one line of printable text")
    size = len(text.encode("utf-8", errors="surrogateescape"))
    if size > MAX_KNOB_BYTES:
        raise UnsafePath(f"refusing a {size}-byte value: a knob holds at most "
                         f"{MAX_KNOB_BYTES} bytes (one sysfs page)", path=path)


class Root:
    """A filesystem root. Constructing one touches nothing."""

    def __init__(self, base: Union[str, os.PathLike] = "/"):
        self.base = Path(os.path.abspath(os.fspath(base)))

    def __repr__(self) -> str:
        return f"Root({str(self.base)!r})"

    @property
    def is_host(self) -> bool:
        return str(self.base) == "/"

    # -- paths -------------------------------------------------------------------------------
    def path(self, board_path: str) -> Path:
        """Where a board path lies on this machine (lexical: no symlinks followed)."""
        rel = _board_rel(board_path)
        return self.base / rel if rel else self.base

    def to_board(self, host_path: Union[str, os.PathLike]) -> str:
        """The inverse of `path`: '/sys/...' as the board sees it."""
        rel = os.path.relpath(os.fspath(host_path), self.base)
        if rel == ".":
            return "/"
        if rel.startswith(".."):
            raise UnsafePath(f"outside the root {self.base}", path=os.fspath(host_path))
        return "/" + rel

    def resolve(self, board_path: str) -> str:
        """The board path after following every symlink; refuses anything leaving the root
        (LinkedAway, exit 2, when a symbolic link on the board is what leads out)."""
        lexical = self.path(board_path)
        real = os.path.realpath(lexical)
        base = str(self.base)
        if not (real == base or base == "/" or real.startswith(base + os.sep)):
            linked = real != os.path.normpath(os.path.abspath(lexical))
            raise (LinkedAway if linked else UnsafePath)(
                "refusing a path that resolves outside the root"
                + (" (a symbolic link on the board)" if linked else ""),
                path=board_path,
                hint=f"it resolves to {real}, outside {base}",
            )
        return self.to_board(real)

    def check_writable(self, board_path: str) -> str:
        """The resolved board path if jetbench may write it, else UnsafePath."""
        resolved = self.resolve(board_path)
        rel = resolved.lstrip("/")
        linked = resolved != "/" + _board_rel(board_path)
        shown = f"{board_path} -> {resolved}" if linked else board_path
        # Refused because of where a link leads: the same exit (2) as a link leaving the root.
        refuse = LinkedAway if linked else UnsafePath
        allowed = any(rel == p or rel.startswith(p + "/") for p in WRITE_ALLOWLIST)
        if not allowed:
            raise refuse(
                "refusing to write outside the clock/power-control allowlist",
                path=shown,
                hint="allowed: " + ", ".join("/" + p for p in WRITE_ALLOWLIST),
            )
        if not is_knob(rel):
            raise refuse(
                "refusing to write a file that is not a known clock/power knob",
                path=shown,
                hint="knobs are cpufreq scaling_*, cpu online, cpuidle disable, devfreq "
                     "governor/min_freq/max_freq, railgate_enable, power/control, fan pwm, "
                     "debugfs clock overrides (see KNOB_FILES in jetbench/hw/fs.py)",
            )
        return resolved

    # -- queries -----------------------------------------------------------------------------
    def exists(self, board_path: str) -> bool:
        return self.path(board_path).exists()

    def is_dir(self, board_path: str) -> bool:
        return self.path(board_path).is_dir()

    def is_link(self, board_path: str) -> bool:
        return self.path(board_path).is_symlink()

    def listdir(self, board_path: str) -> List[str]:
        try:
            return sorted(os.listdir(self.path(board_path)))
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            return []
        except PermissionError as err:
            raise self._error(err, board_path) from err

    def glob(self, pattern: str) -> List[str]:
        """Board paths matching a glob pattern such as '/sys/class/devfreq/*'."""
        rel = _board_rel(pattern)
        return sorted(self.to_board(p) for p in self.base.glob(rel))

    def walk_files(self, board_path: str) -> Iterator[str]:
        top = self.path(board_path)
        for dirpath, _dirs, files in os.walk(top):
            for name in files:
                yield self.to_board(os.path.join(dirpath, name))

    # -- reads -------------------------------------------------------------------------------
    def read_bytes(self, board_path: str, default: object = _Raise) -> bytes:
        host = self.path(self.resolve(board_path)) if not self.is_host else self.path(board_path)
        try:
            with open(host, "rb") as f:
                return f.read()
        except OSError as err:
            if default is not _Raise and isinstance(
                err, (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError)
            ):
                return default  # type: ignore[return-value]
            raise self._error(err, board_path) from err

    def read_raw(self, board_path: str, default: object = _Raise) -> str:
        """The exact text of a file (for the state journal: restored byte for byte)."""
        data = self.read_bytes(board_path, default=default)
        if not isinstance(data, bytes):
            return data  # the default
        return data.decode("utf-8", errors="surrogateescape")

    def read(self, board_path: str, default: object = _Raise) -> str:
        """File text without surrounding whitespace and NULs (device-tree strings end in NUL)."""
        text = self.read_raw(board_path, default=default)
        if not isinstance(text, str):
            return text
        return text.strip().strip("\x00").strip()

    def read_int(self, board_path: str, default: object = _Raise) -> int:
        text = self.read(board_path, default=default)
        if not isinstance(text, str):
            return text  # the default
        try:
            return int(text.split()[0])
        except (ValueError, IndexError) as err:
            if default is not _Raise:
                return default  # type: ignore[return-value]
            raise HardwareError(f"expected an integer, read {text!r}", path=board_path) from err

    def read_ints(self, board_path: str, default: object = _Raise) -> List[int]:
        text = self.read(board_path, default=default)
        if not isinstance(text, str):
            return text  # the default
        try:
            return [int(word) for word in text.split()]
        except ValueError as err:
            if default is not _Raise:
                return default  # type: ignore[return-value]
            raise HardwareError(f"expected integers, read {text!r}", path=board_path) from err

    def read_strings(self, board_path: str, default: object = _Raise) -> List[str]:
        """A NUL-separated device-tree string list (`compatible`)."""
        text = self.read_raw(board_path, default=default)
        if not isinstance(text, str):
            return text
        return [part for part in text.split("\x00") if part.strip()]

    # -- writes ------------------------------------------------------------------------------
    def write(self, board_path: str, value: Union[str, int]) -> None:
        """Write a value the way `echo VALUE > FILE` does: one write(2), trailing newline."""
        text = str(value)
        if not text.endswith("\n"):
            text += "\n"
        self.write_raw(board_path, text)

    def write_raw(self, board_path: str, text: str) -> None:
        """Write exact text (for restore). Never creates a file: sysfs files already exist."""
        check_knob_value(text, board_path)
        resolved = self.check_writable(board_path)
        host = self.path(resolved)
        data = text.encode("utf-8", errors="surrogateescape")
        try:
            fd = os.open(host, os.O_WRONLY | os.O_TRUNC)
        except OSError as err:
            raise self._error(err, board_path, value=text.strip()) from err
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise WriteRejected(
                    f"short write ({written} of {len(data)} bytes)", path=board_path
                )
        except OSError as err:
            raise self._error(err, board_path, value=text.strip()) from err
        finally:
            os.close(fd)

    # -- errors ------------------------------------------------------------------------------
    def _debugfs_mounted(self) -> bool:
        return bool(self.listdir("/sys/kernel/debug"))

    def _error(self, err: OSError, board_path: str, value: Optional[str] = None) -> HardwareError:
        in_debugfs = _board_rel(board_path).startswith("sys/kernel/debug")
        where = board_path if self.is_host else f"{board_path} (under {self.base})"
        if isinstance(err, FileNotFoundError):
            if in_debugfs and not self._debugfs_mounted():
                return MissingFile("debugfs file not found", path=where, hint=_HINT_DEBUGFS_MOUNT)
            return MissingFile("no such file", path=where, hint=_HINT_MISSING)
        if isinstance(err, PermissionError) or err.errno in (errno.EACCES, errno.EPERM):
            hint = _HINT_DEBUGFS_ROOT if in_debugfs else _HINT_PERMISSION
            return PermissionDenied("permission denied", path=where, hint=hint)
        reason = os.strerror(err.errno) if err.errno else str(err)
        if value is not None:
            return WriteRejected(
                f"the kernel rejected {value!r} ({reason})",
                path=where,
                hint="the value may be outside the range this clock accepts now",
            )
        return HardwareError(f"cannot access ({reason})", path=where)
