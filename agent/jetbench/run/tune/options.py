"""What `jetbench tune` is asked: objectives, constraints, knobs and budget, checked before
any work; Optuna, loaded where a study needs it."""

from __future__ import annotations

import dataclasses
import socket
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Dict, Optional, Sequence, Tuple, Union

from ...errors import UsageError
from ...tune_documents import TuneDoc
from ...work_units import DEFAULT_UNIT
from ..constraint import Constraint, tune_names
from ..request import MeasureOptions, MeasureRequest

# name -> Optuna's direction
OBJECTIVES = {"images_per_j": "maximize", "images_per_s": "maximize",
              "latency_p99_ms": "minimize", "power_w": "minimize",
              # at the wall, from the board's calibration (docs/power.md, "Wall energy")
              "wall_images_per_j": "maximize"}


KNOBS = ("gpu", "emc", "cpu")


COMMAND_MODEL = "command"  # a --cmd study's model: the command is the workload


STUDY_FILE = "study.db"


CONFIRM = 3  # the best distinct points measured once more at the end of the budget


# a 99th percentile of fewer timed iterations is near their maximum: where a p99 latency is
# constrained or the objective, the points read again are read with at least this many
P99_BATCHES = 100


INFERRED_IN_A_ROW = 25  # sampled points known to miss in a row: the search stops there


HEARTBEAT_S = 10  # a shared study's running trials beat this often (Optuna's heartbeat)


def constraints_for(texts: Sequence[str], options: MeasureOptions) -> Tuple[Constraint, ...]:
    """--constraint's texts for this workload: the rate is items_per_s, also images_per_s or
    fps where a --cmd counts images or frames (a network counts images)."""
    unit = (options.unit or DEFAULT_UNIT).strip().lower() if options.cmd else DEFAULT_UNIT
    names = tune_names(unit)
    return tuple(Constraint.parse(text, names) for text in texts)


@dataclass(frozen=True)
class TuneRequest:
    options: MeasureOptions  # the workload and window; model/precision/batch may be lists
    out_dir: Path
    objectives: Tuple[str, ...] = ("images_per_j",)
    constraints: Tuple[Constraint, ...] = ()
    knobs: Tuple[str, ...] = ("gpu",)
    budget: int = 20  # trials in the whole study (every board's)
    storage: Optional[str] = None  # an Optuna storage URL; None: sqlite in out_dir
    study: Optional[str] = None  # the study's name; None: one derived from the workload
    seed: Optional[int] = None
    board_name: str = field(default_factory=socket.gethostname)
    unit: str = DEFAULT_UNIT  # what a trial counts: a --cmd's --unit (tune() sets it)
    heartbeat_s: Optional[int] = HEARTBEAT_S  # a shared study's trials beat this often
    mix_boards: bool = False  # boards of one model, other L4T or power mode, in one study
    warm_start: Optional[Path] = None  # an earlier study's tune.json: its best points first
    reprobe: bool = False  # probe the EMC's rates again on a resume, refuse where they moved
    patience: Optional[int] = None  # stop searching once this many trials left the best be
    # the options checked once (run/request.build_request), every trial a copy of it
    checked: Optional[MeasureRequest] = None

    @property
    def confirm_trials(self) -> int:
        """How many of the budget's trials read the best points again (one objective only)."""
        return min(CONFIRM, self.budget // 5) if len(self.objectives) == 1 else 0

    @property
    def p99_matters(self) -> bool:
        """Whether a p99 latency is constrained or an objective (and timed here: a command's
        own lines give its p99 from however many it ran)."""
        return not self.options.cmd and "latency_p99_ms" in (
            [c.name for c in self.constraints] + list(self.objectives))


@dataclass
class TuneReport:
    doc: TuneDoc
    path: Path
    plot: Optional[Path] = None
    profile: Optional[Path] = None


def check(req: TuneRequest) -> None:
    """Every rule before any work: a bad objective, knob or budget costs no run."""
    for name in req.objectives:
        if name not in OBJECTIVES:
            raise UsageError(f"--objective {name!r}: expected one of " + ", ".join(OBJECTIVES))
    if not req.objectives:
        raise UsageError("--objective needs at least one of " + ", ".join(OBJECTIVES))
    for knob in req.knobs:
        if knob not in KNOBS:
            raise UsageError(f"--knobs {knob!r}: expected a list of " + ", ".join(KNOBS))
    if req.budget < 1:
        raise UsageError("--budget must be at least 1 trial")
    if req.patience is not None and req.patience < 1:
        raise UsageError("--patience must be at least 1 trial")
    if req.heartbeat_s is not None and req.heartbeat_s < 0:
        raise UsageError("--heartbeat must be 0 (off) or a number of seconds")
    for name in ("freq", "cpu_freq", "emc_freq", "profile"):
        if getattr(req.options, name):
            raise UsageError(f"--{name.replace('_', '-')} does not go with tune: the clocks "
                             "are what it searches (--knobs)")
    if req.options.devices:
        raise UsageError("tune runs one device: not with --devices")


def load_optuna() -> ModuleType:
    try:
        import optuna
    except ImportError:
        raise UsageError("jetbench tune needs Optuna",
                         hint="pip install 'jetbench[tune]' (optuna)") from None
    import warnings

    # ERROR: a failed trial is our one line, not Optuna's warning with a traceback
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def request_for(checked: MeasureRequest, settings: Dict[str, Union[str, int]], out: Path,
                batches: int = 0) -> MeasureRequest:
    """One trial's request: a copy of the request checked once, its point pinned (the clocks
    as numbers, Hz: nothing parsed again); a p99 read again on `batches` iterations."""
    if checked.command is None:  # a command is its own workload: no model, precision, batch
        checked = dataclasses.replace(
            checked, models=(str(settings["model"]),), precisions=(str(settings["precision"]),),
            batches=(int(settings["batch"]),))
    return dataclasses.replace(
        checked, out_dir=out, iterations=max(checked.iterations, batches),
        gpu_freqs=(int(settings["gpu_hz"]),) if "gpu_hz" in settings else (None,),
        emc_freq=int(settings["emc_hz"]) if "emc_hz" in settings else None,
        cpu_freq=int(settings["cpu_hz"]) if "cpu_hz" in settings else None)
