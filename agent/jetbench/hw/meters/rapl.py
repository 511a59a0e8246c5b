"""Intel/AMD RAPL energy counters (`/sys/class/powercap/intel-rapl:N`).

Each top-level zone is one energy channel (cumulative joules, unwrapped through
`max_energy_range_uj`). Sub-zones (`intel-rapl:0:0` core, uncore, dram) are contained in their
package and are never added to it; `psys` (the platform zone) contains the packages, so the
total is the sum of the non-psys top-level zones. Since Linux 5.10 (CVE-2020-8694) `energy_uj`
is readable by root only: the error says how to grant a group read access.
"""

from __future__ import annotations

import os
import re
import time
from typing import List, Optional, Tuple

from ...errors import PermissionDenied
from ..fs import Root
from .base import KIND_ENERGY, Channel, Reading, Total

SOURCE_NAME = "rapl"
POWERCAP = "/sys/class/powercap"
_TOP_LEVEL = re.compile(r"intel-rapl:\d+")
PERMISSION_HINT = (
    "energy_uj is root-only since Linux 5.10 (CVE-2020-8694): run with sudo, or grant a group "
    "read access, e.g. a udev rule SUBSYSTEM==\"powercap\", ACTION==\"add\", "
    "RUN+=\"/bin/chgrp jetbench /sys%p/energy_uj\", RUN+=\"/bin/chmod g+r /sys%p/energy_uj\" "
    "(see udev/), or once: sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj"
)


def unreadable_reason(root: Root) -> Optional[str]:
    """Why RAPL's energy counters cannot be read here (None: they can): root-only since 2020."""
    for path in rapl_zones(root):
        try:
            fd = os.open(root.path(root.resolve(f"{path}/energy_uj")), os.O_RDONLY)
        except PermissionError:
            return ("RAPL's energy_uj is readable by root only (Linux 5.10+, CVE-2020-8694): "
                    "run with sudo or see `jetbench info` for the udev rule")
        except OSError as err:
            return f"RAPL's energy_uj cannot be read ({err.strerror})"
        os.close(fd)
    return None


def rapl_zones(root: Root) -> List[str]:
    """Board paths of the top-level zones (never the nested ones)."""
    return [
        p for p in root.glob(f"{POWERCAP}/intel-rapl:*")
        if _TOP_LEVEL.fullmatch(p.rsplit("/", 1)[-1]) and root.exists(f"{p}/energy_uj")
    ]


def unwrap(previous_uj: int, current_uj: int, max_range_uj: int) -> int:
    """Microjoules consumed between two counter reads, across at most one wraparound."""
    delta = current_uj - previous_uj
    if delta < 0:
        delta += max_range_uj
    return delta


class RaplSource:
    pushed = False
    period_s = 0.01  # the counters update every ~1 ms; 10 ms reads keep the edges sharp

    def __init__(self, root: Root, *, name: str = SOURCE_NAME):
        self.root = root
        self.name = name
        self._zones: List[Tuple[str, str, int]] = []  # (path, name, max_range_uj)
        self._fds: List[int] = []
        self._last: List[int] = []
        self._total_uj: List[int] = []

    def _scan(self) -> List[Tuple[str, str, int]]:
        if not self._zones:
            zones = []
            for path in rapl_zones(self.root):
                label = self.root.read(f"{path}/name", default=path.rsplit("/", 1)[-1])
                max_uj = self.root.read_int(f"{path}/max_energy_range_uj", default=2**32)
                zones.append((path, label, max_uj))
            self._zones = zones
        return self._zones

    def channels(self) -> Tuple[Channel, ...]:
        return tuple(
            Channel(label, self.name, "package", kind=KIND_ENERGY, unit="uJ counter")
            for _path, label, _max in self._scan()
        )

    def total(self) -> Optional[Total]:
        names = [label for _p, label, _m in self._scan() if label != "psys"]
        if not names:
            return None
        if len(names) == 1:
            return Total(names[0], "channel", (names[0],), "package")
        return Total("sum of " + "+".join(names), "sum", tuple(names), "package")

    def open(self) -> None:
        self.close()
        for path, _label, _max in self._scan():
            board = f"{path}/energy_uj"
            try:
                fd = os.open(self.root.path(self.root.resolve(board)), os.O_RDONLY)
                first = int(os.pread(fd, 32, 0))
            except PermissionError as err:
                self.close()
                raise PermissionDenied(
                    "cannot read the RAPL energy counter", path=board, hint=PERMISSION_HINT
                ) from err
            self._fds.append(fd)
            self._last.append(first)
            self._total_uj.append(0)

    def read(self) -> Reading:
        t_a = time.monotonic()
        values: List[Optional[float]] = []
        for k, fd in enumerate(self._fds):
            try:
                raw = int(os.pread(fd, 32, 0))
            except (OSError, ValueError):
                values.append(None)
                continue
            self._total_uj[k] += unwrap(self._last[k], raw, self._zones[k][2])
            self._last[k] = raw
            values.append(self._total_uj[k] * 1e-6)
        return Reading((t_a + time.monotonic()) * 0.5, tuple(values))

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds, self._last, self._total_uj = [], [], []
