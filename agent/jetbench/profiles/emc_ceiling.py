"""Finding a firmware ceiling on the EMC by reading the rate back after a pin.

AGX Orin's BPMP on JetPack 6 boots with the EMC capped at its boot rate (2133 MHz against a
3199 MHz table) until NVIDIA's `nvphs` service lifts it: a `rate` write above it is accepted and
the clock runs the cap, with no error and no file saying so. So when the EMC is asked for a rate
it lists (its table, or the BPMP's own `max_rate`), the power mode's caps allow it, and it stays
clearly below it after settling, that is a ceiling: recorded for this boot (hw/boot_facts.py),
said once, and from then on planning, `tune`, `sweep` and the daemon leave rates above it out.
A rate rounded to a neighbouring step (within RANGE_TOLERANCE) is rounding, not a ceiling.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Optional

from ..hw.board import Board
from ..hw.boot_facts import EmcCeiling
from ..hw.emc_info import emc_cap_now
from ..hw.fs import Root
from ..hw.readings import settled_change, settled_when
from ..ownership.boot_facts import record_emc_ceiling
from ..units import format_hz
from .targets import RANGE_TOLERANCE, Targets

# A new EMC rate takes effect in about 8 ms (arXiv 2606.16106): a read-back waits at most this
# long for the rate file to move off the value written.
EMC_SETTLE_S = 0.1
# ... and where the rate that runs is a file of its own (devfreq's cur_freq, the debugfs clock's
# clk_rate), at most this long for it to reach the rate asked: until the kernel acts on the
# write it shows the rate before it, and a ceiling is a claim that needs that wait (a loaded
# machine's simulated kernel, its pass late, had a Thor's 204 MHz idle rate recorded as one)
EMC_REACH_S = 1.0


def cause(board: Board) -> str:
    """What is known of a ceiling's cause on this board."""
    if board.soc == "tegra234" and board.emc is not None and board.emc.kind == "bpmp":
        return "BPMP boot cap; NVIDIA's nvphs lifts it"
    return "a firmware cap, cause unknown"


def find(root: Root, board: Board, asked_hz: int) -> Optional[EmcCeiling]:
    """The ceiling the EMC shows after being pinned at `asked_hz`, or None."""
    emc = board.emc
    if emc is None or emc.cur_freq is None or emc.ceiling is not None:
        return None
    listed = asked_hz in emc.available_hz or asked_hz == emc.top_hz
    cap = emc_cap_now(root, emc)
    if not listed or (cap is not None and asked_hz > cap):
        return None  # a rate the kernel rounds, or one a cap holds: no evidence of firmware

    def read() -> Optional[int]:
        return root.read_int(emc.cur_freq, default=None) if emc.cur_freq else None

    floor = asked_hz * (1 - RANGE_TOLERANCE)
    if emc.cur_freq == emc.rate:  # (BPMP's `rate`: the value written until the firmware acts)
        written: Optional[int] = asked_hz
        runs = settled_change(read, written, wait_s=EMC_SETTLE_S)
    else:  # (a file of its own: the rate before the write until the kernel acts)
        runs = settled_when(read, lambda hz: hz is not None and hz >= floor, EMC_REACH_S)
    if runs is None or runs >= floor:
        return None
    return EmcCeiling(runs, asked_hz, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      cause(board))


def said(ceiling: EmcCeiling) -> str:
    """'EMC 3.199 GHz asked: the firmware runs 2.133 GHz (BPMP boot cap; ...)'."""
    return (f"EMC {format_hz(ceiling.asked_hz)} asked: the firmware runs "
            f"{format_hz(ceiling.hz)} ({ceiling.why})")


def check(root: Root, board: Board, targets: Targets) -> Targets:
    """After a pin that wrote the EMC: a ceiling found is recorded for this boot, and the
    request names the rate that runs and why (said once, here)."""
    asked = targets.emc.freq_hz
    if asked is None:
        return targets
    ceiling = find(root, board, asked)
    if ceiling is None:
        return targets
    kept = record_emc_ceiling(root, ceiling)
    note = said(ceiling) + ("" if kept else "; not kept for this boot (no boot id, or the state "
                                            "directory cannot take it): said for this run")
    requested = tuple(dataclasses.replace(r, resolved_hz=ceiling.hz, why=note)
                      if r.domain == "emc" else r for r in targets.requested)
    return dataclasses.replace(targets, requested=requested, notes=targets.notes + (note,))
