"""`jetbench tune`: find the most efficient clocks (and batch, precision) for a workload, under
constraints, with Optuna; every trial a real `measure` point.

    report = tune(root, TuneRequest(MeasureOptions(model="sim:alexnet"), knobs=("gpu", "emc"),
                                    constraints=(Constraint.parse("images_per_s>=20"),),
                                    budget=30, out_dir=Path("tuned")))

The search space is the board's own tables (the GPU's devfreq table, the first CPU policy's
table, EMC rates where the kernel lists them, else EMC_FRACTIONS of its max), within the power
mode's caps unless --beyond-power-mode. Each trial pins its point, warms up, measures in a
window, validates and restores (run/measure.py); a trial whose result is invalid, or that
breaks a constraint, is recorded as such and never chosen (Optuna's constraints: a positive
violation is infeasible). The study lives in Optuna's storage (DIR/study.db, SQLite, unless
--storage names another database), so `tune` again with the same DIR continues it after Ctrl-C,
kill -9 or a reboot, and several boards can work on one study at once (--storage, --study);
each trial records the board that ran it.

"The best" follows measure's uncertainty rule: points whose img/J
intervals overlap (report/figures.separated, the rule of every comparison printed) are a
tie, and the one drawing less power wins.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import re
import socket
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from ..errors import HardwareError, JetbenchError, SamplerDied, UsageError, first_line
from ..hw.board import Board
from ..hw.fs import Root
from ..hw.mode_caps import read_mode_caps
from ..ownership import journal
from ..ownership.lease import Guard, LeaseRevoked
from ..ownership.lock import BoardBusy
from ..ownership.owner import borrow_board
from ..report import io
from ..report.figures import separated
from ..report.io import removed_if_left_empty
from ..units import format_hz
from .request import MeasureOptions, build_request, split_list

# name -> Optuna's direction
OBJECTIVES = {"images_per_j": "maximize", "images_per_s": "maximize",
              "latency_p99_ms": "minimize", "power_w": "minimize"}
KNOBS = ("gpu", "emc", "cpu")
# EMC candidates where the kernel lists no rates (tegra210/186/194/234 debugfs): these shares of
# the EMC's max, each pinned once before the search and replaced by the rate the clock framework
# actually ran it at (probe_emc_rates): the space holds only rates the EMC really runs.
EMC_FRACTIONS = (1.0, 0.75, 0.5, 0.375, 0.25)
STUDY_FILE = "study.db"
CONFIRM = 3  # the best distinct points measured once more at the end of the budget
_CONSTRAINT = re.compile(r"^\s*([a-z_0-9]+)\s*(>=|<=)\s*([-+0-9.eE]+)\s*$")


@dataclass(frozen=True)
class Constraint:
    name: str
    op: str  # ">=" or "<="
    value: float

    @staticmethod
    def parse(text: str) -> Constraint:
        m = _CONSTRAINT.match(text)
        if not m or m.group(1) not in OBJECTIVES:
            raise UsageError(f"--constraint {text!r}: expected NAME>=VALUE or NAME<=VALUE",
                             hint="NAME is one of " + ", ".join(OBJECTIVES)
                             + "; e.g. --constraint 'images_per_s>=30'")
        try:
            value = float(m.group(3))
        except ValueError:
            raise UsageError(f"--constraint {text!r}: {m.group(3)!r} is not a number") from None
        return Constraint(m.group(1), m.group(2), value)

    def violation(self, metrics: Dict[str, Optional[float]]) -> float:
        """<= 0 when met; how far off otherwise (1e9 when the metric is unknown)."""
        got = metrics.get(self.name)
        if got is None:
            return 1e9
        return self.value - got if self.op == ">=" else got - self.value

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


@dataclass
class TuneReport:
    doc: Dict[str, Any]
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
    for name in ("freq", "cpu_freq", "emc_freq", "profile"):
        if getattr(req.options, name):
            raise UsageError(f"--{name.replace('_', '-')} does not go with tune: the clocks "
                             "are what it searches (--knobs)")
    if req.options.devices:
        raise UsageError("tune runs one device: not with --devices")


def load_optuna() -> Any:
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


# -- the space ----------------------------------------------------------------------------------
def search_space(root: Root, board: Board, knobs: Sequence[str], beyond_power_mode: bool
                 ) -> Dict[str, List[int]]:
    """Candidate Hz per knob, from the board's own tables, within the power mode's caps."""
    caps = None if beyond_power_mode else read_mode_caps(root, board, {})
    space: Dict[str, List[int]] = {}
    for knob in knobs:
        if knob == "gpu":
            table = gpu_table_hz(board)
            if not table:
                raise UsageError("--knobs gpu: this board lists no GPU clock table",
                                 hint="a Jetson's GPU (devfreq) or an NVIDIA GPU whose NVML "
                                 "lists its supported clocks")
            cap = caps.gpu_max_hz if caps and caps.gpu_max_hz else None
            space["gpu"] = [hz for hz in table if cap is None or hz <= cap]
        elif knob == "emc":
            emc = board.emc
            if emc is None:
                raise UsageError("--knobs emc: this board has no EMC clock jetbench can set")
            rates = list(emc.available_hz) or sorted(
                {int(emc.max_hz * f) for f in EMC_FRACTIONS})
            space["emc"] = sorted(hz for hz in rates if hz <= emc.max_hz)
        else:
            policies = board.cpu.policies
            if not policies or not policies[0].available_hz:
                raise UsageError("--knobs cpu: this board lists no CPU frequency table")
            cap = caps.cpu_max_hz.get(policies[0].path) if caps else None
            space["cpu"] = [hz for hz in policies[0].available_hz if cap is None or hz <= cap]
    return space


def gpu_table_hz(board: Board) -> List[int]:
    """The GPU clocks a trial can pin: the Jetson GPU's devfreq table, else the first NVIDIA
    GPU's NVML graphics clocks (a discrete GPU: `--freq` locks them through NVML)."""
    if board.gpu is not None and board.gpu.available_hz:
        return list(board.gpu.available_hz)
    nvml = [g for g in board.nvml_gpus if g.can_lock_graphics]
    return sorted(nvml[0].graphics_hz) if nvml else []


