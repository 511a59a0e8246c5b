"""The daemon's periodic check (`Drift`, a part the daemon composes): read the board, say
throttling only with evidence (hw/thermal.py) and a clock below its pin as just that
(run/validity.py's rule, once the clocks had SETTLE_GRACE_S to settle after a pin), and write
back any knob something else moved (nvpmodel, another tool), in every state: writing the knobs
back does not fight a kernel cap (caps act through QoS and cooling devices). Nothing is ever
left drifted on purpose.

Drift is judged against the point the daemon pinned: what it wrote, as the kernel kept it. A
rate the clock framework rounds (the BPMP EMC `rate` reads back rounded down to a table rate)
is read back once after each of the daemon's own writes, and that rounded value is the pin from
then on: the daemon's own pins are never "moved behind jetbench's back" (`pinned`, `plan`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from functools import partial
from typing import Callable, Collection, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..errors import JetbenchError
from ..hw import thermal
from ..hw.board import Board
from ..hw.clocks.domains import read_applied, read_clocks
from ..hw.clocks.emc import relock_step
from ..hw.clocks.steps import apply_step
from ..hw.clocks.types import ClockReading, Step
from ..hw.fs import Root
from ..hw.readings import settled, settled_change
from ..ownership import journal
from ..profiles.apply import build_plan
from ..profiles.targets import Targets
from ..run.validity import below_pin
from .clock_hold import RELOCKS_PER_HOUR, ClockHold
from .held import Held, ReadingsDoc, RepinDoc

log = logging.getLogger("jetbench.daemon")

SETTLE_GRACE_S = 2.0  # after a pin, clocks below it are not judged for this long
SETTLE_TIMEOUT_S = 1.0  # before the first check, wait at most this long for two equal reads
ROUNDING_WAIT_S = 0.5  # after writing a rate the kernel rounds: how long it may take to round


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))


class _PrePinValues:
    """The root as `journal.record` sees it, answering with the value a file held before the
    daemon pinned: a knob the pin did not write already held its pinned value then."""

    def __init__(self, root: Root, values: Mapping[str, str]):
        self._root = root
        self._values = values

    def read_raw(self, board_path: str, default: object = None) -> str:
        if board_path in self._values:
            return self._values[board_path]
        return self._root.read_raw(board_path)

    def __getattr__(self, name: str) -> object:  # the rest of Root, passed on
        return getattr(self._root, name)


class Drift:
    """The periodic check over what the daemon holds (`held`, under `lock`): `error` counts
    and logs a failure, `read` reads the board and its rails, `publish` takes each check's
    readings (the status document). What it found stays here: throttling, clocks below their
    pin, the last re-pin, the consecutive failed checks (the watchdog reads them)."""

    def __init__(self, root: Root, held: Held, lock: threading.RLock,
                 error: Callable[[str], None],
                 read: Callable[[Board, Sequence[ClockReading]], ReadingsDoc],
                 publish: Callable[[ReadingsDoc], None]):
        self.root = root
        self.held = held
        self._lock = lock
        self._error = error
        self._read = read
        self._publish = publish
        self.layout = thermal.ThermalLayout((), ())  # the daemon's scan, once it has the board
        self.throttle_reasons: Tuple[str, ...] = ()
        self.below_pin: Tuple[str, ...] = ()
        self.last_repin: Optional[RepinDoc] = None
        self.failed_checks = 0
        self.hold = ClockHold()  # the running clocks against their pins (firmware moves them)
        # knob -> (the value the daemon wrote, the value the kernel kept for it): a rate the
        # kernel rounds, as it read back after the daemon's own write
        self.kept: Dict[str, Tuple[str, str]] = {}
        # values known to be kept as written (rates the clock runs: probed or listed): no wait
        self._as_written: Set[str] = set()

    def known_rates(self, hz: Collection[int]) -> None:
        """Rates the clock framework is known to run as they are written (the EMC's probed or
        listed rates): a pin of one of them is kept as it is, with no wait to read it back."""
        self._as_written |= {str(int(v)) for v in hz}

    def pinned(self, steps: Sequence[Step]) -> None:
        """The daemon's own writes (a pin or a re-pin) are done: a rate the kernel rounds
        (a write not verified byte for byte) is read back once the kernel acted on it (at most
        ROUNDING_WAIT_S), and what it kept is the point pinned from now on, not drift."""
        for step in steps:
            for w in step.writes:
                if w.verify:
                    continue
                if w.value in self._as_written:
                    self.kept[w.path] = (w.value, w.value)
                    continue
                written: Optional[str] = w.value
                kept = settled_change(partial(self._read_knob, w.path), written,
                                      ROUNDING_WAIT_S)
                if kept is not None:
                    self.kept[w.path] = (w.value, kept)

    def _read_knob(self, path: str) -> Optional[str]:
        text = self.root.read(path, default=None)
        return text if isinstance(text, str) else None

    def plan(self, board: Board, targets: Targets) -> List[Step]:
        """The writes that put the point pinned back: the profile's plan less the rates that
        hold what the kernel kept of the daemon's own write (its rounding is not drift)."""
        out: List[Step] = []
        for step in build_plan(self.root, board, targets):
            writes = tuple(w for w in step.writes if self.kept.get(w.path) != (w.value, w.old))
            if writes:
                out.append(replace(step, writes=writes))
        return out

    def wait_settled(self, board: Board) -> None:
        """The kernel takes a moment to move the clocks after a pin, and the first judgement
        must not see that moment (at most SETTLE_TIMEOUT_S)."""
        settled(lambda: read_clocks(self.root, board), SETTLE_TIMEOUT_S)

    def repin(self, steps: Sequence[Step]) -> None:
        """Write a drift plan back. Knobs the pin did not write held their pinned value before
        it: journal that value for them (not the value something else moved them to)."""
        known = {e.path for e in journal.load(self.root)}
        prepin = {w.path: w.value + "\n" for s in steps for w in s.writes if w.path not in known}
        assert self.held.board is not None
        journal.record(_PrePinValues(self.root, prepin),  # type: ignore[arg-type]
                       ((w.path, s.label, w.value) if w.verify else (w.path, s.label)
                        for s in steps for w in s.writes),
                       board_family=self.held.board.family)
        for step in steps:
            apply_step(self.root, step)
        self.pinned(steps)

    def _not_held(self, board: Board, domain: str) -> None:
        """A pinned clock stopped running at its pin with its knobs in place (a firmware moves
        it): said, counted, and its lock written again while RELOCKS_PER_HOUR allows."""
        said = "; ".join(v for (d, _n), v in self.hold.not_held.items() if d == domain)
        target = self.held.targets
        step = relock_step(self.root, board, target.emc.freq_hz) \
            if domain == "emc" and target is not None and target.emc.freq_hz else None
        if step is None or not self.hold.may_relock():
            log.warning("%s%s", said, "" if step is None else
                        f" (not re-locked: {RELOCKS_PER_HOUR} re-locks an hour at most)")
            return
        try:
            apply_step(self.root, step)
        except JetbenchError as err:
            self._error(f"re-lock of {domain} failed: {err}")
            return
        self.held.counters["relocks"] = self.held.counters.get("relocks", 0) + 1
        log.warning("%s: re-locked it (%d so far, at most %d an hour)", said,
                    self.held.counters["relocks"], RELOCKS_PER_HOUR)

    # -- the periodic check ------------------------------------------------------------------
    def check(self) -> None:
        with self._lock:
            try:
                self._check()
                self.failed_checks = 0
            except JetbenchError as err:
                self.failed_checks += 1
                self._error(f"check failed: {err}")
            except Exception as err:  # a bug must be logged and counted, not end the service
                self.failed_checks += 1
                log.exception("check failed")
                self._error(f"check failed: {type(err).__name__}: {err}")

    def _check(self) -> None:
        held = self.held
        board = held.board
        assert board is not None
        held.counters["checks"] += 1
        clocks = read_clocks(self.root, board)
        readings = self._read(board, clocks)
        if held.lease is not None:  # lent: the borrower's clocks are neither drift nor throttle
            self._publish(readings)
            return
        reasons = thermal.assess(readings["temperatures_c"], self.layout.trips,
                                 thermal.cooling_states(self.root, self.layout))
        if reasons and not self.throttle_reasons:
            held.counters["throttle_events"] += 1
            log.warning("thermal throttling (evidence: %s)", "; ".join(reasons))
        elif self.throttle_reasons and not reasons:
            log.info("thermal throttling ended")
        self.throttle_reasons = reasons
        below: Tuple[str, ...] = ()
        if held.pinned and time.monotonic() >= held.judge_after:
            applied = read_applied(self.root, board)
            below = below_pin(applied, clocks, board.soc)
            for domain in self.hold.add(applied, clocks, board.soc):
                self._not_held(board, domain)
        elif not held.pinned:
            self.hold.forget()
        if below and below != self.below_pin:
            log.warning("%s", "; ".join(below))
        self.below_pin = below
        if held.pinned and held.targets is not None:
            # A blind step (an NVML lock NVML cannot read back) is planned every time: no drift.
            steps = [s for s in self.plan(board, held.targets) if not s.blind]
            if steps:
                moved = [f"{w.path}: {w.old} (pinned: {w.value})" for s in steps for w in s.writes]
                try:
                    self.repin(steps)
                except JetbenchError as err:
                    self._error(f"re-pin failed: {err}")
                else:
                    held.counters["repins"] += 1
                    self.last_repin = {"at": iso(time.time()), "moved": moved}
                    log.warning("clocks moved behind jetbench's back, re-pinned (%d so "
                                "far): %s", held.counters["repins"], ", ".join(moved))
        self._publish(readings)
