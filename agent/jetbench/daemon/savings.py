"""The energy `daemon --tune` saved, against the point it started from at the same demand
(issue 59).

A window's saving is its items at the starting point's items per joule, less the energy it
took. The starting point's items per joule depends on the demand (a paced workload's idle
power spreads over more items when more arrive), so it is the starting point's own window at
this demand: its latest window, where the window judged served the same rate within noise
(SIGMAS); else the governor's models of the starting point at this demand (`predicted`, the
basis then says `modelled`); else the window is not counted, and the status says how long was
not. A first generation's figure was the first window's items/J whatever the demand: when the
demand doubled, the idle power spread over twice the items and the figure grew by the
demand's change, not the clocks'.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

from .online_tuner import SIGMAS, Point, Window, _apart

MEASURED = "measured"
MODELLED = "modelled"


class EnergySaved:
    """Told each judged window; `joules` so far, and on what basis."""

    def __init__(self, start: Point,
                 predicted: Callable[[Point], Optional[Tuple[float, float]]] = lambda p: None):
        self.start = start
        self._predicted = predicted  # (items/s, W) of a point at the demand now, or None
        self.reference: Optional[Window] = None
        self.joules = 0.0
        self.counted_s = {MEASURED: 0.0, MODELLED: 0.0}
        self.uncounted_s = 0.0

    def window(self, point: Point, measured: Window, seconds: float) -> None:
        if point == self.start:
            self.reference = measured
            return
        ref = self.reference
        if ref is not None and ref.items_per_j > 0 and not _apart(
                measured.items_per_s, measured.items_per_s_uncertainty_pct, ref.items_per_s,
                ref.items_per_s_uncertainty_pct, SIGMAS):
            per_j, basis = ref.items_per_j, MEASURED
        else:
            model = self._predicted(self.start)
            if model is None or model[1] <= 0 or model[0] <= 0:
                self.uncounted_s += seconds
                return
            per_j, basis = model[0] / model[1], MODELLED
        self.joules += measured.items_per_s * seconds / per_j - measured.power_w * seconds
        self.counted_s[basis] += seconds

    def basis(self) -> str:
        measured, modelled = self.counted_s[MEASURED], self.counted_s[MODELLED]
        parts = [f"each window's items at the items/J of the starting point read at the same "
                 f"demand (its rate within noise), less the window's energy ({measured:.0f} s)"]
        if modelled:
            parts.append(f"at the governor's model of the starting point at that demand "
                         f"({modelled:.0f} s)")
        if self.uncounted_s:
            parts.append(f"not counted while the demand had moved from the starting point's "
                         f"reading ({self.uncounted_s:.0f} s)")
        return "; ".join(parts)