def probe_emc_rates(root: Root, candidates: Sequence[int], beyond_power_mode: bool) -> List[int]:
    """The rates the EMC runs at when asked for each candidate: the clock framework rounds a
    rate that is not one of its table's (docs/hardware.md, EMC), and a trial must not claim a
    rate that did not run. Each is pinned under the board lock (or the daemon's lease), read
    back once settled, and everything is put back as measure does."""
    from ..hw.clocks.domains import read_clocks
    from ..hw.readings import settled
    from ..open_board import open_board
    from ..tuning.apply import apply_profile
    from ..tuning.profile import Profile
    from .pinning import put_back
    from .request import MeasureRequest

    rates: Set[int] = set()
    # (inside tune's own borrow, which this shares; "tune" is a lease name the daemon takes)
    with borrow_board(root, "tune", 0.0) as guard, open_board(root) as board:
        had_journal = bool(journal.load(root))
        steps: List[Any] = []
        try:
            for hz in candidates:
                profile = Profile(name="tune-emc-probe", source="jetbench tune", emc_freq=hz,
                                  sections=("emc",), beyond_power_mode=beyond_power_mode)
                with guard.writing():
                    steps += list(apply_profile(root, board, profile).steps)
                clocks = settled(lambda: read_clocks(root, board))  # noqa: B023 - read now
                rates.update(c.cur_hz for c in clocks if c.domain == "emc" and c.cur_hz)
        finally:
            with guard.writing():
                put_back(root, MeasureRequest(), had_journal, steps)
    return sorted(rates)


# -- one trial ------------------------------------------------------------------------------------
def metrics_of(doc: Dict[str, Any]) -> Dict[str, Optional[float]]:
    throughput = doc.get("throughput") or {}
    latency = throughput.get("latency_ms") or {}
    total = (doc.get("power") or {}).get("total") or {}
    eff = doc.get("efficiency") or {}
    return {"images_per_s": throughput.get("images_per_s"),
            "images_per_j": eff.get("images_per_j"),
            "latency_p99_ms": latency.get("p99"),
            "power_w": total.get("mean_w"),
            "images_per_j_uncertainty_pct": (eff.get("uncertainty") or {}).get(
                "images_per_j_pct")}


