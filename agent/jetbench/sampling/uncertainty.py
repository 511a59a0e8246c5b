"""The uncertainty of every power figure and of img/s/W (pure maths, no I/O).

A channel's mean power carries three worst-case parts, added linearly:
- sensor: the sensor's datasheet limits on that mean (`hw/meters/accuracy.py`);
- integration: how much the trapezoid moves when the same trace is taken at half its rate
  (every other sample): a trace that resolves the load changes little;
- uncovered: the share of the window with no samples (its mean is assumed there), times the mean.
A total that is a sum adds its channels' uncertainties. When the sensor part is unknown the whole
figure is unknown (None, said as "unknown"), never 0.

img/s/W = img/s / W, so its relative uncertainty is the power's plus the throughput's, where the
throughput's is the standard error of the mean of the iteration latencies (added linearly, as the
power figure is a worst-case bound).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..documents import EfficiencyUncertainty, FigureUncertainty
from ..hw.meters.base import KIND_ENERGY
from .energy import integrate

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..hw.meters.accuracy import Accuracy
    from .sampler import SourceTrace
    from .window import WindowResult

BOUND_PCT = 1.0  # MLPerf Power's bound on the efficiency figure's uncertainty


def integration_error_frac(t: ArrayLike, y: ArrayLike, t0: float, t1: float, max_gap_s: float,
                           counter: bool = False) -> Optional[float]:
    """|mean(full trace) - mean(every other sample)| / mean(full), over [t0, t1]."""
    if counter:
        return 0.0  # a counter gives the exact energy between two reads
    t, y = np.asarray(t, dtype=np.float64), np.asarray(y, dtype=np.float64)
    full = integrate(t, y, t0, t1, max_gap_s=max_gap_s)
    half = integrate(t[::2], y[::2], t0, t1, max_gap_s=2 * max_gap_s)
    if full.covered_s <= 0 or half.covered_s <= 0 or not full.mean_w:
        return None
    return abs(full.mean_w - half.mean_w) / abs(full.mean_w)


def channel_uncertainty(mean_w: Optional[float], coverage: float, sensor_w: Optional[float],
                        integration_frac: Optional[float], basis: str) -> FigureUncertainty:
    """The document a channel (or total) carries: `mean_w_uncertainty_w`/`_pct` and parts."""
    doc: FigureUncertainty = {"mean_w_uncertainty_w": None, "mean_w_uncertainty_pct": None,
                              "sensor_w": sensor_w, "integration_w": None, "uncovered_w": None,
                              "basis": basis}
    if mean_w is None:
        return doc
    uncovered = max(0.0, 1.0 - coverage) * abs(mean_w)
    integ = None if integration_frac is None else integration_frac * abs(mean_w)
    doc.update({"integration_w": integ, "uncovered_w": uncovered})
    if sensor_w is None or integ is None:
        return doc
    total = sensor_w + integ + uncovered
    doc["mean_w_uncertainty_w"] = total
    doc["mean_w_uncertainty_pct"] = 100.0 * total / abs(mean_w) if mean_w else None
    return doc


def window_uncertainty(res: WindowResult, traces: Sequence[SourceTrace],
                       accuracies: Mapping[str, Accuracy], gap_factor: float = 5.0
                       ) -> Dict[str, FigureUncertainty]:
    """Channel key ('ina3221/VDD_IN') -> uncertainty document, and the same for each total
    under 'total:<source>/<name>'. `res` is a WindowResult, `traces` the sampler's SourceTraces,
    `accuracies` channel key -> Accuracy."""
    out: Dict[str, FigureUncertainty] = {}
    t0, t1 = res.t_start_s, res.t_end_s
    for src in traces:
        t, v = src.trace.slice(t0, t1)
        step = max(src.period_s, src.interval_s)
        for i, ch in enumerate(src.channels):
            try:
                c = res.channel(ch.key)
            except KeyError:
                continue
            acc = accuracies.get(ch.key)
            sensor = acc.worst_case_w(c.mean_w) if acc is not None and c.mean_w is not None \
                else None
            frac = integration_error_frac(t, v[:, i], t0, t1, gap_factor * step,
                                          counter=ch.kind == KIND_ENERGY) if len(t) else None
            basis = acc.basis if acc is not None else "no accuracy known for this source"
            out[ch.key] = channel_uncertainty(c.mean_w, c.coverage, sensor, frac, basis)
    for total in res.totals:
        parts = [out.get(f"{total.source}/{name}") for name in total.total.channels]
        key = f"total:{total.source}/{total.total.name}"
        known = [w for w in (p.get("mean_w_uncertainty_w") for p in parts if p is not None)
                 if w is not None]
        if total.mean_w is None or len(known) != len(parts):
            basis = "; ".join(sorted({p.get("basis", "unknown") for p in parts if p is not None}))
            out[key] = {"mean_w_uncertainty_w": None, "mean_w_uncertainty_pct": None,
                        "basis": basis or "unknown"}
            continue
        w = math.fsum(known)
        known_parts = [p for p in parts if p is not None]  # all of them: none is None here
        out[key] = {"mean_w_uncertainty_w": w,
                    "mean_w_uncertainty_pct": 100.0 * w / abs(total.mean_w)
                    if total.mean_w else None,
                    "basis": known_parts[0].get("basis", "unknown") if len(parts) == 1 else
                    "sum of the channels' worst-case uncertainties",
                    # a sum's parts add too
                    "sensor_w": _part_sum(known_parts, "sensor_w"),
                    "integration_w": _part_sum(known_parts, "integration_w"),
                    "uncovered_w": _part_sum(known_parts, "uncovered_w")}
    return out


def _part_sum(parts: Sequence[FigureUncertainty], name: str) -> Optional[float]:
    """The sum of one part over a total's channels (None where one lacks it)."""
    values = [p.get(name) for p in parts]
    known = [float(v) for v in values if isinstance(v, (int, float))]
    return math.fsum(known) if len(known) == len(values) else None


