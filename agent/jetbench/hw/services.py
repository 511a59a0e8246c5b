"""systemd services that own a knob jetbench writes: `nvfancontrol` owns the fan's `pwm1` on
JetPack 5/6 and moves it back within seconds, so `--fan` stops it first (as NVIDIA's
`jetson_clocks --fan` does) and restore starts it again.

A service is a knob like a file, keyed `service:<unit>` with the value `active` or `inactive`:
it is planned, journalled before the stop, rolled back and restored through hw/knob_io.py, so
a killed jetbench leaves a journal that `jetbench restore` (or the daemon's stop) uses to start
the service again.

Which `systemctl` runs: on the host root (`/`) only `/usr/bin/systemctl` or `/bin/systemctl`,
and only on a system booted with systemd; the environment cannot change that, since the daemon
runs as root. Under a simulated root (`--root` elsewhere) no real service is ever touched:
services exist only when JETBENCH_SYSTEMCTL names a stand-in command (the tests' fake
systemctl); without it a simulated board has no service manager.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import List, Optional

from ..errors import HardwareError, UnsafePath
from .fs import Root

KEY_PREFIX = "service:"
NVFANCONTROL = "nvfancontrol"
# The services jetbench may stop and start: nothing else, whatever a journal says.
KNOWN = (NVFANCONTROL,)
ACTIVE = "active"
INACTIVE = "inactive"
VALUES = (ACTIVE, INACTIVE)
ENV_SYSTEMCTL = "JETBENCH_SYSTEMCTL"  # honoured under a simulated root only
_HOST_SYSTEMCTL = ("/usr/bin/systemctl", "/bin/systemctl")
_TIMEOUT_S = 30.0  # a stop waits for the unit's ExecStop; nvfancontrol's is quick
# ActiveState values of a unit that runs or is about to (systemd's unit states).
_RUNNING = ("active", "activating", "reloading")


def key(unit: str) -> str:
    return f"{KEY_PREFIX}{unit}"


def is_key(path: str) -> bool:
    return path.startswith(KEY_PREFIX)


def parse_key(path: str) -> str:
    """The unit of a knob key; UnsafePath for any service jetbench does not manage."""
    unit = path[len(KEY_PREFIX):]
    if not is_key(path) or unit not in KNOWN:
        raise UnsafePath(f"not a service jetbench manages: {path[:80]!r}")
    return unit


def check_value(path: str, raw: str) -> None:
    parse_key(path)
    if raw.strip() not in VALUES:
        raise UnsafePath(f"{raw[:40]!r} is not a service state (active/inactive)", path=path)


def systemctl(root: Root) -> Optional[List[str]]:
    """The systemctl command for this root, or None when there is no service manager."""
    if root.is_host:
        if not os.path.isdir("/run/systemd/system"):  # sd_booted(): not booted with systemd
            return None
        for path in _HOST_SYSTEMCTL:
            if os.access(path, os.X_OK):
                return [path]
        return None
    command = os.environ.get(ENV_SYSTEMCTL, "")
    return shlex.split(command) or None


def _run(root: Root, args: List[str], path: str) -> subprocess.CompletedProcess:
    command = systemctl(root)
    assert command is not None
    try:
        return subprocess.run(command + args, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise HardwareError(f"systemctl {' '.join(args)} failed ({err})", path=path) from err


def state(root: Root, unit: str) -> Optional[str]:
    """ACTIVE or INACTIVE, or None when the unit is not installed (or there is no systemd)."""
    if systemctl(root) is None:
        return None
    done = _run(root, ["show", "--property=LoadState", "--property=ActiveState",
                       f"{unit}.service"], key(unit))
    if done.returncode != 0:
        return None
    props = dict(line.partition("=")[::2] for line in done.stdout.splitlines() if "=" in line)
    if props.get("LoadState", "not-found") != "loaded":
        return None
    return ACTIVE if props.get("ActiveState") in _RUNNING else INACTIVE


def read_setting(root: Root, path: str) -> str:
    """The knob's value (`active`/`inactive`); a unit that vanished reads `inactive`."""
    return state(root, parse_key(path)) or INACTIVE


def write_setting(root: Root, path: str, value: str) -> None:
    """Start (`active`) or stop (`inactive`) the unit."""
    check_value(path, value)
    unit = parse_key(path)
    if systemctl(root) is None:
        raise HardwareError(f"cannot {'start' if value.strip() == ACTIVE else 'stop'} {unit}: "
                            "no systemd here", path=path)
    verb = "start" if value.strip() == ACTIVE else "stop"
    done = _run(root, [verb, f"{unit}.service"], path)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise HardwareError(
            f"systemctl {verb} {unit} failed (exit {done.returncode}"
            + (f": {said[-1][:200]}" if said else "") + ")",
            path=path, hint="run with sudo: stopping and starting services needs root")



# The knob backend (hw/knob_io.py): a service's state read and set like a file.
read_knob = read_setting
write_knob = write_setting


def readable(path: str) -> bool:
    return True  # a service's state reads back
