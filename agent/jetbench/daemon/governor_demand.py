"""The governor's demand (governor.py): read at the top or, after a fall, at the held point,
a move that was noise taken back with the windows of the demand before it, and a new demand
begun (an epoch: windows at a point are compared within one). governor.py's module doc says
when each is read; the governor is one class of governor_hold.py's, this and governor.py's."""

from __future__ import annotations

from typing import Optional

from .demand_epoch import Epoch
from .governor_hold import SETTLE_SHARE, TOP_SHARE, Holding
from .online_tuner import EXPLORING, HOLDING, RETUNING, SIGMAS, Decision, Window, _apart
from .workload_model import Point


class DemandReading(Holding):
    """The demand's reads and epochs (module doc)."""

    # -- the demand --------------------------------------------------------------------------------
    def _demand_from(self, point: Point, window: Window) -> Optional[Decision]:
        """A window at the top reads the demand; one at the held point shows it moved."""
        settled, self._top_settled = self._top_settled, False
        ep = self._epoch
        if ep.demand is None and ep.read_at is not None and point == ep.read_at:
            # a fall read at the held point: it keeps up with what arrives
            if ep.saturated(window) and window.busy_share is not None and \
                    point != self.space.top():
                # ... not where it was busy throughout (--busy-from): the demand is more than
                # it serves (a rise, its first window read as a fall), read at the top
                ep.read_at = self.space.top()
                return Decision(ep.read_at, self.phase, f"{self._text(point)} was busy "
                                f"{window.busy_share:.0%} of the window: it did not keep up, the "
                                "demand read at the top", settle=True, window_share=TOP_SHARE,
                                settle_share=SETTLE_SHARE)
            self._same_as_before(window)
            self._epoch.read_demand(window)  # (the demand before, taken back, read once more)
            return None
        if point == self.space.top():
            if ep.demand is None and self._same_as_before(window):
                ep = self._epoch
            if ep.demand is None or (_apart(window.items_per_s, window.items_per_s_uncertainty_pct,
                                            ep.demand, ep.demand_pct, SIGMAS)):
                if ep.demand is not None and not settled:
                    # read at the top again, it moved: read it settled
                    return self._new_demand(f"the rate at the top moved ({ep.demand:.3g} -> "
                                            f"{window.items_per_s:.3g}/s)")
                if ep.demand is not None:  # moved, read settled: the new demand
                    self._begin_epoch()
                    self._before = None
                    self.phase = RETUNING
                self._epoch.read_demand(window)
            else:  # the same demand read again: their mean
                ep.read_demand(window)
            return None
        if self.phase != HOLDING or point != self.held:
            return None
        ref = ep.mean(point)
        if ref is None or not _apart(window.items_per_s, window.items_per_s_uncertainty_pct,
                                     ref.items_per_s, ref.items_per_s_uncertainty_pct, SIGMAS):
            return None
        # (read again settled: the window that showed it straddles the change, and a backlog
        # drained would flatter the next one): where it fell, at the held point itself (it
        # keeps up with less; the top would read the same at more power), else at the top
        went = "fell" if window.items_per_s < ref.items_per_s else "rose"
        decision = self._new_demand(f"the rate {went} ({ref.items_per_s:.3g} -> "
                                    f"{window.items_per_s:.3g}/s)",
                                    at=point if went == "fell" else None)
        self._moved = (point, window)  # (its point's, should the move prove noise)
        return decision

    def _new_demand(self, why: str, at: Optional[Point] = None) -> Decision:
        """A new demand, read at `at` (default the top) after a settling window (a backlog the
        point before left would flatter it)."""
        self._begin_epoch()
        self._epoch.read_at = at or self.space.top()
        self.phase = RETUNING if self.held is not None else EXPLORING
        where = "the top" if at is None else self._text(at)
        return Decision(self._epoch.read_at, self.phase, f"{why}: reading the demand at {where}",
                        settle=True, window_share=TOP_SHARE, settle_share=SETTLE_SHARE)

    def _begin_epoch(self) -> None:
        self.epochs += 1
        self._tail.forget_last()  # (the window before a new demand read the move)
        self._resume = None
        self._checking = None  # (a look under way ends with its demand)
        self._before = self._epoch
        self._epoch = Epoch()
        self._moved = None

    def _same_as_before(self, window: Window) -> bool:
        """The demand read after a move is the one before it within noise (the move was noise):
        that one taken back with its windows (module doc); False: the new demand stands."""
        before, self._before = self._before, None
        if before is None or not before.same_demand(window):
            return False
        self._epoch = before
        self.epochs -= 1
        self.same_again += 1
        moved, self._moved = self._moved, None
        if moved is not None:
            # the held window that seemed to show the move read this demand too: one more of
            # its point's windows (else the point's mean stays what it was, and a held point
            # whose few windows read low sees every later one as a rise: live run BH's fall,
            # one 3 s read 18% low, sent to the top three times in 30 s and taken back each time)
            self._epoch.reads.setdefault(moved[0], []).append(moved[1])
            self._remember(*moved)
        self._resume = self.held
        self._kept = (f"the demand read again ({window.items_per_s:.3g}/s) is the one before "
                      "within noise: its windows kept")
        return True