def _options_for(base: MeasureOptions, settings: Dict[str, Any], out: Path) -> MeasureOptions:
    return dataclasses.replace(
        base, model=base.model if base.cmd else settings["model"],
        precision=settings["precision"], batch=str(settings["batch"]), out=out,
        freq=f"{settings['gpu_hz']}" if "gpu_hz" in settings else None,
        emc_freq=f"{settings['emc_hz']}" if "emc_hz" in settings else None,
        cpu_freq=f"{settings['cpu_hz']}" if "cpu_hz" in settings else None)


def _suggest(trial: Any, space: Dict[str, List[int]], models: List[str],
             precisions: List[str], batches: List[int]) -> Dict[str, Any]:
    settings: Dict[str, Any] = {
        "model": trial.suggest_categorical("model", models),
        "precision": trial.suggest_categorical("precision", precisions),
        "batch": trial.suggest_categorical("batch", batches)}
    for knob, values in space.items():
        # A clock is ordered, and img/J changes smoothly along it: searched as its index in
        # the table (TPE models neighbours), not as unrelated categories.
        settings[f"{knob}_hz"] = values[trial.suggest_int(f"{knob}_index", 0, len(values) - 1)]
    return settings


# -- the study ------------------------------------------------------------------------------------
def tune(root: Root, req: TuneRequest,
         progress: Optional[Callable[[str], None]] = None) -> TuneReport:
    """Run trials until the study has `req.budget` of them; see the module docstring."""

    check(req)
    optuna = load_optuna()
    say = progress or (lambda line: None)
    models = ["command"] if req.options.cmd else split_list(req.options.model)
    precisions = split_list(req.options.precision)
    probe = build_request(dataclasses.replace(req.options, out=None))  # every option rule
    batches = list(probe.batches)
    made = not req.out_dir.exists()
    with removed_if_left_empty(req.out_dir if made else None):
        io.check_out_dir(req.out_dir)  # before any work: a bad --out costs nothing
        storage = req.storage or f"sqlite:///{os.path.abspath(req.out_dir / STUDY_FILE)}"
        check_storage(storage)
        with storage_errors(storage):
            return _tune(root, req, optuna, say, models, precisions, batches, storage,
                         probe.wait_s)


