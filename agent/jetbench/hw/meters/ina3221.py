"""Board power sensors: the INA3221 (both driver layouts) and the INA238 (Thor's carrier board).

Which files each family has, and their units, is one table: `hw/meters/sensors.py`. This module
only reads what that table names:
- iio `ina3221x` (L4T R32 and earlier): `in_powerN_input` mW (else mV x mA), channels 0-based;
- hwmon `ina3221` (L4T R34+): `inN_input` mV x `currN_input` mA, channels 1-based;
- hwmon `ina238`: `power1_input` in microwatts; the board's input (`VIN`, point `board_input`).

Unconnected (`NC`) channels and the shunt-sum channel 7 are skipped. The total is the board's
input (INA238 VIN) where there is one, else the `VDD_IN`/`POM_5V_IN` rail (never added to the
rails it contains), else the sum of the connected channels (AGX Xavier, AGX Orin), labelled as a
sum. `VIN_SYS_5V0` is never the total.

Reads are the hot path of the sampler: `open()` resolves every file once (containment checked by
`Root.resolve`) and keeps a descriptor; each sample is one `os.pread` per file. A source holds
no descriptor across pickling (the sampler may run in a child process): it is re-opened there.
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Sequence, Tuple

from ...errors import HardwareError
from ..board import Rail, detect_rails
from ..board_tables import TOTAL_RAIL_NAMES
from ..fs import Root
from .base import Channel, Reading, Total
from .sensors import SensorFamily, family_for

SOURCE_NAME = "ina3221"
SHUNT_SUM_CHANNEL = 7


def connected(rails: Sequence[Rail]) -> List[Rail]:
    """Drop unconnected channels and the hwmon shunt-sum channel."""
    return [
        r for r in rails
        if r.name.strip().upper() != "NC"
        and not (r.layout == "hwmon" and r.chip == "ina3221" and r.channel == SHUNT_SUM_CHANNEL)
    ]


def _family(rail: Rail) -> SensorFamily:
    return family_for(rail.chip, rail.layout)


def rail_files(rail: Rail) -> Tuple[str, ...]:
    """The files one sample reads: (power,) where the family has a power file, else (mV, mA)."""
    fam, d = _family(rail), rail.device.rstrip("/")
    power = fam.power(rail.channel)
    if power:
        return (f"{d}/{power}",)
    return tuple(f"{d}/{f}" for f in fam.volts_amps(rail.channel))


def _vi_files(rail: Rail) -> Tuple[str, ...]:
    d = rail.device.rstrip("/")
    return tuple(f"{d}/{f}" for f in _family(rail).volts_amps(rail.channel))


def module_total(rails: Sequence[Rail], total_rail: Optional[str]) -> Optional[Total]:
    """The total: the named rail, else a board or module input rail, else the sum."""
    rails = connected(rails)
    if not rails:
        return None
    names = [r.name for r in rails]
    name = total_rail if total_rail in names else None
    if name is None:
        name = next((r.name for r in rails if r.point == "board_input"), None)
    if name is None:
        name = next((n for n in names if n.upper() in TOTAL_RAIL_NAMES), None)
    if name is not None:
        point = next(r.point for r in rails if r.name == name)
        return Total(name, "channel", (name,), point if point != "rail" else "module_input")
    return Total("sum of " + "+".join(names), "sum", tuple(names), "module_input")


class RailSource:
    """Reads board sensor rails (any family in the sensor table). Construct with board
    detection's rails; `open()` touches files. `has_total=False`: another source holds the
    total (Thor's INA3221 rails beside the INA238's VIN), so this one names none."""

    pushed = False

    def __init__(
        self,
        root: Root,
        rails: Sequence[Rail],
        total_rail: Optional[str] = None,
        *,
        name: str = SOURCE_NAME,
        has_total: bool = True,
    ):
        self.root = root
        self.rails = tuple(connected(rails))
        self.total_rail = total_rail
        self.name = name
        self.has_total = has_total
        self._fds: List[int] = []
        # (fd, -1, W per unit) for power files, (fd_mV, fd_mA, W per mV x mA) for V x I
        self._plan: List[Tuple[int, int, float]] = []
        self._period_s: Optional[float] = None

    def __getstate__(self) -> Dict[str, object]:
        state = dict(self.__dict__)
        state["_fds"], state["_plan"] = [], []  # descriptors never cross a process boundary
        return state

    def channels(self) -> Tuple[Channel, ...]:
        return tuple(Channel(r.name, self.name, r.point, unit=_family(r).unit)
                     for r in self.rails)

    def total(self) -> Optional[Total]:
        return module_total(self.rails, self.total_rail) if self.has_total else None

    @property
    def period_s(self) -> float:
        """How often the sensor's readings refresh: hwmon `update_interval` x `samples` (the
        slowest of the devices), else the family's default period."""
        if self._period_s is None:
            self._period_s = self._read_period()
        return self._period_s

    def _read_period(self) -> float:
        """The slowest device's conversion cycle (ms) times its averaging count, else its
        family's default period (a driver that shows neither: docs/hardware.md)."""
        periods = []
        for dev, fam in sorted({(r.device, _family(r)) for r in self.rails},
                               key=lambda x: x[0]):
            ms = self.root.read_int(f"{dev}/{fam.interval_file}", default=None) \
                if fam.interval_file else None
            samples = self.root.read_int(f"{dev}/{fam.samples_file}", default=None) \
                if fam.samples_file else None
            period = ms / 1000.0 if ms else fam.default_period_s
            periods.append(period * samples if ms and samples and samples > 0 else period)
        return max(periods, default=0.01)

    def open(self) -> None:
        self.close()
        try:
            for rail in self.rails:
                fam = _family(rail)
                files = rail_files(rail)
                scale = fam.power_w_per_unit
                if len(files) == 1 and not self.root.exists(files[0]):
                    # Some R24 kernels lack in_powerN_input: P = V x I.
                    files, scale = _vi_files(rail), 1e-6
                elif len(files) == 2:
                    scale = 1e-6
                fds = [self._open_file(f) for f in files]
                self._plan.append((fds[0], fds[1] if len(fds) > 1 else -1, scale))
        except BaseException:
            self.close()
            raise
        self.period_s  # noqa: B018 - read the update interval once, while opening

    def _open_file(self, board_path: str) -> int:
        try:
            host = self.root.path(self.root.resolve(board_path))
            fd = os.open(host, os.O_RDONLY)
        except OSError:
            self.root.read_bytes(board_path)  # raises the jetbench error with path and hint
            raise HardwareError("cannot open", path=board_path) from None
        self._fds.append(fd)
        return fd

    def read(self) -> Reading:
        pread = os.pread
        t_a = time.monotonic()
        values: List[Optional[float]] = []
        for fa, fb, scale in self._plan:
            try:
                if fb < 0:
                    values.append(int(pread(fa, 32, 0)) * scale)
                else:
                    values.append(int(pread(fa, 32, 0)) * int(pread(fb, 32, 0)) * scale)
            except (OSError, ValueError):  # an I2C read error (EIO) is one missing value
                values.append(None)
        return Reading((t_a + time.monotonic()) * 0.5, tuple(values))

    def close(self) -> None:
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
        self._plan = []


# The name the rest of jetbench (and `--meter ina3221`) has always used.
Ina3221Source = RailSource


def scan_rails(root: Root) -> List[Rail]:
    """Every sensor rail under the root, found as board detection finds them."""
    return detect_rails(root)


def rail_sources(root: Root, rails: Sequence[Rail], total_rail: Optional[str] = None
                 ) -> List[RailSource]:
    """One source per sensor chip (each has its own update rate), named after the chip; the one
    holding the total first (reports take the first source's total as the primary one)."""
    groups: Dict[str, List[Rail]] = {}
    for rail in connected(rails):
        groups.setdefault(rail.chip, []).append(rail)
    holder = next((chip for chip, rs in groups.items()
                   if module_total(rs, total_rail) is not None
                   and total_rail in [r.name for r in rs]), None)
    if holder is None:
        holder = next((chip for chip, rs in groups.items()
                       if any(r.point == "board_input" for r in rs)), None)
    order = sorted(groups, key=lambda chip: chip != holder)
    return [RailSource(root, groups[chip], total_rail, name=chip,
                       has_total=holder is None or chip == holder) for chip in order]
