"""INA3221 rail sensors, both driver layouts.

- iio `ina3221x` (L4T R32 and earlier): `iio:deviceK/in_powerN_input` (mW), `in_voltageN_input`
  (mV), `in_currentN_input` (mA), `rail_name_N`; channels 0-based.
- hwmon `ina3221` (L4T R34+): `hwmonK/inN_input` (bus mV), `currN_input` (mA), `inN_label`,
  `update_interval` (ms); channels 1-based; no power file, so P = V x I.

Unconnected (`NC`) channels and the shunt-sum channel 7 are skipped. The whole-module total is
the `VDD_IN`/`POM_5V_IN` rail where the board has one (never added to the rails it contains),
else the sum of the connected channels (AGX Xavier, AGX Orin), labelled as a sum.

Reads are the hot path of the sampler: `open()` resolves every file once (containment checked by
`Root.resolve`) and keeps a descriptor; each sample is one `os.pread` per file.
"""

from __future__ import annotations

import os
import time
from typing import List, Optional, Sequence, Tuple

from ...errors import HardwareError
from ...power.source import Channel, Reading, Total
from ..board import TOTAL_RAIL_NAMES, Rail, detect_rails
from ..fs import Root

SOURCE_NAME = "ina3221"
SHUNT_SUM_CHANNEL = 7
IIO_DEFAULT_PERIOD_S = 0.01  # the iio driver exposes no update interval; its continuous mode is ~ms
HWMON_DEFAULT_PERIOD_S = 0.01


def connected(rails: Sequence[Rail]) -> List[Rail]:
    """Drop unconnected channels and the hwmon shunt-sum channel."""
    return [
        r for r in rails
        if r.name.strip().upper() != "NC"
        and not (r.layout == "hwmon" and r.channel == SHUNT_SUM_CHANNEL)
    ]


def rail_files(rail: Rail) -> Tuple[str, ...]:
    """The files one sample reads: (power_mW,) for iio when present, else (mV, mA)."""
    d, n = rail.device.rstrip("/"), rail.channel
    if rail.layout == "iio":
        return (f"{d}/in_power{n}_input",)
    if rail.layout == "hwmon":
        return (f"{d}/in{n}_input", f"{d}/curr{n}_input")
    raise ValueError(f"unknown INA3221 layout {rail.layout!r}")


def _iio_vi_files(rail: Rail) -> Tuple[str, str]:
    d, n = rail.device.rstrip("/"), rail.channel
    return (f"{d}/in_voltage{n}_input", f"{d}/in_current{n}_input")


def module_total(rails: Sequence[Rail], total_rail: Optional[str]) -> Optional[Total]:
    """The whole-module total: the named rail, else a module-input rail, else the sum."""
    rails = connected(rails)
    if not rails:
        return None
    names = [r.name for r in rails]
    name = total_rail if total_rail in names else None
    if name is None:
        name = next((n for n in names if n.upper() in TOTAL_RAIL_NAMES), None)
    if name is not None:
        return Total(name, "channel", (name,), "module_input")
    return Total("sum of " + "+".join(names), "sum", tuple(names), "module_input")


class Ina3221Source:
    """Reads INA3221 rails. Construct with board detection's rails; `open()` touches files."""

    pushed = False

    def __init__(
        self,
        root: Root,
        rails: Sequence[Rail],
        total_rail: Optional[str] = None,
        *,
        name: str = SOURCE_NAME,
    ):
        self.root = root
        self.rails = tuple(connected(rails))
        self.total_rail = total_rail
        self.name = name
        self._fds: List[int] = []
        self._plan: List[Tuple[int, int]] = []  # (fd, -1) for mW files, (fd_mV, fd_mA) for V x I
        self._period_s: Optional[float] = None

    def channels(self) -> Tuple[Channel, ...]:
        return tuple(
            Channel(r.name, self.name, r.point, unit="mW" if r.layout == "iio" else "mV x mA")
            for r in self.rails
        )

    def total(self) -> Optional[Total]:
        return module_total(self.rails, self.total_rail)

    @property
    def period_s(self) -> float:
        """The sensor's update interval: hwmon `update_interval` (largest of the devices)."""
        if self._period_s is None:
            self._period_s = self._read_period()
        return self._period_s

    def _read_period(self) -> float:
        periods = []
        for dev in sorted({r.device for r in self.rails if r.layout == "hwmon"}):
            ms = self.root.read_int(f"{dev}/update_interval", default=None)
            if ms:
                periods.append(ms / 1000.0)
        if periods:
            return max(periods)
        if any(r.layout == "hwmon" for r in self.rails):
            return HWMON_DEFAULT_PERIOD_S
        return IIO_DEFAULT_PERIOD_S

    def open(self) -> None:
        self.close()
        try:
            for rail in self.rails:
                files = rail_files(rail)
                if rail.layout == "iio" and not self.root.exists(files[0]):
                    files = _iio_vi_files(rail)  # some R24 kernels lack in_powerN_input
                fds = [self._open_file(f) for f in files]
                self._plan.append((fds[0], fds[1] if len(fds) > 1 else -1))
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
        for fa, fb in self._plan:
            try:
                if fb < 0:
                    values.append(int(pread(fa, 32, 0)) * 1e-3)
                else:
                    values.append(int(pread(fa, 32, 0)) * int(pread(fb, 32, 0)) * 1e-6)
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




def scan_rails(root: Root) -> List[Rail]:
    """Every INA3221 rail under the root, found as board detection finds them."""
    return detect_rails(root)
