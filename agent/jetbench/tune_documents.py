"""`jetbench tune`'s documents (tune.json): each trial, the closest miss, the study's summary.
Declared as documents.py declares a result's: types only, nothing at run time."""

from __future__ import annotations

from typing import Dict, List, Optional, TypedDict


class TrialSettings(TypedDict, total=False):
    """What one tune trial ran (run/tune/study.py): the clocks in Hz per knob, the workload."""
    model: str
    precision: str
    batch: int
    gpu_hz: int
    emc_hz: int
    cpu_hz: int


class TrialMetrics(TypedDict, total=False):
    """A trial's figures (run/tune/choice.py metrics_of), None where not measured."""
    images_per_s: Optional[float]
    images_per_j: Optional[float]
    latency_p99_ms: Optional[float]
    power_w: Optional[float]
    images_per_j_uncertainty_pct: Optional[float]
    images_per_s_uncertainty_pct: Optional[float]
    power_w_uncertainty_pct: Optional[float]


class TrialDoc(TypedDict, total=False):
    number: int
    state: str
    board: Optional[str]
    readings: int
    confirms: bool  # read again at the end of the budget
    edge: bool  # halving the way to a constraint's edge (tune/monotone.edge_points)
    model: bool  # proposed by the models of rate and power (tune/model.py)
    batches: Optional[float]  # timed iterations of its window (None: a command's, unknown)
    settings: Optional[TrialSettings]
    metrics: Optional[TrialMetrics]
    valid: Optional[bool]
    feasible: bool
    reasons: List[str]
    constraint_violations: Optional[List[float]]
    result: Optional[str]  # the trial's result file


class ClosestDoc(TypedDict):
    """Where no trial met the constraints: the valid trial that missed them by least."""
    trial: TrialDoc
    missed: List[str]  # each constraint it broke, by how much ("images_per_s 64.1: 36% under
    # >=100")


class TuneDoc(TypedDict, total=False):
    """`jetbench tune`'s study (`jetbench.tune/1`, DIR/tune.json)."""
    schema: str
    simulated: bool
    study: str
    objectives: List[str]
    constraints: List[str]
    knobs: List[str]
    budget: int
    unit: str  # what a trial counts (work_units: images, or a --cmd's --unit)
    space: Dict[str, List[int]]
    trials: List[TrialDoc]
    best: Optional[TrialDoc]
    pareto: List[TrialDoc]
    why: Optional[str]  # why the best is the best: its margin, or the tie it won on power
    closest: Optional[ClosestDoc]  # only where no trial met the constraints
    created: str
