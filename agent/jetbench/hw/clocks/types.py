"""The clock domains' shared types: a planned write, a step (one domain's writes), a reading of
a domain as it is now, and each domain's target. Pure data, importing nothing of jetbench, so
every hw module (the NVML vendor file among them) can name them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol, Sequence, Tuple


@dataclass(frozen=True)
class Write:
    path: str
    value: str
    old: str  # the value read before planning (stripped), for display and rollback
    verify: bool = True  # False where the kernel legitimately rounds (debugfs clock rates)


@dataclass(frozen=True)
class Step:
    domain: str  # "cpu", "gpu", "emc", "fan", "write"
    label: str  # "cpu policy0 (cpu0-3)"
    writes: Tuple[Write, ...]
    # What a write the kernel reads back differently most likely means on this domain.
    readback_hint: str = "another agent (nvpmodel, a thermal cap) may be holding this clock"
    # Its knobs cannot be read back (NVML clock locks): planned on every pin, so never taken
    # for drift by the daemon.
    blind: bool = False


@dataclass(frozen=True)
class ClockReading:
    """One clock domain's state as read now. Frequencies in Hz; None = not available."""

    domain: str
    name: str
    governor: Optional[str]
    min_hz: Optional[int]
    max_hz: Optional[int]
    cur_hz: Optional[int]
    available_hz: Tuple[int, ...] = field(default=())
    locked: Optional[bool] = None  # EMC/GPU override on
    # a CPU cluster: whether any of its cores is online (a power mode may take a whole cluster
    # offline; its policy's files then say nothing about the clocks that run); None elsewhere
    online: Optional[bool] = None


@dataclass(frozen=True)
class CpuTarget:
    governor: Optional[str] = None
    # (policy path, min Hz, max Hz): clusters may have different tables.
    policy_hz: Tuple[Tuple[str, Optional[int], Optional[int]], ...] = ()
    setspeed: bool = False  # pinned under userspace: scaling_setspeed := max
    online: Optional[bool] = None
    idle: Optional[bool] = None  # False = disable deep idle states
    keep_offline: Tuple[str, ...] = ()  # cpuN/online files the power mode set to 0: left alone


@dataclass(frozen=True)
class GpuTarget:
    min_hz: Optional[int] = None
    max_hz: Optional[int] = None
    railgate: Optional[bool] = None
    # the GPU pinned at max: its other clocks (Thor's gpu-nvd-*) pinned at theirs too, as
    # jetson_clocks pins every GPU devfreq node
    side_at_max: bool = False


@dataclass(frozen=True)
class EmcTarget:
    freq_hz: Optional[int] = None
    # --beyond-power-mode past the mode's EMC cap: (cap file, the rate) written before the rate
    cap_lift: Optional[Tuple[str, int]] = None


@dataclass(frozen=True)
class NvmlGpuTarget:
    """One discrete GPU's NVML settings; None leaves a setting alone. Clocks in Hz."""

    bus_id: str
    graphics_hz: Optional[Tuple[int, int]] = None  # locked (min, max)
    memory_hz: Optional[Tuple[int, int]] = None
    power_limit_mw: Optional[int] = None


@dataclass(frozen=True)
class FanTarget:
    pwm: Optional[int] = None


class ClockTargets(Protocol):
    """A target per clock domain (profiles/targets.py's Targets): what domains.plan pins."""

    @property
    def cpu(self) -> CpuTarget: ...

    @property
    def gpu(self) -> GpuTarget: ...

    @property
    def nvml(self) -> Sequence[NvmlGpuTarget]: ...

    @property
    def emc(self) -> EmcTarget: ...

    @property
    def fan(self) -> FanTarget: ...
