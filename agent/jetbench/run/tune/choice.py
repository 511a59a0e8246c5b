"""Choosing: the metrics of a trial, which trials are feasible, the best one by measure's
uncertainty rule (a tie goes to the one drawing less power), the points read again.

A figure whose readings state no uncertainty (a command's rate from its own lines, NVML's
power) takes the read-to-read spread the study has seen, once it has seen some: one reading's
standard deviation, pooled over the points read more than once (`pooled_sd_pct`), over the
square root of a point's readings. A constraint on such a figure is then judged with it, as
with a stated uncertainty; before any point is read twice, by its value alone.

Two points read on the same board are compared (the tie rule) without the part of their img/J
uncertainty that is the power meters' datasheet limits: a gain error is the same factor in
both readings and cancels in their ratio, and an offset of the same watts moves the ratio by
at most that part times their powers' relative difference (`_compared_pct`). What is left is
what differs from one reading to the next: the rate's standard error, the trace's integration
and coverage, and the read-to-read spread of img/J once the study has seen one. Left in, a
meter's 5% accuracy made points 10% apart a tie and the one drawing 1% less power won."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Union

from ...report import schema
from ...report.digits import separated
from ...sampling.uncertainty import pooled_sd_pct
from .options import OBJECTIVES, Constraint

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from ...documents import ResultDoc

Metrics = Dict[str, Optional[float]]  # a trial's figures by name (metrics_of)
Settings = Dict[str, Union[str, int]]  # model, precision, batch and <knob>_hz of a trial


def metrics_of(doc: ResultDoc) -> Metrics:
    """A trial's figures, read through the result schema's accessors. The rate and per-joule
    figures are in the result's own unit (a --cmd's tokens or frames: its items), under the
    names the objectives and constraints use."""
    return {"images_per_s": schema.items_per_s(doc),
            "images_per_j": schema.items_per_j(doc),
            "latency_p99_ms": schema.latency_ms(doc, "p99"),
            "power_w": schema.total_w(doc),
            "images_per_j_uncertainty_pct": schema.images_per_j_pct(doc),
            "images_per_j_sensor_pct": schema.total_sensor_pct(doc),
            "images_per_s_uncertainty_pct": schema.throughput_pct(doc),
            "power_w_uncertainty_pct": schema.total_w_pct(doc),
            "wall_images_per_j": ((doc.get("efficiency") or {}).get("wall") or {}).get(
                "images_per_j")}


def feasible(trial: FrozenTrial) -> bool:
    violations = trial.user_attrs.get("constraints", [1.0])
    return (trial.state.name == "COMPLETE" and trial.user_attrs.get("valid") is True
            and isinstance(violations, list) and all(
                type(v) in (int, float) and v <= 0 for v in violations))


def _key(t: FrozenTrial) -> str:
    settings = t.user_attrs.get("settings")
    return json.dumps(settings, sort_keys=True) if settings else f"#{t.number}"


# figures a reading may give with no uncertainty: theirs can come from re-reads instead (a p99
# latency never states one: from a short window it is nearly the maximum of a few batches, and
# a point near a ceiling reads over it as often as under: RESULTS.md, the Xavier NX 10 W row)
SPREAD_FIGURES = ("images_per_s", "power_w", "images_per_j", "latency_p99_ms")


@dataclass(frozen=True)
class _Point:
    """Trials of the same settings: their readings and mean metrics."""
    trials: List[FrozenTrial]
    metrics: Metrics
    feasible: bool


def _readings(group: Sequence[FrozenTrial], name: str) -> Sequence[FrozenTrial]:
    """The readings of a point that give figure `name`: all of them, but for a p99 latency
    those on at least half the most timed batches any of them had (a p99 of a dozen batches is
    nearly their maximum, biased low against one of a hundred: the points read again under a
    latency constraint are read on P99_BATCHES, study.py)."""
    if name != "latency_p99_ms":
        return group
    batches = [t.user_attrs.get("batches") or 0 for t in group]
    return [t for t, n in zip(group, batches) if 2 * n >= max(batches)]


def _unstated(group: Sequence[FrozenTrial], name: str) -> Optional[List[float]]:
    """A point's readings of figure `name` where none of them states its uncertainty (None
    where one does or a reading lacks the figure)."""
    if any((t.user_attrs.get("metrics") or {}).get(f"{name}_uncertainty_pct") is not None
           for t in group):
        return None
    return _values(group, name)


def _values(group: Sequence[FrozenTrial], name: str) -> Optional[List[float]]:
    """A point's readings of figure `name` (None where a reading lacks it)."""
    values = [(t.user_attrs.get("metrics") or {}).get(name) for t in group]
    known = [v for v in values if v is not None]
    return known if len(known) == len(values) else None


