"""What every clock domain shares: planned writes, steps, readings, and applying a step.

A plan is a list of steps; a step is the writes of one domain (one CPU cluster, the GPU, EMC...)
in the order the kernel accepts them. Applying a step writes each value the way `echo` does,
reads each back, and on a rejected write puts back what the step had already written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from ...errors import HardwareError, WriteRejected
from .. import knob_io
from ..fs import Root


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


@dataclass(frozen=True)
class EmcTarget:
    freq_hz: Optional[int] = None


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


def write_if_changed(root: Root, path: str, value: object, verify: bool = True) -> List[Write]:
    """A one-element list with the write, or [] when the file already holds the value."""
    old = root.read(path)
    text = str(value)
    return [] if old == text else [Write(path, text, old, verify)]


def ordered_min_max(
    root: Root, min_path: str, max_path: str, new_min: Optional[int], new_max: Optional[int],
    scale: int = 1,
) -> List[Write]:
    """min/max writes ordered so the kernel never sees min > max.

    Raising min above the current max is refused by the kernel, so when going up write max
    first, and when going down write min first. `scale` converts Hz to the file's unit.
    """
    cur_max = root.read_int(max_path)
    lo = new_min // scale if new_min is not None else None
    hi = new_max // scale if new_max is not None else None
    min_w = write_if_changed(root, min_path, lo) if lo is not None else []
    max_w = write_if_changed(root, max_path, hi) if hi is not None else []
    if lo is not None and lo > cur_max:
        return max_w + min_w
    return min_w + max_w


def apply_step(root: Root, step: Step) -> None:
    """Write a step's values in order; verify each; on failure roll the step back and raise."""
    done: List[Write] = []
    for write in step.writes:
        try:
            knob_io.write(root, write.path, write.value)
            if write.verify:
                got = knob_io.read(root, write.path)
                if got != write.value:
                    raise WriteRejected(
                        f"wrote {write.value!r} but the kernel reads back {got!r}",
                        path=write.path,
                        hint=step.readback_hint,
                    )
            done.append(write)
        except HardwareError as err:
            # The failed write may have partly landed (a truncated file): put it back too.
            undo_writes(root, done + [write])
            raise WriteRejected(
                f"{step.label}: {err.message}; the step was rolled back",
                path=err.path or write.path,
                hint=err.hint,
            ) from err


def undo_writes(root: Root, writes: Sequence[Write], strict: bool = False) -> None:
    """Put back each write's old value, newest first. Best effort unless `strict` (the
    journal still holds the originals for `jetbench restore`)."""
    for write in reversed(writes):
        try:
            if not knob_io.readable(write.path) or knob_io.read(
                    root, write.path, default=None) != write.old:
                knob_io.write(root, write.path, write.old)
        except HardwareError:
            if strict:
                raise