def _tune(root: Root, req: TuneRequest, optuna: Any, say: Callable[[str], None],
          models: List[str], precisions: List[str], batches: List[int], storage: str,
          wait_s: Optional[float]) -> TuneReport:
    from ..open_board import open_board

    name = req.study or "jetbench-" + "-".join([*models, *precisions, *map(str, batches),
                                                *req.knobs])
    directions = [OBJECTIVES[o] for o in req.objectives]

    def constraints(trial: Any) -> Sequence[float]:
        return trial.user_attrs.get("constraints", [1e9])

    # Optuna 5 takes constraints from the trial (Trial.set_constraint); older ones from the
    # sampler's constraints_func (deprecated in 5.0).
    modern = hasattr(optuna.trial.Trial, "set_constraint")
    given = {} if modern else {"constraints_func": constraints}
    # TPE's random start-up, scaled to the budget (its default, 10, is half of a 20-trial study)
    startup = min(10, max(3, req.budget // 5))
    sampler = (optuna.samplers.TPESampler(seed=req.seed, multivariate=True, group=True,
                                          n_startup_trials=startup, **given)
               if len(directions) == 1 else
               optuna.samplers.NSGAIISampler(seed=req.seed, **given))
    study = _open_study(optuna, name, storage, directions, sampler)
    # The board is ours for the whole study (the lock, or one lease from the daemon): a second
    # tune or a measure is refused with who holds it, and no trial is lent away half-way.
    with borrow_board(root, "tune", wait_s) as guard:
        # Put back what a killed run left before reading the space: its pinned clocks are not
        # the power mode's caps.
        _recover(optuna, root, guard, study, req.board_name, say)
        with open_board(root, simulate_power=False) as board:
            space = search_space(root, board, req.knobs, req.options.beyond_power_mode)
            simulated = board.simulated
            listed = bool(board.emc and board.emc.available_hz)
        if "emc" in space and not listed:  # the kernel lists no rates: ask it what it runs
            space["emc"] = probe_emc_rates(root, space["emc"], req.options.beyond_power_mode)
        return _study(root, req, optuna, say, study, space, simulated, models, precisions,
                      batches, directions, modern)


def _study(root: Root, req: TuneRequest, optuna: Any, say: Callable[[str], None], study: Any,
           space: Dict[str, List[int]], simulated: bool, models: List[str],
           precisions: List[str], batches: List[int], directions: List[str],
           modern: bool) -> TuneReport:
    from .measure import measure

    fatal: List[BaseException] = []
    study.set_user_attr("space", {k: v for k, v in space.items()})
    study.set_user_attr("objectives", list(req.objectives))
    study.set_user_attr("constraints", [str(c) for c in req.constraints])

    shown = [""]  # the best point the progress last named: named again only when it changes

    def objective(trial: Any) -> Any:
        settings = _suggest(trial, space, models, precisions, batches)
        trial.set_user_attr("board", req.board_name)
        trial.set_user_attr("settings", settings)
        out = req.out_dir / "trials" / f"{trial.number:04d}"
        options = _options_for(req.options, settings, out)
        try:
            report = measure(root, build_request(options), command="tune")
        except Exception as err:
            # One line (Optuna's own log, with its traceback, is off); a trial that lost the
            # board (taken back, busy, its sampler gone) ends the study with its error.
            say(f"trial {trial.number + 1}/{req.budget}: {_settings_text(settings)} -> "
                f"failed: {err if isinstance(err, JetbenchError) else first_line(err)}")
            trial.set_user_attr("error", str(err)[:300])
            if isinstance(err, (BoardBusy, LeaseRevoked, SamplerDied)):
                fatal.append(err)
                study.stop()
            raise
        doc = report.results[0] if report.results else {}
        metrics = metrics_of(doc)
        valid = doc.get("status") == "ok" and (doc.get("validity") or {}).get("valid", False)
        violations = [c.violation(metrics) for c in req.constraints]
        # an invalid result is infeasible whatever it measured (its clocks were not the ones
        # claimed, or its power window was refused)
        violations.append(0.0 if valid else 1.0)
        trial.set_user_attr("metrics", metrics)
        trial.set_user_attr("valid", valid)
        trial.set_user_attr("status", doc.get("status"))
        trial.set_user_attr("reasons", list((doc.get("validity") or {}).get("reasons", [])))
        trial.set_user_attr("result", str(report.paths[0]) if report.paths else None)
        trial.set_user_attr("constraints", violations)
        if modern:
            for k, v in enumerate(violations):
                trial.set_constraint(f"c{k}", v)
        values = [metrics.get(o) for o in req.objectives]
        best = _best_line(study, req, space)
        say(f"trial {trial.number + 1}/{req.budget}: {_settings_text(settings)} -> "
            f"{_metrics_text(metrics)}{'' if valid else ' (invalid)'}"
            f"{' (breaks a constraint)' if any(v > 0 for v in violations[:-1]) else ''}"
            + _best_news(best, shown))
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
            return tuple(_worst(d) for d in directions) if len(values) > 1 else _worst(
                directions[0])
        return tuple(values) if len(values) > 1 else values[0]

    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL,
              optuna.trial.TrialState.PRUNED)
    def count() -> int:
        return len(study.get_trials(deepcopy=False, states=states))

    # The last trials of the budget measure the best points found once more: a search keeps
    # the luckiest of many noisy readings, and a second reading is what tells a real peak.
    confirm = min(CONFIRM, req.budget // 5) if len(directions) == 1 else 0
    search = req.budget - confirm
    if count() < req.budget:
        say(f"tune: {req.budget - count()} trial(s) to run here ({req.budget} in the study, "
            f"{count()} done, the last {confirm} measuring the best points again); space: "
            + ", ".join(f"{k} {len(v)}" for k, v in space.items()))
    if count() < search:
        study.optimize(objective, n_trials=search - count(), catch=(Exception,),
                       callbacks=[optuna.study.MaxTrialsCallback(search, states=states)])
    if fatal:
        raise fatal[0]
    again = _to_confirm(_usable(study.get_trials(deepcopy=False), space), req.objectives[0],
                        req.budget - count())
    choices: Dict[str, List[Any]] = {"model": models, "precision": precisions,
                                     "batch": batches}
    again = [p for p in (_params_of(s, space, choices) for s in again) if p is not None]
    for params in again:
        study.enqueue_trial(params, user_attrs={"confirms": True})
    if again:
        study.optimize(objective, n_trials=len(again), catch=(Exception,),
                       callbacks=[optuna.study.MaxTrialsCallback(req.budget, states=states)])
    if fatal:
        raise fatal[0]
    doc = study_doc(study, req, space, simulated)
    path = req.out_dir / "tune.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return TuneReport(doc, path)


def _shown(storage: str) -> str:
    """A storage URL as it may be printed: its password hidden."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(storage).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy parses: shown as given, cut
        return repr(storage[:120])


def check_storage(storage: str) -> None:
    """Before Optuna opens it: an SQLite study file must be a regular file of this user's (or
    missing). A link could carry the study elsewhere, a FIFO blocks SQLite for ever, and a
    file someone else owns is a study they can write into this board's profile."""
    if not storage.startswith("sqlite:///"):
        return
    path = storage[len("sqlite:///"):].split("?", 1)[0]
    if path.startswith("file:"):
        path = path[len("file:"):]
    if not path or path == ":memory:":
        return
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as err:
        raise HardwareError(f"cannot use the study file ({err.strerror})", path=path) from err
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        raise HardwareError("the study file is a symbolic link, a FIFO or not a regular file: "
                            "refused", path=path,
                            hint="give tune another --out, or remove it (a study is a plain "
                                 "SQLite file)")
    if st.st_uid != os.geteuid():
        raise HardwareError(f"the study file is owned by uid {st.st_uid}, not by you "
                            f"(uid {os.geteuid()}): refused", path=path,
                            hint="a study someone else can write can add to this board's "
                                 "profile: copy it, or give tune another --out")


@contextmanager
def storage_errors(storage: str) -> Iterator[None]:
    """The storage's failures as one message: a URL no database driver takes (exit 1), a
    study file that is not a database, read-only, on a full disk, unreachable (exit 2)."""
    try:
        yield
    except JetbenchError:
        raise
    except Exception as err:
        kind = type(err)
        module = kind.__module__ or ""
        if not module.startswith(("sqlalchemy", "sqlite3", "optuna", "psycopg2", "pymysql")) \
                and not isinstance(err, ImportError):
            raise
        if kind.__name__ in ("ArgumentError", "NoSuchModuleError") or isinstance(err,
                                                                              ImportError):
            raise UsageError(f"--storage {_shown(storage)}: not a database URL jetbench can "
                             f"open ({first_line(err)})",
                             hint="sqlite:///PATH, postgresql://..., mysql://... (with its "
                                  "driver installed)") from None
        raise HardwareError(f"the study's storage {_shown(storage)} failed: "
                            f"{first_line(err)}",
                            hint="a study file that is not an SQLite database, read-only, on a "
                                 "full disk, or a server that is down: fix it or give tune "
                                 "another --out / --storage") from None


def _open_study(optuna: Any, name: str, storage: str, directions: List[str],
                sampler: Any) -> Any:
    """The study, created or joined. Boards starting together on a new database race to create
    Optuna's tables ("table alembic_version already exists", a duplicated study): the one that
    loses tries again and joins what the other made."""
    for attempt in range(20):
        try:
            return optuna.create_study(study_name=name, storage=storage, directions=directions,
                                       sampler=sampler, load_if_exists=True)
        except Exception as err:  # noqa: BLE001 - SQLAlchemy's and Optuna's, whichever won
            text = str(err)
            racing = any(w in text for w in ("already exists", "locked", "no such table")) \
                or type(err).__name__ in ("IntegrityError", "DuplicatedStudyError")
            if attempt == 19 or not racing:
                raise
            time.sleep(0.1 + 0.05 * attempt)
    raise AssertionError("unreachable")


def _worst(direction: str) -> float:
    return -1e30 if direction == "maximize" else 1e30


def _recover(optuna: Any, root: Root, guard: Guard, study: Any, board: str,
             say: Callable[[str], None]) -> None:
    """Under the board we now hold: a journal a killed run left (in a trial, in the EMC probe,
    in a put-back) is restored first, so the board is its original before the space is read;
    trials this board left RUNNING (a kill -9, a reboot) are failed. (Under the daemon's lease
    the daemon restored what a killed borrower left when its lease closed.)"""
    restored = False
    if guard.token is None and journal.load(root):
        journal.restore(root)
        restored = True
    running = optuna.trial.TrialState.RUNNING
    stale = [t for t in study.get_trials(deepcopy=False, states=(running,))
             if t.user_attrs.get("board") == board]
    for t in stale:
        study.tell(t.number, state=optuna.trial.TrialState.FAIL)
    if stale:
        say(f"tune: {len(stale)} trial(s) of an earlier run on this board had not finished "
            "(interrupted): marked failed")
    if restored:
        say("tune: an interrupted run had left the board pinned: restored from the journal")


# -- the answer -----------------------------------------------------------------------------------
def feasible(trial: Any) -> bool:
    violations = trial.user_attrs.get("constraints", [1.0])
    return (trial.state.name == "COMPLETE" and trial.user_attrs.get("valid") is True
            and isinstance(violations, list) and all(
                type(v) in (int, float) and v <= 0 for v in violations))


def _key(t: Any) -> str:
    settings = t.user_attrs.get("settings")
    return json.dumps(settings, sort_keys=True) if settings else f"#{t.number}"


def _pooled(trials: Sequence[Any]) -> Dict[str, Any]:
    """Trials of the same settings as one point: its readings' mean metrics (a point with a
    reading that is invalid or breaks a constraint is not feasible)."""
    groups: Dict[str, List[Any]] = {}
    for t in trials:
        if t.state.name == "COMPLETE":
            groups.setdefault(_key(t), []).append(t)
    pooled = {}
    for key, group in groups.items():
        metrics: Dict[str, Any] = {}
        for name in group[0].user_attrs.get("metrics", {}):
            values = [t.user_attrs["metrics"].get(name) for t in group]
            metrics[name] = None if None in values else sum(values) / len(values)
        pooled[key] = {"trials": group, "metrics": metrics,
                       "feasible": all(feasible(t) for t in group)}
    return pooled


def _to_confirm(trials: Sequence[Any], objective: str, room: int) -> List[Dict[str, Any]]:
    """The settings of the best feasible points read only once, best first, at most `room`
    (trials whose settings are checked: `_usable`)."""
    if room <= 0 or objective not in OBJECTIVES:
        return []
    sign = 1 if OBJECTIVES[objective] == "maximize" else -1
    once = [p for p in _pooled(trials).values() if p["feasible"] and len(p["trials"]) == 1
            and p["metrics"].get(objective) is not None]
    once.sort(key=lambda p: -sign * p["metrics"][objective])
    return [dict(p["trials"][0].user_attrs["settings"]) for p in once[:room]]


def _params_of(settings: Dict[str, Any], space: Dict[str, List[int]],
               choices: Dict[str, List[Any]]) -> Optional[Dict[str, Any]]:
    """Optuna's params for a point, rebuilt from its checked settings (never the stored
    params, which a shared study's editor could point past a table); None when the point is
    not one of this run's choices (another workload's trial)."""
    params: Dict[str, Any] = {}
    for key, options in choices.items():
        if settings.get(key) not in options:
            return None
        params[key] = settings[key]
    for knob, values in space.items():
        params[f"{knob}_index"] = values.index(settings[f"{knob}_hz"])
    return params


def choose_best(trials: Sequence[Any], objective: str) -> Optional[Any]:
    """The best feasible point on `objective` (a trial standing for it; points measured more
    than once count by their mean); for images_per_j, points whose img/J differ by less than
    their combined uncertainty are a tie and the one drawing less power wins."""
    points = {k: p for k, p in _pooled(trials).items()
              if p["feasible"] and p["metrics"].get(objective) is not None}
    ok = []
    for p in points.values():
        stand_in = copy.copy(p["trials"][-1])
        stand_in.user_attrs = {**stand_in.user_attrs, "metrics": p["metrics"],
                               "readings": len(p["trials"])}
        ok.append(stand_in)
    if not ok:
        return None
    sign = 1 if OBJECTIVES[objective] == "maximize" else -1
    top = max(ok, key=lambda t: sign * t.user_attrs["metrics"][objective])
    if objective != "images_per_j":
        return top
    ties = [t for t in ok if _tied(t, top)]
    return min(ties, key=lambda t: t.user_attrs["metrics"].get("power_w") or math.inf)


def _tied(a: Any, b: Any) -> bool:
    ma, mb = a.user_attrs["metrics"], b.user_attrs["metrics"]
    ua, ub = ma.get("images_per_j_uncertainty_pct"), mb.get("images_per_j_uncertainty_pct")
    if a is b:
        return True
    if ua is None or ub is None:
        return False  # unknown uncertainty: no tie can be claimed
    return not separated(ma["images_per_j"], ua, mb["images_per_j"], ub)


def _usable(trials: Sequence[Any], space: Dict[str, List[int]]) -> List[Any]:
    return [t for t in trials if trial_problem(t, space) is None]


def study_doc(study: Any, req: TuneRequest, space: Dict[str, List[int]],
              simulated: bool) -> Dict[str, Any]:
    trials = study.get_trials(deepcopy=False)
    problems = {t.number: trial_problem(t, space) for t in trials}
    best = choose_best(_usable(trials, space), req.objectives[0])
    front = [t for t in (study.best_trials if len(req.objectives) > 1 else [best] if best else [])
             if feasible(t) and problems.get(t.number) is None]

    def trial_doc(t: Any) -> Dict[str, Any]:
        problem = problems.get(t.number)
        reasons = t.user_attrs.get("reasons", [])
        metrics = t.user_attrs.get("metrics")
        return {"number": t.number, "state": t.state.name, "board": t.user_attrs.get("board"),
                "readings": t.user_attrs.get("readings", 1),
                "confirms": bool(t.user_attrs.get("confirms")),
                "settings": t.user_attrs.get("settings"),
                "metrics": None if metrics_problem(metrics) else metrics,
                "valid": t.user_attrs.get("valid"),
                "feasible": feasible(t) and problem is None,
                "reasons": (list(reasons) if isinstance(reasons, list) else [])
                + ([f"not a point of this board: {problem}"] if problem else []),
                "constraint_violations": t.user_attrs.get("constraints"),
                "result": t.user_attrs.get("result")}

    return {"schema": "jetbench.tune/1", "simulated": simulated, "study": study.study_name,
            "objectives": list(req.objectives), "constraints": [str(c) for c in req.constraints],
            "knobs": list(req.knobs), "budget": req.budget,
            "space": {k: list(v) for k, v in space.items()},
            "trials": [trial_doc(t) for t in trials],
            "best": trial_doc(best) if best else None,
            "pareto": [trial_doc(t) for t in front],
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _best_line(study: Any, req: TuneRequest, space: Dict[str, List[int]]) -> str:
    best = choose_best(_usable(study.get_trials(deepcopy=False), space), req.objectives[0])
    if best is None:
        return ""
    attrs = best.user_attrs
    return f"{_metrics_text(attrs['metrics'])} at {_settings_text(attrs['settings'])}"


def _best_news(best: str, shown: List[str]) -> str:
    """What a progress line says of the best point of the trials finished before it: nothing
    while it is the one already named (a line per trial repeating it ran to 206 characters),
    else '; best so far now ...'."""
    if not best or best == shown[0]:
        return ""
    shown[0] = best
    return f"; best so far now {best}"


def _settings_text(s: Dict[str, Any]) -> str:
    clocks = " ".join(f"{k[:-3]} {format_hz(v)}" for k, v in s.items() if k.endswith("_hz"))
    return f"{s['model']} {s['precision']} b{s['batch']}" + (f" {clocks}" if clocks else "")


def _metrics_text(m: Dict[str, Any]) -> str:
    def g(name: str, unit: str) -> str:
        v = m.get(name)
        return f"{v:.3g} {unit}" if v is not None else f"? {unit}"

    return ", ".join((g("images_per_s", "img/s"), g("power_w", "W"), g("images_per_j", "img/J")))


# -- the profile ----------------------------------------------------------------------------------
def settings_problem(settings: Any, space: Dict[str, List[int]]) -> Optional[str]:
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


def metrics_problem(metrics: Any) -> Optional[str]:
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


def trial_problem(trial: Any, space: Dict[str, List[int]]) -> Optional[str]:
    """A finished trial that this board cannot take as a point: hostile or foreign settings
    or metrics in a shared study. Such a trial is never chosen nor written to a profile."""
    if trial.state.name != "COMPLETE":
        return None
    return (settings_problem(trial.user_attrs.get("settings"), space)
            or metrics_problem(trial.user_attrs.get("metrics")))


def profile_text(doc: Dict[str, Any], board: Board, name: str) -> str:
    """The best point as a profile `apply` and the daemon take, saying what chose it. Its
    settings are checked against this board's space again and written by a TOML writer."""
    from ..tuning.profile import profile_toml

    best = doc["best"]
    s = best["settings"]
    problem = settings_problem(s, doc["space"]) or metrics_problem(best.get("metrics"))
    if problem:
        raise UsageError(f"the best trial's point cannot be a profile: {problem}",
                         hint="the study was edited, or holds another board's trials: "
                              "no profile written")
    table: Dict[str, Any] = {
        "description": f"tuned by jetbench tune for {s['model']} {s['precision']} "
                       f"batch {s['batch']}",
        "match": {"family": [board.family]}}
    if "cpu_hz" in s:
        table["cpu"] = {"freq": str(s["cpu_hz"]), "online": True}
    if "gpu_hz" in s:
        table["gpu"] = {"freq": str(s["gpu_hz"]), "railgate": False}
    if "emc_hz" in s:
        table["emc"] = {"freq": str(s["emc_hz"])}
    return profile_toml(table, [
        f"Written by `jetbench tune` on {doc['created']}: the best point of study "
        f"{doc['study']!r}",
        f"workload: {s['model']} {s['precision']} batch {s['batch']}; objective: "
        f"{', '.join(doc['objectives'])}; constraints: {', '.join(doc['constraints']) or 'none'}",
        f"measured: {_metrics_text(best['metrics'])}"
        + (" (SIMULATED board)" if doc["simulated"] else "")])


def save_profile(root: Root, board: Board, doc: Dict[str, Any], name: str) -> Path:
    from ..ownership.wire import PROFILE_NAME
    from ..tuning.profile import write_profile_file

    if not PROFILE_NAME.match(name):
        raise UsageError(f"--save-profile {name!r}: letters, digits, '.', '_' and '-' only")
    if doc.get("best") is None:
        raise UsageError("no trial met the constraints with a valid result: no profile written",
                         hint="relax a --constraint, or raise --budget")
    return write_profile_file(root.base, name, profile_text(doc, board, name))


def pareto_plot(doc: Dict[str, Any], path: Path) -> Optional[Path]:
    """img/s against img/J of every trial: feasible ones filled, the front joined, the best
    marked, the constraints on these two axes drawn; the caveat when simulated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [t for t in doc["trials"] if t.get("metrics")
              and t["metrics"].get("images_per_s") and t["metrics"].get("images_per_j")]
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.8))
    styles: Tuple[Tuple[bool, Dict[str, Any]], ...] = (
        (False, dict(facecolors="none", edgecolors="0.6", label="infeasible or invalid")),
        (True, dict(color="tab:blue", label="feasible")))
    for ok, style in styles:
        xs = [t["metrics"]["images_per_j"] for t in points if t["feasible"] is ok]
        ys = [t["metrics"]["images_per_s"] for t in points if t["feasible"] is ok]
        if xs:
            ax.scatter(xs, ys, s=28, **style)
    front = sorted(doc["pareto"], key=lambda t: t["metrics"]["images_per_j"])
    if len(front) > 1:
        ax.plot([t["metrics"]["images_per_j"] for t in front],
                [t["metrics"]["images_per_s"] for t in front], color="tab:orange", lw=1,
                label="Pareto front")
    for c in doc["constraints"]:
        m = _CONSTRAINT.match(c)
        if m and m.group(1) == "images_per_s":
            ax.axhline(float(m.group(3)), color="tab:red", ls="--", lw=1, label=c)
        elif m and m.group(1) == "images_per_j":
            ax.axvline(float(m.group(3)), color="tab:red", ls="--", lw=1, label=c)
    best = doc.get("best")
    if best:
        ax.scatter([best["metrics"]["images_per_j"]], [best["metrics"]["images_per_s"]],
                   marker="*", s=220, color="tab:green", zorder=5, label="best")
    s = (best or points[0])["settings"]
    title = f"jetbench tune: {s['model']} {s['precision']} ({len(points)} trials)"
    ax.set_title(title + (" [SIMULATED]" if doc["simulated"] else ""))
    ax.set_xlabel("img/J (images per joule)")
    ax.set_ylabel("img/s")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    if doc["simulated"]:
        fig.text(0.01, 0.01, "simulated board: figures from jetbench's models, not hardware",
                 fontsize=7, color="0.4")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
