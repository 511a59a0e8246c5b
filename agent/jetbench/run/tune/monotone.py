"""What a study knows without measuring: throughput and power do not fall as a clock rises, and
latency does not rise (a clock raised never slows a workload; thermal throttling is a failed,
invalid point, not a trend). So a point whose clocks are all at or below those of a point that
missed a throughput or latency constraint misses it too, and one whose clocks are all at or
above a point that broke a power limit breaks it too: such a point is not measured (issue 38:
"a feasibility model for constraints"). And the first trials of a new study are the top of
the space for each workload setting (every clock at its highest): the fastest each can be, so
a setting that cannot meet a throughput constraint anywhere is known at once. A point already
measured that missed a constraint is not measured again by the search."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, Union

from .choice import Settings

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from .options import Constraint

# constraint name -> the way its misses spread: "down" (to points no faster), "up" (no slower)
SPREADS: Dict[Tuple[str, str], str] = {("images_per_s", ">="): "down",
                                       ("latency_p99_ms", "<="): "down",
                                       ("power_w", "<="): "up"}
# the constraints whose edge is sought (edge_points): a throughput floor. Not a latency ceiling,
# whose p99 states no uncertainty (an edge found by the value alone missed re-measured in 4 of
# 5 seeds on a TX2, against 2 of 5 without), nor a power cap (TX1 better, Nano worse: the
# point at a cap's edge met it by its readings and missed it re-measured): RESULTS.md
EDGES = (("images_per_s", ">="),)
CATEGORIES = ("model", "precision", "batch")


def implied_miss(trials: Sequence[FrozenTrial], settings: Settings, knobs: Sequence[str],
                 constraints: Sequence[Constraint]) -> Optional[Tuple[FrozenTrial, str]]:
    """(the measured trial, what it missed) that tells this point misses a constraint too, or
    None. Only valid measured trials of the same model, precision and batch count, and only a
    miss their uncertainty does not excuse (the constraint's own rule). The same point, already
    measured and missing any constraint, is not measured again by the search either (a
    sampler proposes a point it has seen; reading a miss again is a trial spent on nothing)."""
    for t in trials:
        if t.state.name != "COMPLETE" or t.user_attrs.get("valid") is not True:
            continue
        other = t.user_attrs.get("settings") or {}
        if any(other.get(k) != settings.get(k) for k in CATEGORIES):
            continue
        clocks = [(settings.get(f"{k}_hz"), other.get(f"{k}_hz")) for k in knobs]
        if any(not isinstance(a, int) or not isinstance(b, int) for a, b in clocks):
            continue
        violations = t.user_attrs.get("constraints") or []
        if all(a == b for a, b in clocks):
            missed = [str(c) for k, c in enumerate(constraints)
                      if k < len(violations) and violations[k] > 0]
            if missed:
                return t, ", ".join(missed) + " at this very point"
            continue
        for k, c in enumerate(constraints):
            spread = SPREADS.get((c.name, c.op))
            if spread is None or k >= len(violations) or not violations[k] > 0:
                continue
            below = all(a <= b for a, b in clocks)  # type: ignore[operator]
            above = all(a >= b for a, b in clocks)  # type: ignore[operator]
            if (spread == "down" and below) or (spread == "up" and above):
                return t, str(c)
    return None


def edge_points(trials: Sequence[FrozenTrial], best: Settings, space: Dict[str, List[int]],
                constraints: Sequence[Constraint]) -> List[Settings]:
    """Where a throughput floor's edge (EDGES) may hold a better point than `best` (the best
    feasible point): along each knob, the other settings as the best's, the midpoint between it
    and the nearest point below it known to miss a constraint, where the points between are not
    measured. Under a floor that binds, the best lies on its edge (img/J rises towards the
    unconstrained best, below it), and a search keeps no edge to itself: halving the distance
    finds it in a few trials. None along a knob whose next measured point down met the
    constraints (the best already beat it) or where nothing below is known to miss."""
    if not any((c.name, c.op) in EDGES for c in constraints):
        return []
    knobs = list(space)
    measured = {tuple(sorted((t.user_attrs.get("settings") or {}).items()))
                for t in trials if t.state.name == "COMPLETE"}
    out: List[Settings] = []
    for knob, values in space.items():
        hz = best.get(f"{knob}_hz")
        if not isinstance(hz, int) or hz not in values:
            continue
        at = values.index(hz)
        for k in range(at - 1, -1, -1):
            point = dict(best, **{f"{knob}_hz": values[k]})
            if implied_miss(trials, point, knobs, constraints) is not None:
                if at - k > 1:
                    out.append(dict(best, **{f"{knob}_hz": values[(k + at) // 2]}))
                break
            if tuple(sorted(point.items())) in measured:
                break  # read, and it met them: the best beat it
    return out


def top_points(space: Dict[str, List[int]], models: Sequence[str], precisions: Sequence[str],
               batches: Sequence[int]) -> List[Dict[str, Union[str, int]]]:
    """Optuna's params of the top of the space (every clock at its highest) for each model,
    precision and batch: the first trials of a new study."""
    tops = {f"{knob}_index": len(values) - 1 for knob, values in space.items()}
    return [{"model": m, "precision": p, "batch": b, **tops}
            for m, p, b in itertools.product(models, precisions, batches)]


def every_point(space: Dict[str, List[int]], models: Sequence[str], precisions: Sequence[str],
                batches: Sequence[int]) -> List[Dict[str, Union[str, int]]]:
    """Optuna's params of every point of the space, the highest clocks first (so a point below
    one that missed a throughput floor is known to miss before its turn comes)."""
    knobs = list(space)
    clocks = sorted(itertools.product(*(range(len(space[k])) for k in knobs)),
                    key=lambda at: (-sum(at), [-i for i in at]))
    return [{"model": m, "precision": p, "batch": b,
             **{f"{k}_index": i for k, i in zip(knobs, at)}}
            for m, p, b in itertools.product(models, precisions, batches) for at in clocks]