def _own_pct(metrics: Metrics, spread_pct: Optional[float], readings: int) -> Optional[float]:
    """A point's img/J uncertainty less its meters' datasheet part, in percent, and at least
    the study's read-to-read spread over sqrt(readings) (None: the parts are unknown)."""
    stated, sensor = metrics.get("images_per_j_uncertainty_pct"), metrics.get(
        "images_per_j_sensor_pct")
    if stated is None or sensor is None:
        return None
    own = max(stated - sensor, 0.0)
    if spread_pct is not None:
        own = max(own, spread_pct / math.sqrt(readings))
    return own


def read_to_read_pct(groups: Sequence[Sequence[FrozenTrial]]) -> Dict[str, float]:
    """For each figure of SPREAD_FIGURES that its readings give with no uncertainty: one
    reading's standard deviation in percent, pooled over the points read more than once
    (absent where none was). A p99's counts all its readings, a short window's beside a long
    one's: their difference (the short one's bias) is part of what one reading may be off by."""
    out = {}
    for name in SPREAD_FIGURES:
        readings = [v for v in (_unstated(g, name) for g in groups if len(g) > 1) if v]
        spread = pooled_sd_pct(readings)
        if spread is not None:
            out[name] = spread
    return out


def _pooled(trials: Sequence[FrozenTrial], constraints: Sequence[Constraint] = ()
            ) -> Dict[str, _Point]:
    """Trials of the same settings as one point: its readings' mean metrics (a point with a
    reading that is invalid or breaks a constraint is not feasible). A figure whose readings
    state no uncertainty takes the study's read-to-read spread over sqrt(readings), and the
    constraints are judged again with it."""
    groups: Dict[str, List[FrozenTrial]] = {}
    for t in trials:
        if t.state.name == "COMPLETE":
            groups.setdefault(_key(t), []).append(t)
    spread = read_to_read_pct(list(groups.values()))
    ipj_spread = pooled_sd_pct([v for v in (_values(g, "images_per_j") for g in groups.values()
                                            if len(g) > 1) if v])
    pooled = {}
    for key, group in groups.items():
        metrics: Metrics = {}
        for name in group[0].user_attrs.get("metrics", {}):
            values = [t.user_attrs["metrics"].get(name) for t in _readings(group, name)]
            known = [v for v in values if v is not None]
            metrics[name] = sum(known) / len(known) if len(known) == len(values) else None
        for name, pct in spread.items():
            if metrics.get(name) is not None and _unstated(group, name) is not None:
                metrics[f"{name}_uncertainty_pct"] = pct / math.sqrt(len(_readings(group, name)))
        own = _own_pct(metrics, ipj_spread, len(group))
        if own is not None:
            metrics["images_per_j_own_pct"] = own
        ok = all(feasible(t) for t in group) and all(
            c.violation(metrics) <= 0 for c in constraints)
        pooled[key] = _Point(group, metrics, ok)
    return pooled


def _to_confirm(trials: Sequence[FrozenTrial], objective: str, room: int,
                constraints: Sequence[Constraint] = ()) -> List[Settings]:
    """The settings of the best feasible points read only once, best first, at most `room`
    (trials whose settings are checked: `_usable`)."""
    if room <= 0 or objective not in OBJECTIVES:
        return []
    sign = 1 if OBJECTIVES[objective] == "maximize" else -1
    once = [(value, p) for p in _pooled(trials, constraints).values()
            if p.feasible and len(p.trials) == 1
            for value in [p.metrics.get(objective)] if value is not None]
    once.sort(key=lambda vp: -sign * vp[0])
    return [dict(p.trials[0].user_attrs["settings"]) for _, p in once[:room]]


def leaders_again(trials: Sequence[FrozenTrial], objective: str, room: int, leaders: int,
                  constraints: Sequence[Constraint] = ()) -> List[Settings]:
    """Where every point is measured: the settings of the best `leaders` feasible points that
    have the fewest readings among them, best first, at most `room` (a round of reading the
    leaders again; the next round judges them on their new means)."""
    if room <= 0 or objective not in OBJECTIVES:
        return []
    sign = 1 if OBJECTIVES[objective] == "maximize" else -1
    ranked = sorted(((value, p) for p in _pooled(trials, constraints).values() if p.feasible
                     for value in [p.metrics.get(objective)] if value is not None),
                    key=lambda vp: -sign * vp[0])[:leaders]
    fewest = min((len(p.trials) for _, p in ranked), default=0)
    return [dict(p.trials[0].user_attrs["settings"]) for _, p in ranked
            if len(p.trials) == fewest][:room]


