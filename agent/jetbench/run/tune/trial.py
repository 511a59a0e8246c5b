"""One trial of a study, in parts the objective (search.Study.objective) puts together: the
point the sampler suggests, whether the budget is still this board's to spend, what a point
known to miss says, and what a measured point records (its figures, validity, constraints and
objective values)."""

from __future__ import annotations

import math
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Dict, List, Sequence, Tuple, Union

from ...report import schema
from ..constraint import Constraint
from .choice import Settings, metrics_of
from .storage import _worst

if TYPE_CHECKING:
    from optuna import Study as OptunaStudy
    from optuna.trial import FrozenTrial, Trial

    from ...documents import ResultDoc
    from ..measure import MeasureReport

Choices = Dict[str, Sequence[Union[str, int]]]  # model, precision and batch: what a study tries


def suggest(trial: Trial, space: Dict[str, List[int]], choices: Choices) -> Settings:
    settings: Settings = {}
    for key, options in choices.items():
        settings[key] = trial.suggest_categorical(key, list(options))  # type: ignore[assignment]
    for knob, values in space.items():
        # A clock is ordered, and img/J changes smoothly along it: searched as its index in
        # the table (TPE models neighbours), not as unrelated categories.
        settings[f"{knob}_hz"] = values[trial.suggest_int(f"{knob}_index", 0, len(values) - 1)]
    return settings


def budget_taken(optuna: ModuleType, study: OptunaStudy, trial: Trial,
                 count: Callable[[], int], limit: int, budget: int) -> bool:
    """Several boards on one study: the trials already running on the others (started
    before this one: a lower number) fill the budget first, so the study stops at its budget,
    not past it. Of two that look at once the later one yields (one that yields is no longer
    RUNNING); an earlier trial counts whether or not it has said it measures yet (it was
    counted only once it had: two boards that looked within that moment both ran, 7 trials
    of 6 under load). The running trials are read before the finished ones are counted (`count`):
    a trial that ends in between is then counted twice, never not at all. A point queued again
    (a dead board's trial, failed by the heartbeat; an interrupted one) keeps the place in the
    budget its trial had: while it waits or runs, no new trial takes that place, and it runs
    against the whole budget, not a phase's `limit`."""
    state = optuna.trial.TrialState
    retry = "retry_of" in trial.user_attrs
    earlier = [t for t in study.get_trials(deepcopy=False, states=(state.RUNNING,
                                                                   state.WAITING))
               if t.number != trial.number and (
                   (t.state == state.RUNNING and t.number < trial.number)
                   or ("retry_of" in t.user_attrs and (not retry or t.number < trial.number)
                       and (t.state == state.RUNNING or not retry)))]
    return count() + len(earlier) >= (budget if retry else limit)


def known_miss(trial: Trial, source: FrozenTrial, missed: str, modern: bool) -> str:
    """A point known to miss without measuring: closed (by the caller) as pruned, with the
    constraints the point it follows from broke (the sampler learns it is infeasible); what
    its line says."""
    why = (f"not measured: trial #{source.number + 1} missed {missed}"
           if missed.endswith(" at this very point") else
           f"not measured: its clocks are no better than trial #{source.number + 1}'s,"
           f" which missed {missed}")
    trial.set_user_attr("inferred", why)
    set_constraints(trial, list(source.user_attrs.get("constraints") or [1.0]), modern)
    return why


def set_constraints(trial: Trial, violations: List[float], modern: bool) -> None:
    """Optuna's constraints of a trial (positive: broken): an attribute the sampler's
    constraints_func reads, and Optuna 5's own (Trial.set_constraint)."""
    trial.set_user_attr("constraints", violations)
    if modern:
        for k, v in enumerate(violations):
            trial.set_constraint(f"c{k}", v)


def record(trial: Trial, report: MeasureReport, constraints: Sequence[Constraint],
           modern: bool) -> Dict[str, object]:
    """A measured trial's figures, validity and constraints, kept in the study; its metrics."""
    doc: ResultDoc = report.results[0] if report.results else {}
    metrics = metrics_of(doc)
    trial.set_user_attr("batches", schema.timed_iterations(doc))
    valid = doc.get("status") == "ok" and (doc.get("validity") or {}).get("valid", False)
    violations = [c.violation(metrics) for c in constraints]
    # an invalid result is infeasible whatever it measured (its clocks were not the ones
    # claimed, or its power window was refused)
    violations.append(0.0 if valid else 1.0)
    trial.set_user_attr("metrics", metrics)
    trial.set_user_attr("valid", valid)
    trial.set_user_attr("status", doc.get("status"))
    trial.set_user_attr("reasons", list((doc.get("validity") or {}).get("reasons", [])))
    trial.set_user_attr("result", str(report.paths[0]) if report.paths else None)
    set_constraints(trial, violations, modern)
    return dict(metrics)


def objective_values(metrics: Dict[str, object], objectives: Sequence[str],
                     directions: Sequence[str]) -> Union[float, Tuple[float, ...]]:
    """What Optuna is told: each objective's figure, or the worst value where one is missing
    (a trial that measured nothing of it)."""
    values = [v for v in (metrics.get(o) for o in objectives)
              if isinstance(v, (int, float)) and not math.isnan(v)]
    if len(values) < len(objectives):
        return tuple(_worst(d) for d in directions) if len(directions) > 1 else _worst(
            directions[0])
    return tuple(values) if len(values) > 1 else values[0]
