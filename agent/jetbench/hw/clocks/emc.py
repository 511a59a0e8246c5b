"""Memory (EMC) clock: the debugfs override (tegra210), the BPMP rate lock (tegra186..234) or
a devfreq node pinned min = max (tegra264's `bwmgr`).

The maximum is capped by the power mode (R35 `emc_iso_cap`, R36+ `nvpmodel_clk_cap/emc`) and by a
firmware ceiling found this boot (hw/emc_info.py applies both; `EmcInfo.max_hz` is capped).
The BPMP lock, per release: `mrq_rate_locked`, then where they exist (R36+) the clock's `state`
and the bandwidth manager's `bwmgr_halt`, then the rate; every file journalled by the caller."""

from __future__ import annotations

from typing import List, Optional

from ..board import Board
from ..emc_info import max_now
from ..fs import Root
from .steps import ordered_min_max, write_if_changed
from .types import ClockReading, EmcTarget, Step, Write


def read(root: Root, board: Board) -> List[ClockReading]:
    emc = board.emc
    if emc is None:
        return []
    if emc.kind == "devfreq":
        assert emc.control is not None
        lo = root.read_int(f"{emc.control}/min_freq", default=None)
        hi = root.read_int(f"{emc.control}/max_freq", default=None)
        return [ClockReading(
            domain="emc", name="emc", governor=root.read(f"{emc.control}/governor", default=None),
            min_hz=lo, max_hz=hi, cur_hz=root.read_int(f"{emc.control}/cur_freq", default=None),
            available_hz=emc.available_hz, locked=lo is not None and lo == hi)]
    locked = root.read(emc.lock, default="0") == "1"
    return [
        ClockReading(
            domain="emc",
            name="emc",
            governor="locked" if locked else None,
            min_hz=None,
            max_hz=max_now(root, emc),
            cur_hz=root.read_int(emc.cur_freq, default=None) if emc.cur_freq else None,
            available_hz=emc.available_hz,
            locked=locked,
        )
    ]


def plan(root: Root, board: Board, target: EmcTarget) -> List[Step]:
    emc = board.emc
    if emc is None or target.freq_hz is None:
        return []
    if emc.kind == "devfreq":
        assert emc.control is not None
        writes = ordered_min_max(root, f"{emc.control}/min_freq", f"{emc.control}/max_freq",
                                 target.freq_hz, target.freq_hz)
        return _cap_lift(root, target) + ([Step("emc", "emc", tuple(writes))] if writes else [])
    # Every EMC rate is rounded by the clock framework (docs/hardware.md: "read back what was
    # kept"): not verified byte for byte; `requested vs applied` shows the rate kept.
    rate = [
        Write(w.path, w.value, w.old, verify=False)
        for w in write_if_changed(root, emc.rate, target.freq_hz)
    ]
    lock = write_if_changed(root, emc.lock, emc.lock_value)
    for path in emc.lock_extras:
        lock += write_if_changed(root, path, "1")
    # BPMP: lock first, then set the rate. Overrides: set the rate, then switch the override on.
    writes = lock + rate if emc.kind == "bpmp" else rate + lock
    return _cap_lift(root, target) + ([Step("emc", "emc", tuple(writes))] if writes else [])


def _cap_lift(root: Root, target: EmcTarget) -> List[Step]:
    """--beyond-power-mode: the mode's cap file raised to the rate, before the rate."""
    if target.cap_lift is None:
        return []
    path, hz = target.cap_lift
    writes = write_if_changed(root, path, hz)
    return [Step("emc", "emc cap (--beyond-power-mode)", tuple(writes))] if writes else []


def relock_step(root: Root, board: Board, hz: int) -> Optional[Step]:
    """The EMC's lock written again as it stands (a firmware moved the clock, not the knobs):
    the retry people use on Thor. None where there is no EMC control."""
    emc = board.emc
    if emc is None:
        return None
    if emc.kind == "devfreq":
        assert emc.control is not None
        paths = [(f"{emc.control}/max_freq", str(hz)), (f"{emc.control}/min_freq", str(hz))]
    else:
        paths = [(emc.lock, emc.lock_value)] + [(p, "1") for p in emc.lock_extras] + \
            [(emc.rate, str(hz))]
    writes = tuple(Write(path, value, root.read(path, default="").strip(), verify=False)
                   for path, value in paths)
    return Step("emc", "emc (re-lock)", writes)
