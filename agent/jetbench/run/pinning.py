"""Pinning a measurement's clocks and putting them back: the profile a point asks for, the
clocks once they have settled, the knobs as the kernel kept them, and the put-back at the end
(the whole journal, or only this run's writes when an earlier command had changed the board)."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple, Union

from ..documents import ClockDoc
from ..errors import HardwareError
from ..hw.board import Board
from ..hw.clocks.domains import read_applied, read_clocks
from ..hw.clocks.steps import undo_writes
from ..hw.clocks.types import ClockReading, Step
from ..hw.fs import Root
from ..hw.readings import SETTLE_INTERVAL_S, settled, settled_change
from ..ownership import journal
from ..profiles.apply import apply_profile
from ..profiles.targets import Requested
from ..units import format_hz
from .request import MeasureRequest, build_profile
from .validity import activity_counter_cpu, expected_range

if TYPE_CHECKING:
    from ..ownership.lease import Guard

# what a pin tells the caller once its clocks have settled: what was asked, what runs
OnApplied = Callable[[Sequence[Requested], Sequence[ClockReading]], None]

# How long a pin waits for the clocks to run what was applied before the window opens.
PIN_SETTLE_S = 2.0


def applied_clocks(root: Root, board: Board) -> List[ClockDoc]:
    return read_applied(root, board)


def runs_as_applied(clocks: Sequence[ClockReading], applied: Sequence[ClockDoc],
                    soc: Optional[str]) -> bool:
    """Every clock judged exactly (not a CPU read from activity counters) runs inside what its
    knobs let the kernel run (validity.expected_range)."""
    ranges = {(a["domain"], a["name"]): expected_range(a) for a in applied}
    for c in clocks:
        if c.cur_hz is None or (c.domain == "cpu" and activity_counter_cpu(soc)):
            continue
        lo, hi = ranges.get((c.domain, c.name), (None, None))
        if (lo is not None and c.cur_hz < lo) or (hi is not None and c.cur_hz > hi):
            return False
    return True


def put_back(root: Root, request: MeasureRequest, had_journal: bool, steps: List[Step]) -> str:
    if not had_journal:
        # Decided by the journal, not by `steps`: an interrupt inside apply_profile (journal
        # written, the step half done) leaves no step in our list, but writes to undo.
        if not journal.load(root):
            return "nothing was changed"
        if request.keep_clocks:
            return "kept (--keep-clocks): `jetbench restore` puts them back"
        journal.restore(root)
        return "restored"
    if not steps:
        return "nothing was changed"
    if request.keep_clocks:
        return "kept (--keep-clocks): `jetbench restore` puts them back"
    # Clocks were already changed by an earlier maxperf/apply: undo only this run's writes.
    writes = [(w, step.label) for step in steps for w in step.writes]
    undo_writes(root, [w for w, _ in writes], strict=True)
    # The journal's `wrote` goes back with the values (oldest last, as undo left them), or
    # restore would call the earlier jetbench state "moved by another tool".
    journal.record(root, [(w.path, label, w.old) for w, label in reversed(writes) if w.verify])
    return "put back to the earlier jetbench state (its journal is kept)"


class Pin:
    """The clocks a measure run holds: each GPU clock's profile applied once (through the
    ownership guard), every step written (for a partial undo), what was asked, and the knobs
    and clocks read back after it settled."""

    def __init__(self, root: Root, board: Board, request: MeasureRequest, guard: Guard):
        self.root, self.board, self.request, self.guard = root, board, request, guard
        self.steps: List[Step] = []  # every Step written, in order
        self.pinned_for: Union[Requested, None, object] = object()  # GPU clock pinned (none yet)
        self.applied_clocks: List[ClockDoc] = []  # knobs read back (domains.read_applied)
        self.requested: List[Requested] = []
        self.clocks: Tuple[ClockReading, ...] = ()
        self.profile_name: Optional[str] = None
        self.notes: Tuple[str, ...] = ()
        self.caps_lifted: Tuple[str, ...] = ()  # --beyond-power-mode: the caps this pin passed

    def settle(self) -> Tuple[ClockReading, ...]:
        """The clocks once they run what was applied (a kernel moves the current frequency a
        little after the write; a simulated one on a busy host, later still), at most
        PIN_SETTLE_S, then until two reads agree. A clock that never gets there (throttled,
        capped by something else) is read as it is and judged by the window."""
        def read() -> Tuple[ClockReading, ...]:
            return read_clocks(self.root, self.board)

        deadline = time.monotonic() + PIN_SETTLE_S
        clocks = read()
        while not runs_as_applied(clocks, self.applied_clocks, self.board.soc) and \
                time.monotonic() < deadline:
            time.sleep(SETTLE_INTERVAL_S)
            # the knobs read again too: a kernel may round a write after it (an EMC rate with
            # no table reads back the rate it runs), and what it kept is what was applied
            self.applied_clocks = applied_clocks(self.root, self.board)
            clocks = read()
        return tuple(settled(read))

    def _rounded_by_the_kernel(self) -> None:
        """An EMC rate asked where the kernel lists no rates is resolved by the clock
        framework itself: the rate it kept (read back once settled) is the one that runs, and
        the request says so (it is not known before the write)."""
        emc = self.board.emc
        asked = next((r.resolved_hz for r in self.requested if r.domain == "emc"), None)
        if emc is None or emc.available_hz or asked is None:
            return
        # the file keeps the write until the clock framework acts on it (at once on a board;
        # a simulated kernel's next pass): read it once it moved, or as it is after a while
        settled_change(lambda: self.root.read_int(emc.rate, default=None), asked)
        self.applied_clocks = applied_clocks(self.root, self.board)
        self.clocks = self.settle()
        kept = {a["domain"]: a.get("override_hz") for a in self.applied_clocks
                if a["domain"] == "emc"}
        for k, r in enumerate(self.requested):
            hz = kept.get(r.domain)
            if r.domain != "emc" or hz is None or r.resolved_hz is None or \
                    abs(hz - r.resolved_hz) <= hz * 0.0005:
                continue
            why = (f"the clock framework runs the EMC at {format_hz(hz)} for it (no rate "
                   "table here: the rate read back once the pin settled)")
            self.requested[k] = dataclasses.replace(r, resolved_hz=hz, why=why)
            who = "--emc-freq" if self.request.emc_freq is not None else \
                f"profile {self.profile_name}: [emc] freq"
            self.notes = tuple(n for n in self.notes if not n.startswith(f"{who} ")) + \
                (self.requested[k].said(who),)

    def to(self, gpu: Optional[Requested],
           on_applied: Optional[OnApplied] = None) -> None:
        """Pin the clocks for one point's GPU clock, as planning resolved it (`gpu`)."""
        if gpu == self.pinned_for:
            return
        profile = build_profile(self.request, gpu, self.root.base)
        if profile is not None:
            with self.guard.writing():
                result = apply_profile(self.root, self.board, profile)
            self.steps += list(result.steps)
            self.requested = list(result.targets.requested)
            pinned = next((r for r in self.requested if r.domain == "gpu"), None)
            if gpu is not None and (pinned is None or pinned.resolved_hz != gpu.resolved_hz):
                # the same rules on the same board gave another clock: something (nvpmodel,
                # another tool) changed the board's caps since planning; the pin names it
                now = format_hz(pinned.resolved_hz) if pinned is not None else "nothing"
                raise HardwareError(
                    f"GPU clock {gpu.text}: planned to run {format_hz(gpu.resolved_hz)}, the "
                    f"board now runs {now} for it (its power mode or caps changed during the "
                    "run)",
                    hint="the clocks are put back; run again once the board is settled")
            self.notes = result.targets.notes
            self.caps_lifted = result.targets.caps_lifted
            self.profile_name = profile.name
        self.applied_clocks = applied_clocks(self.root, self.board)
        self.clocks = self.settle()
        self._rounded_by_the_kernel()
        self.pinned_for = gpu
        if on_applied is not None:
            on_applied(self.requested, self.clocks)
