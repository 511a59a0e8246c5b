"""The clock domains, listed once: what each plans (from its target), reads now, and how its
knobs read back as kept (what a result calls `settings.applied`).

A plan, a read of the clocks and the applied knobs all walk DOMAINS in this order, the order
a pin writes in (CPU first, so the cores are up before the GPU and EMC move; the fan last).
Adding a domain is adding one entry (and its target: a field of types.ClockTargets and of
profiles.targets.Targets).

The applied knobs are not the current-frequency files: those are *observed* (docs/hardware.md, "What
real kernels do"). Per clock: governor, min/max (cpufreq/devfreq knobs, kHz converted to Hz)
and, where the clock is pinned by an override (tegra210 GPU `override.gbus`, the EMC override
or BPMP rate lock), the override rate read back from its file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

from ...documents import ClockDoc
from .. import nvml
from ..board import Board
from ..fs import Root
from . import cpu, emc, fan, gpu, nvml_gpu
from .types import ClockReading, ClockTargets, Step

# (min Hz, max Hz, override Hz) of a reading as the knobs keep it; None where no knob holds it
Kept = Tuple[Optional[int], Optional[int], Optional[int]]


@dataclass(frozen=True)
class Domain:
    name: str  # also the ClockTargets field holding its target
    plan: Callable[[Root, Board, ClockTargets], List[Step]]  # steps for its own target
    read: Optional[Callable[[Root, Board], List[ClockReading]]] = None  # None: not a clock
    kept: Optional[Callable[[Root, Board, ClockReading], Kept]] = None


def _knobs(root: Root, board: Board, r: ClockReading) -> Kept:
    return r.min_hz, r.max_hz, None  # cpufreq/devfreq: min/max are the knobs


def _gpu_kept(root: Root, board: Board, r: ClockReading) -> Kept:
    if r.locked is None:  # devfreq: min_freq/max_freq are knobs
        return r.min_hz, r.max_hz, None
    if r.locked:  # override on: its rate, read back (gpu.read puts it in min/max)
        return r.min_hz, r.max_hz, r.min_hz
    return None, None, None  # override off: no knob holds the clock (limits are no pin)


def _emc_kept(root: Root, board: Board, r: ClockReading) -> Kept:
    # Locked: the override/BPMP rate as kept. Unlocked: no knob (the EMC governor's).
    assert board.emc is not None
    rate = root.read_int(board.emc.rate, default=None) if r.locked else None
    return rate, rate, rate


def _not_kept(root: Root, board: Board, r: ClockReading) -> Kept:
    return None, None, None  # NVML cannot read a lock back: range and running clock only


DOMAINS: Tuple[Domain, ...] = (
    Domain("cpu", lambda root, board, t: cpu.plan(root, board, t.cpu), cpu.read, _knobs),
    Domain("gpu", lambda root, board, t: gpu.plan(root, board, t.gpu), gpu.read, _gpu_kept),
    Domain("nvml", lambda root, board, t: nvml_gpu.plan(board, t.nvml),
           lambda root, board: nvml.read_clocks(board.nvml_gpus), _not_kept),
    Domain("emc", lambda root, board, t: emc.plan(root, board, t.emc), emc.read, _emc_kept),
    Domain("fan", lambda root, board, t: fan.plan(root, board, t.fan)),
)


def plan(root: Root, board: Board, targets: ClockTargets) -> List[Step]:
    """Every domain's steps for `targets`."""
    return [step for d in DOMAINS for step in d.plan(root, board, targets)]


def read_clocks(root: Root, board: Board) -> Tuple[ClockReading, ...]:
    """Every clock as read now."""
    return tuple(r for d in DOMAINS if d.read is not None for r in d.read(root, board))


def read_applied(root: Root, board: Board) -> List[ClockDoc]:
    """One document per clock: domain, name, governor, min_hz, max_hz, override_hz, locked,
    table_hz (the table the clock runs from; empty when the kernel lists none). min/max are
    None where no knob holds the clock (an override switched off)."""
    out: List[ClockDoc] = []
    for d in DOMAINS:
        if d.read is None or d.kept is None:
            continue
        for r in d.read(root, board):
            lo, hi, override = d.kept(root, board, r)
            out.append({"domain": r.domain, "name": r.name, "governor": r.governor,
                        "min_hz": lo, "max_hz": hi, "override_hz": override,
                        "locked": r.locked, "table_hz": list(r.available_hz)})
    return out
