"""The board now, read in one place: its identity, every clock, the temperatures, the power
mode and the GPU's load, in the document shapes `info`, `monitor`, the daemon's status and a
result's `board` share; and the one settle loop (read until two reads agree).

Power is not here: a reading of the meters needs a window or the previous reading (an energy
counter's watts are the difference of two); hw/meters/base.py has those two rules
(`power_between`, `total_power_w`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

from .board import Board
from .clocks.domains import read_clocks
from .clocks.gpu import gpu_load_pct
from .clocks.types import ClockReading
from .fs import Root
from .nvpmodel import mode_doc
from .thermal import read_temperatures_c

SETTLE_INTERVAL_S = 0.02  # between two reads of the settle loop
T = TypeVar("T")


def identity(root: Root, board: Board) -> Dict[str, Any]:
    """Which board this is, as every document names it (`board`)."""
    return {"model": board.model, "family": board.family, "soc": board.soc, "l4t": board.l4t,
            "power_mode": mode_doc(root), "simulated": board.simulated, "root": str(root.base)}


def clock_doc(r: ClockReading, table: bool = False) -> Dict[str, Any]:
    """One clock as documents carry it; `table` adds the frequencies it can run at."""
    doc = {"domain": r.domain, "name": r.name, "governor": r.governor, "min_hz": r.min_hz,
           "max_hz": r.max_hz, "cur_hz": r.cur_hz, "locked": r.locked}
    if table:
        doc["available_hz"] = list(r.available_hz)
    return doc


@dataclass(frozen=True)
class BoardNow:
    clocks: Tuple[ClockReading, ...]
    temperatures_c: Dict[str, float]
    power_mode: Optional[Dict[str, Any]]  # nvpmodel's mode ({"id", "name", "text"}); None
    gpu_load_pct: Optional[float]  # `load` file, or NVML (Thor); None = unknown, never 0

    def to_dict(self, table: bool = False) -> Dict[str, Any]:
        return {"clocks": [clock_doc(r, table) for r in self.clocks],
                "temperatures_c": self.temperatures_c, "power_mode": self.power_mode,
                "gpu_load_pct": self.gpu_load_pct}


def read_now(root: Root, board: Board) -> BoardNow:
    return BoardNow(read_clocks(root, board), read_temperatures_c(root, board), mode_doc(root),
                    gpu_load_pct(root, board))


def settled(read: Callable[[], T], timeout_s: float = 1.0) -> T:
    """`read()` until two reads agree, at most `timeout_s` (the last read then): a simulated
    kernel or a slow governor takes a few ms to move the current frequency after a write, and
    nothing should judge the clocks in that moment."""
    deadline = time.monotonic() + timeout_s
    last = read()
    while time.monotonic() < deadline:
        time.sleep(SETTLE_INTERVAL_S)
        now = read()
        if now == last:
            return now
        last = now
    return last