def _params_of(settings: Settings, space: Dict[str, List[int]],
               choices: Dict[str, Sequence[Union[str, int]]]) -> Optional[Settings]:
    """Optuna's params for a point, rebuilt from its checked settings (never the stored
    params, which a shared study's editor could point past a table); None when the point is
    not one of this run's choices (another workload's trial)."""
    params: Settings = {}
    for key, options in choices.items():
        if settings.get(key) not in options:
            return None
        params[key] = settings[key]
    for knob, values in space.items():
        hz = settings.get(f"{knob}_hz")
        if not isinstance(hz, int) or hz not in values:
            return None
        params[f"{knob}_index"] = values.index(hz)
    return params


def choose_best(trials: Sequence[FrozenTrial], objective: str,
                constraints: Sequence[Constraint] = ()) -> Optional[FrozenTrial]:
    """The best feasible point on `objective` (a trial standing for it; points measured more
    than once count by their mean); for images_per_j, points whose img/J differ by less than
    their combined uncertainty are a tie and the one drawing less power wins. `constraints`:
    the study's, judged again on each point's pooled readings (module doc)."""
    points = [p for p in _pooled(trials, constraints).values()
              if p.feasible and p.metrics.get(objective) is not None]
    ok = []
    for p in points:
        stand_in = copy.copy(p.trials[-1])
        stand_in.user_attrs = {**stand_in.user_attrs, "metrics": p.metrics,
                               "readings": len(p.trials), "boards": _boards_of(p)}
        ok.append(stand_in)
    if not ok:
        return None
    sign = 1 if OBJECTIVES[objective] == "maximize" else -1
    top = max(ok, key=lambda t: sign * t.user_attrs["metrics"][objective])
    if objective != "images_per_j":
        return top
    ties = [t for t in ok if _tied(t, top)]
    # (of equal power, the higher img/J)
    return min(ties, key=lambda t: (t.user_attrs["metrics"].get("power_w") or math.inf,
                                    -t.user_attrs["metrics"][objective]))


def why_best(trials: Sequence[FrozenTrial], objective: str, per_j: str = "img/s/W",
             best: Optional[FrozenTrial] = None, constraints: Sequence[Constraint] = (),
             space_size: Optional[int] = None) -> str:
    """Why choose_best chose its point (`best`, where the caller has it already), in a line:
    the tie it won on power, or how far it is from the runner-up ('' where nothing was
    chosen); with `space_size`, over how many of the space's points that was judged."""
    best = best or choose_best(trials, objective, constraints)
    if best is None:
        return ""
    line = _why(trials, objective, per_j, best, constraints)
    if space_size is None:
        return line
    measured = len(_pooled(trials, constraints))
    return f"{line}, over the {measured} of {space_size} points measured"


def _why(trials: Sequence[FrozenTrial], objective: str, per_j: str, best: FrozenTrial,
         constraints: Sequence[Constraint]) -> str:
    points = [p for p in _pooled(trials, constraints).values()
              if p.feasible and p.metrics.get(objective) is not None
              and _key(p.trials[-1]) != _key(best)]
    if not points:
        return "the only feasible point"
    sign = 1 if OBJECTIVES[objective] == "maximize" else -1
    value = best.user_attrs["metrics"][objective]
    runner = max(points, key=lambda p: sign * (p.metrics[objective] or 0.0))
    other = runner.metrics[objective] or 0.0
    gap = abs(value - other) / abs(other) * 100 if other else math.inf
    number = runner.trials[-1].number + 1
    if objective != "images_per_j":
        return f"{objective} {gap:.1f}% {'above' if sign > 0 else 'below'} trial {number}'s"
    if sign * other > sign * value:  # a tie it won: the runner-up measured more img/s/W
        return (f"tie with trial {number} within {gap:.1f}% (their uncertainties overlap): "
                "less power wins")
    pct = best.user_attrs["metrics"].get("images_per_j_uncertainty_pct")
    if pct is None or runner.metrics.get("images_per_j_uncertainty_pct") is None:
        # the one rule (report/verdict.py): an unknown uncertainty is no verdict
        return (f"no verdict against trial {number}: an uncertainty is unknown (it reads "
                f"{gap:.1f}% more {per_j}, the highest measured)")
    stand_in = copy.copy(runner.trials[-1])
    stand_in.user_attrs = {**stand_in.user_attrs, "metrics": runner.metrics,
                           "boards": _boards_of(runner)}
    if _tied(best, stand_in):
        return (f"tie with trial {number} within {gap:.1f}% (their uncertainties overlap): "
                "less power wins")
    return f"{gap:.1f}% more {per_j} than trial {number}, beyond both uncertainties"