def sem_pct(values: Sequence[float]) -> Optional[float]:
    """Standard error of the mean, as % of the mean (None below 2 values or a mean <= 0)."""
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    var = math.fsum((x - mean) ** 2 for x in values) / (n - 1)
    return 100.0 * math.sqrt(var / n) / mean if mean > 0 else None


def pooled_sd_pct(groups: Sequence[Sequence[float]]) -> Optional[float]:
    """One reading's standard deviation, as % of its point's mean, pooled over groups of repeated
    readings of one point each (their squared relative deviations over their degrees of
    freedom); None where no group has two readings with a mean > 0."""
    squares, dof = 0.0, 0
    for values in groups:
        n = len(values)
        mean = math.fsum(values) / n if n else 0.0
        if n < 2 or mean <= 0:
            continue
        squares += math.fsum(((x - mean) / mean) ** 2 for x in values)
        dof += n - 1
    return 100.0 * math.sqrt(squares / dof) if dof else None


def throughput_sem_pct(latencies_ms: Sequence[float]) -> Optional[float]:
    """Standard error of the mean iteration latency, as % of the mean (None below 2 samples)."""
    return sem_pct(latencies_ms)


def efficiency_uncertainty(power_pct: Optional[float], throughput_pct: Optional[float],
                           power_basis: str, external_meter: bool,
                           per_iteration: bool = True) -> EfficiencyUncertainty:
    """`efficiency.uncertainty`: power, throughput and their combination (linear), with what
    would lower it when above BOUND_PCT. `per_iteration`: the throughput's spread comes from
    iterations jetbench timed (a command's run has none it can see)."""
    combined = None
    if power_pct is not None and throughput_pct is not None:
        combined = power_pct + throughput_pct
    lower: List[str] = []
    if not per_iteration and throughput_pct is None:
        # no meter can narrow a spread nobody knows: the reason, as it is
        lower.append("the command reports one rate: no spread; print per-iteration times or "
                     "repeat it")
    elif combined is None or combined > BOUND_PCT:
        if per_iteration and (throughput_pct is None or throughput_pct > BOUND_PCT / 2):
            # the throughput's standard error falls as 1/sqrt(n): docs/measure.md says so
            lower.append("a longer window (--duration) or more --iterations")
        if power_pct is None or power_pct > BOUND_PCT / 2:
            lower.append("an external meter with a stated accuracy (--meter wt310:PORT)"
                         if not external_meter else
                         "a meter range closer to the load (the range part dominates)")
    return {"power_pct": power_pct, "throughput_pct": throughput_pct,
            "images_per_j_pct": combined,
            "basis": f"power: {power_basis}; throughput: " + (
                "standard error of the mean of the iteration latencies" if per_iteration else
                "unknown (a command reports no per-iteration times to jetbench)")
            + "; combined linearly",
            "lower_it": lower}
