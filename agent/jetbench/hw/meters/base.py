"""The one small interface every power source implements.

A source (INA3221 rails, a serial meter, RAPL, NVML, jtop) describes its channels once and then
answers `read()` with a `Reading`: one monotonic timestamp and one value per channel. Values are
watts for power channels and cumulative joules for energy-counter channels (RAPL, NVML total
energy); `None` means "not available in this reading" and is never turned into 0.

A source that cannot produce a reading right now raises `SourceFault` with a kind (stall,
disconnect, garbage, partial, error_reply, read_error); the sampler counts it, records a gap and
carries on (reopening the source when the fault says so). Constructors only store arguments:
`open()` touches the hardware.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping, Optional, Protocol, Sequence, Tuple

from ...errors import HardwareError

# Where a channel was measured; reports always say which.
POINTS = ("module_input", "rail", "external", "package", "gpu_board", "board_input")
# What a figure covers, by measurement point: the module (its input or rails, the CPU package,
# a GPU's own board), the whole carrier board (Thor's VIN), or the wall (an external meter at
# the supply's input). docs/power.md, "Wall energy".
SCOPES = {"module_input": "module", "rail": "module", "package": "module",
          "gpu_board": "module", "board_input": "board", "external": "wall"}


def scope_of(point: str) -> str:
    return SCOPES.get(point, "module")
# What a channel's values are.
KIND_POWER = "power"  # watts, sampled
KIND_ENERGY = "energy"  # cumulative joules from a counter (exact energy between two reads)

FAULT_KINDS = ("stall", "disconnect", "garbage", "partial", "error_reply", "read_error")


@dataclass(frozen=True)
class Channel:
    """One measured quantity of a source.

    name: the rail or instrument channel ("VDD_IN", "P1"); source: the source's name
    ("ina3221", "scpi:/dev/ttyUSB0"); point: one of POINTS; kind: KIND_POWER or KIND_ENERGY;
    unit: how the hardware reports it ("mW", "mV x mA", "uJ counter", "W").
    """

    name: str
    source: str
    point: str
    kind: str = KIND_POWER
    unit: str = "W"

    def __post_init__(self) -> None:
        if self.point not in POINTS:
            raise ValueError(f"unknown measurement point {self.point!r}")
        if self.kind not in (KIND_POWER, KIND_ENERGY):
            raise ValueError(f"unknown channel kind {self.kind!r}")

    @property
    def key(self) -> str:
        """Unique across sources: 'ina3221/VDD_IN'."""
        return f"{self.source}/{self.name}"


@dataclass(frozen=True)
class Total:
    """How a source's whole-device figure is formed.

    kind "channel": one channel is the total (VDD_IN); "sum": the sum of `channels`
    (AGX Xavier, AGX Orin, RAPL packages). `name` is what reports print.
    """

    name: str
    kind: str
    channels: Tuple[str, ...]
    point: str

    def describe(self) -> str:
        if self.kind == "channel":
            return f"{self.name} (measured at {self.point})"
        return f"{self.name} (a sum, measured at {self.point})"


@dataclass(frozen=True)
class Reading:
    """One sample: monotonic time (time.monotonic()) and a value per channel, in channel order.

    power_w holds watts for power channels and cumulative joules for energy channels (the
    sampler and the maths know which from `Channel.kind`); None = not available, never 0.
    """

    t_s: float
    power_w: Tuple[Optional[float], ...]


class SourceFault(HardwareError):
    """A reading that could not be taken. Counted by the sampler; never a crash."""

    def __init__(self, kind: str, message: str, *, reopen: bool = False):
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.reopen = reopen


class PowerSource(Protocol):
    """What the sampler needs from a source.

    name: unique label ("ina3221", "stream:socket://127.0.0.1:5025");
    period_s: the natural update interval (sensor conversion/averaging time, instrument rate);
    pushed: True when the instrument sends data on its own (read() blocks until the next one),
    False when the sampler paces the reads.
    """

    name: str
    period_s: float
    pushed: bool

    def channels(self) -> Sequence[Channel]: ...

    def total(self) -> Optional[Total]: ...

    def open(self) -> None: ...

    def read(self) -> Reading: ...

    def close(self) -> None: ...


class EmptySource:
    """Stands in when nothing can be measured: no channels, no readings, no total."""

    name = "none"
    period_s = 1.0
    pushed = False

    def channels(self) -> Sequence[Channel]:
        return ()

    def total(self) -> Optional[Total]:
        return None

    def open(self) -> None:
        pass

    def read(self) -> Reading:
        return Reading(time.monotonic(), ())

    def close(self) -> None:
        pass


def power_between(last: Optional[Tuple[float, float]], t_s: float,
                  joules: Optional[float]) -> Optional[float]:
    """An energy counter's mean power (W) from the previous reading `last` (t_s, joules) to this
    one; None on the first reading, across a counter reset, or without a value."""
    if joules is None or last is None or t_s <= last[0] or joules < last[1]:
        return None
    return (joules - last[1]) / (t_s - last[0])


def total_power_w(total: Optional[Total],
                  watts: Mapping[str, Optional[float]]) -> Optional[float]:
    """A source's total from its channels' watts (by name): None when any part has no reading
    (a missing reading never counts as 0 W)."""
    if total is None:
        return None
    parts = [watts.get(name) for name in total.channels]
    if not parts or any(p is None for p in parts):
        return None
    return float(sum(p for p in parts if p is not None))