def _boards_of(point: _Point) -> List[str]:
    """The boards a point's readings were taken on."""
    return sorted({str(t.user_attrs.get("board")) for t in point.trials})


def _boards(t: FrozenTrial) -> List[str]:
    return t.user_attrs.get("boards") or [str(t.user_attrs.get("board"))]


def _compared_pct(a: FrozenTrial, b: FrozenTrial) -> Optional[float]:
    """What the meters' datasheet part adds to a comparison of `a` and `b` read on the same
    board: at most that part times their powers' relative difference (a gain error cancels,
    an offset of the same watts nearly does). None where they were not read on one board or a
    part is unknown: the whole stated uncertainty then counts (module doc)."""
    ma, mb = a.user_attrs["metrics"], b.user_attrs["metrics"]
    sa, sb = ma.get("images_per_j_sensor_pct"), mb.get("images_per_j_sensor_pct")
    wa, wb = ma.get("power_w"), mb.get("power_w")
    own = (ma.get("images_per_j_own_pct"), mb.get("images_per_j_own_pct"))
    if len(_boards(a)) != 1 or _boards(a) != _boards(b) or None in (sa, sb, wa, wb, *own):
        return None
    return max(sa, sb) * abs(wa - wb) / max(wa, wb, 1e-12)


def _tied(a: FrozenTrial, b: FrozenTrial) -> bool:
    ma, mb = a.user_attrs["metrics"], b.user_attrs["metrics"]
    ua, ub = ma.get("images_per_j_uncertainty_pct"), mb.get("images_per_j_uncertainty_pct")
    if a is b:
        return True
    common = _compared_pct(a, b)
    if common is not None:  # read on one board: the meters' own error left out (module doc)
        ua, ub = ma["images_per_j_own_pct"] + common, mb["images_per_j_own_pct"] + common
    if ua is None or ub is None:
        return False  # unknown uncertainty: no tie can be claimed
    return not separated(ma["images_per_j"], ua, mb["images_per_j"], ub)


def _usable(trials: Sequence[FrozenTrial], space: Dict[str, List[int]]) -> List[FrozenTrial]:
    return [t for t in trials if trial_problem(t, space) is None]


def settings_problem(settings: object, space: Dict[str, List[int]]) -> Optional[str]:
    """Why a trial's settings (read from a study anyone with the storage can edit) are not a
    point of this board's space; None when they are. A clock is an int of its knob's list."""
    if not isinstance(settings, dict):
        return "its settings are not a table"
    for knob, values in space.items():
        hz = settings.get(f"{knob}_hz")
        if type(hz) is not int or hz not in values:
            return f"{knob}_hz {str(hz)[:40]!r} is not in this board's space"
    extra = sorted(k for k in settings if str(k).endswith("_hz") and k[:-3] not in space)
    if extra:
        return f"{str(extra[0])[:40]!r} is not a knob of this study"
    for key in ("model", "precision"):
        if not isinstance(settings.get(key), str):
            return f"its {key} is not a string"
    batch = settings.get("batch")
    if type(batch) is not int or batch < 1:
        return "its batch is not a positive integer"
    return None


def metrics_problem(metrics: object) -> Optional[str]:
    """Why a trial's metrics are not numbers (None: they are, or unknown)."""
    if metrics is None:
        return None
    if not isinstance(metrics, dict):
        return "its metrics are not a table"
    for key, value in metrics.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            return f"metric {str(key)[:40]!r} is not a finite number"
    return None


def trial_problem(trial: FrozenTrial, space: Dict[str, List[int]]) -> Optional[str]:
    """A finished trial that this board cannot take as a point: hostile or foreign settings
    or metrics in a shared study. Such a trial is never chosen nor written to a profile."""
    if trial.state.name != "COMPLETE":
        return None
    return (settings_problem(trial.user_attrs.get("settings"), space)
            or metrics_problem(trial.user_attrs.get("metrics")))
