"""What `jetbench tune` is asked: objectives, constraints, knobs and budget, checked before
any work; Optuna, loaded where a study needs it."""

from __future__ import annotations

import dataclasses
import math
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Dict, Optional, Tuple, Union

from ...documents import TuneDoc
from ...errors import UsageError
from ...work_units import DEFAULT_UNIT
from ..request import MeasureOptions

# name -> Optuna's direction
OBJECTIVES = {"images_per_j": "maximize", "images_per_s": "maximize",
              "latency_p99_ms": "minimize", "power_w": "minimize"}


KNOBS = ("gpu", "emc", "cpu")


COMMAND_MODEL = "command"  # a --cmd study's model: the command is the workload


STUDY_FILE = "study.db"


CONFIRM = 3  # the best distinct points measured once more at the end of the budget


# a 99th percentile of fewer timed iterations is near their maximum: where a p99 latency is
# constrained or the objective, the points read again are read with at least this many
P99_BATCHES = 100


INFERRED_IN_A_ROW = 25  # sampled points known to miss in a row: the search stops there


HEARTBEAT_S = 10  # a shared study's running trials beat this often (Optuna's heartbeat)


_CONSTRAINT = re.compile(r"^\s*([a-z_0-9]+)\s*(>=|<=)\s*([-+0-9.eE]+)\s*$")


def parse_bound(text: str, names: Tuple[str, ...], example: str) -> Tuple[str, str, float]:
    """'NAME>=VALUE' or 'NAME<=VALUE', NAME one of `names`, VALUE a finite number -> (name,
    op, value); a UsageError naming what is wrong otherwise (tune's and `daemon --tune`'s
    --constraint)."""
    m = _CONSTRAINT.match(text)
    if not m or m.group(1) not in names:
        raise UsageError(f"--constraint {text!r}: expected NAME>=VALUE or NAME<=VALUE",
                         hint="NAME is one of " + ", ".join(names)
                         + f"; e.g. --constraint '{example}'")
    try:
        value = float(m.group(3))
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UsageError(f"--constraint {text!r}: {m.group(3)!r} is not a number")
    return m.group(1), m.group(2), value


@dataclass(frozen=True)
class Constraint:
    name: str
    op: str  # ">=" or "<="
    value: float

    @staticmethod
    def parse(text: str) -> Constraint:
        return Constraint(*parse_bound(text, tuple(OBJECTIVES), "images_per_s>=30"))

    def violation(self, metrics: Dict[str, Optional[float]]) -> float:
        """<= 0 when met with the figure's uncertainty (`NAME_uncertainty_pct`: the whole
        interval on the right side of the limit; a figure of unknown uncertainty by its value
        alone); how far off otherwise (1e9 when the metric is unknown)."""
        got = metrics.get(self.name)
        if got is None:
            return 1e9
        pct = metrics.get(f"{self.name}_uncertainty_pct")
        margin = abs(got) * pct / 100.0 if pct is not None and math.isfinite(pct) else 0.0
        return self.value - (got - margin) if self.op == ">=" else (got + margin) - self.value

    def __str__(self) -> str:
        return f"{self.name}{self.op}{self.value:g}"


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


def options_for(base: MeasureOptions, settings: Dict[str, Union[str, int]], out: Path,
                batches: int = 0) -> MeasureOptions:
    """The measure options of one trial: its point pinned; a p99 read again on `batches`."""
    return dataclasses.replace(
        base, model=base.model if base.cmd else str(settings["model"]),
        iterations=max(base.iterations, batches),
        precision=str(settings["precision"]), batch=str(settings["batch"]), out=out,
        freq=f"{settings['gpu_hz']}" if "gpu_hz" in settings else None,
        emc_freq=f"{settings['emc_hz']}" if "emc_hz" in settings else None,
        cpu_freq=f"{settings['cpu_hz']}" if "cpu_hz" in settings else None)
