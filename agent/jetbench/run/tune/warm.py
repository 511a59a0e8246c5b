"""`tune --warm-start PATH`: a new study that starts from an earlier one's best points (its
tune.json: another board of the same model, the same workload). Boards of one model differ a
little (silicon, cooling, a carrier's draw), so the earlier answer is where to look first, not
the answer: the earlier study's best feasible points are this study's first trials, measured
here, and the search goes on from what they show."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List, Sequence, Union

from ...errors import UsageError
from .choice import Settings, _params_of, settings_problem
from .options import OBJECTIVES

WARM_POINTS = 3  # the earlier study's best points measured first (fewer where it has fewer)


def read_study(path: Path) -> Dict[str, object]:
    """The earlier study's tune.json, checked before any work (UsageError naming what is
    wrong)."""
    from ...report.io import read_json

    try:
        # bounded (size, depth) and never blocking: a FIFO or /dev/zero named there is refused
        doc = read_json(Path(path), "tune.json")
    except UsageError as err:
        raise UsageError(f"--warm-start {err.message}",
                         hint="give the tune.json an earlier `jetbench tune` wrote") from None
    if not isinstance(doc, dict) or doc.get("schema") != "jetbench.tune/1" \
            or not isinstance(doc.get("trials"), list):
        raise UsageError(f"--warm-start {path}: not a jetbench tune.json (jetbench.tune/1)",
                         hint="give the tune.json an earlier `jetbench tune` wrote")
    return doc


def warm_points(doc: Dict[str, object], objective: str, space: Dict[str, List[int]],
                choices: Dict[str, Sequence[Union[str, int]]], room: int
                ) -> List[Settings]:
    """Optuna's params of the earlier study's best feasible points that are points of this
    study (its clocks in this board's space, its workload among this run's), best first by the
    mean of their readings, at most min(WARM_POINTS, room)."""
    sign = 1 if OBJECTIVES.get(objective) == "maximize" else -1
    scored: Dict[str, List[float]] = {}
    kept: Dict[str, Settings] = {}
    trials = doc.get("trials")
    for t in trials if isinstance(trials, list) else []:
        if not isinstance(t, dict) or t.get("feasible") is not True:
            continue
        settings, metrics = t.get("settings"), t.get("metrics")
        value = metrics.get(objective) if isinstance(metrics, dict) else None
        if not isinstance(settings, dict) or settings_problem(settings, space) is not None \
                or isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            continue
        params = _params_of(settings, space, choices)
        if params is None:
            continue
        key = json.dumps(params, sort_keys=True)
        scored.setdefault(key, []).append(float(value))
        kept[key] = params
    best = sorted(scored, key=lambda k: -sign * sum(scored[k]) / len(scored[k]))
    return [kept[k] for k in best[:max(0, min(WARM_POINTS, room))]]
