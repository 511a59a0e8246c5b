"""Memory (EMC) clock: the debugfs override (tegra210), the BPMP rate lock (tegra186..234) or
a devfreq node pinned min = max (tegra264's `bwmgr`).

The BPMP maximum is capped by nvpmodel's `emc_iso_cap` when that is non-zero and lower
(board detection applies the rule; `EmcInfo.max_hz` is already capped)."""

from __future__ import annotations

from typing import List

from ..board import Board
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
            max_hz=emc.max_hz,
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
        return [Step("emc", "emc", tuple(writes))] if writes else []
    # Every EMC rate is rounded by the clock framework (docs/hardware.md: "read back what was
    # kept"): not verified byte for byte; `requested vs applied` shows the rate kept.
    rate = [
        Write(w.path, w.value, w.old, verify=False)
        for w in write_if_changed(root, emc.rate, target.freq_hz)
    ]
    lock = write_if_changed(root, emc.lock, emc.lock_value)
    # BPMP: lock first, then set the rate. Overrides: set the rate, then switch the override on.
    writes = lock + rate if emc.kind == "bpmp" else rate + lock
    return [Step("emc", "emc", tuple(writes))] if writes else []
