"""The board now, read in one place: its identity, every clock, the temperatures, the power
mode and the GPU's load, in the document shapes `info`, `monitor`, the daemon's status and a
result's `board` share; and the one settle loop (read until two reads agree).

Power is not here: a reading of the meters needs a window or the previous reading (an energy
counter's watts are the difference of two); hw/meters/base.py has those two rules
(`power_between`, `total_power_w`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import (
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    TypedDict,
    TypeVar,
)

from ..documents import BoardDoc, ClockDoc, PowerModeDoc
from .board import Board
from .clocks.domains import read_clocks
from .clocks.fan import read_pwm
from .clocks.gpu import gpu_load_pct
from .clocks.types import ClockReading
from .fs import Root
from .mode_in_force import not_in_force
from .nvpmodel import mode_doc
from .thermal import read_temperatures_c

SETTLE_INTERVAL_S = 0.02  # between two reads of the settle loop
T = TypeVar("T")


def identity(root: Root, board: Board, originals: Mapping[str, str] = {}) -> BoardDoc:
    """Which board this is, as every document names it (`board`); its power mode says where
    the kernel does not have what the mode sets (`originals`: the journal's values, which win
    over what jetbench wrote since)."""
    mode = mode_doc(root)
    if mode is not None:
        differ = not_in_force(root, originals)
        if differ:
            mode["not_in_force"] = differ
    return {"model": board.model, "family": board.family, "soc": board.soc, "l4t": board.l4t,
            "power_mode": mode, "simulated": board.simulated, "root": str(root.base)}


def clock_doc(r: ClockReading, table: bool = False) -> ClockDoc:
    """One clock as documents carry it; `table` adds the frequencies it can run at."""
    doc: ClockDoc = {"domain": r.domain, "name": r.name, "governor": r.governor,
                           "min_hz": r.min_hz,
           "max_hz": r.max_hz, "cur_hz": r.cur_hz, "locked": r.locked}
    if table:
        doc["available_hz"] = list(r.available_hz)
    return doc


class NowDoc(TypedDict):
    """The board now as info, monitor and the daemon's readings carry it."""
    clocks: List[ClockDoc]
    temperatures_c: Dict[str, float]
    power_mode: Optional[PowerModeDoc]
    gpu_load_pct: Optional[float]


@dataclass(frozen=True)
class BoardNow:
    clocks: Tuple[ClockReading, ...]
    temperatures_c: Dict[str, float]
    power_mode: Optional[PowerModeDoc]  # nvpmodel's mode ({"id", "name", "text"}); None
    gpu_load_pct: Optional[float]  # `load` file, or NVML (Thor); None = unknown, never 0
    fan_pwm: Optional[int] = None  # 0..255; None: no fan file
    cpu_times: Dict[int, Tuple[int, int]] = field(default_factory=dict)  # proc/stat, per core
    memory_mb: Optional[Tuple[float, float]] = None  # (used, total), proc/meminfo

    def to_dict(self, table: bool = False) -> NowDoc:
        return {"clocks": [clock_doc(r, table) for r in self.clocks],
                "temperatures_c": self.temperatures_c, "power_mode": self.power_mode,
                "gpu_load_pct": self.gpu_load_pct}


def read_now(root: Root, board: Board, loads: bool = False) -> BoardNow:
    """`loads`: also the CPU time counters, memory and fan (what `monitor` shows)."""
    now = BoardNow(read_clocks(root, board), read_temperatures_c(root, board), mode_doc(root),
                   gpu_load_pct(root, board))
    if not loads:
        return now
    return BoardNow(now.clocks, now.temperatures_c, now.power_mode, now.gpu_load_pct,
                    read_pwm(root, board), cpu_times(root), memory_mb(root))


def cpu_times(root: Root) -> Dict[int, Tuple[int, int]]:
    """Per online core, (busy, total) jiffies since boot from `/proc/stat` under the root
    ({} where it cannot be read, e.g. a simulated tree without one). Busy = total - idle -
    iowait."""
    text = root.read("/proc/stat", default=None)
    out: Dict[int, Tuple[int, int]] = {}
    for line in (text or "").splitlines():
        words = line.split()
        if not words or not words[0].startswith("cpu") or words[0] == "cpu":
            continue
        try:
            core = int(words[0][3:])
            ticks = [int(w) for w in words[1:]]
        except ValueError:
            continue
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
        out[core] = (sum(ticks) - idle, sum(ticks))
    return out


def cpu_load_pct(before: Dict[int, Tuple[int, int]], after: Dict[int, Tuple[int, int]]
                 ) -> Dict[int, Optional[float]]:
    """Per core, the busy share between two `cpu_times` reads (None: no ticks in between, or
    a core that went offline or came back)."""
    out: Dict[int, Optional[float]] = {}
    for core, (busy, total) in after.items():
        prev = before.get(core)
        if prev is None or total <= prev[1] or busy < prev[0]:
            out[core] = None
        else:
            out[core] = 100.0 * (busy - prev[0]) / (total - prev[1])
    return out


def memory_mb(root: Root) -> Optional[Tuple[float, float]]:
    """(used, total) MB from `/proc/meminfo` under the root: used = MemTotal - MemAvailable
    (what `free` calls used, and what tegrastats' RAM shows); None where unreadable."""
    text = root.read("/proc/meminfo", default=None)
    fields: Dict[str, int] = {}
    for line in (text or "").splitlines():
        name, _, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdigit():
            fields[name.strip()] = int(words[0])  # kB
    if "MemTotal" not in fields or "MemAvailable" not in fields:
        return None
    total = fields["MemTotal"] / 1024
    return total - fields["MemAvailable"] / 1024, total


def settled_change(read: Callable[[], T], before: T, wait_s: float = 0.5) -> T:
    """`settled(read)` once it differs from `before` (the reading before a write), waiting at
    most `wait_s` for it to move: two equal reads right after a write can both be the old
    value when the kernel has not acted on the write yet (a loaded machine, a DVFS
    transition). A write that leaves the value where it was (rounded to the same rate) is
    read as it is after `wait_s`."""
    return settled_when(read, lambda now: now != before, wait_s)


def settled_when(read: Callable[[], T], done: Callable[[T], bool], wait_s: float) -> T:
    """`settled(read)` once `done` says so of it, waiting at most `wait_s` (the last settled
    reading then)."""
    deadline = time.monotonic() + wait_s
    while True:
        now = settled(read)
        if done(now) or time.monotonic() >= deadline:
            return now
        time.sleep(SETTLE_INTERVAL_S)


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


def emc_running_hz(root: Root, board: Board) -> Set[int]:
    """The rate the EMC runs now (empty where it reads none)."""
    return {c.cur_hz for c in read_clocks(root, board) if c.domain == "emc" and c.cur_hz}


def rates_that_run(candidates: Sequence[int], pin: Callable[[int], None],
                   running: Callable[[], Set[int]]) -> List[int]:
    """The distinct rates a clock runs when asked for each candidate, ascending: the clock
    framework rounds a rate that is not one of its table's (BPMP EMC: down to a table rate),
    so a candidate is only a question. `pin(hz)` asks for one; `running()` reads what runs,
    once it moved (a rate read before the clock framework acted would be the last
    candidate's: under load a probe lost a rate that way). Both `tune` (under its borrow)
    and the daemon (its own journalled pins) ask this way."""
    rates: Set[int] = set()
    for hz in candidates:
        before = running()
        pin(hz)
        rates.update(settled_change(running, before))
    return sorted(rates)
