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

"The best" follows measure's uncertainty rule: points whose img/J intervals overlap
(report/digits.separated, the rule of every comparison printed) are a tie: less power wins.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ...errors import JetbenchError, SamplerDied, UsageError, first_line
from ...hw.fs import Root
from ...ownership.lease import LeaseRevoked
from ...ownership.lock import BoardBusy
from ...ownership.owner import borrow_board
from ...report import io, schema
from ...report.io import removed_if_left_empty
from ..request import build_request, split_list
from .choice import (
    Settings,
    _key,
    _params_of,
    _to_confirm,
    _usable,
    choose_best,
    metrics_of,
)
from .monotone import EDGES, edge_points, implied_miss, top_points
from .options import (
    COMMAND_MODEL,
    INFERRED_IN_A_ROW,
    OBJECTIVES,
    P99_BATCHES,
    STUDY_FILE,
    TuneReport,
    TuneRequest,
    check,
    load_optuna,
    options_for,
)
from .output import (
    _best_line,
    _best_news,
    _metrics_text,
    _settings_text,
    study_doc,
    thin_p99_note,
)
from .space import probe_emc_rates, search_space
from .storage import (
    _open_study,
    _recover,
    _worst,
    check_storage,
    check_study_kept,
    counts,
    drain_waiting,
    others_measuring,
    retry_callback,
    storage_errors,
    wait_for_others,
)
from .terms import TERMS_ATTR, check_same, fingerprint, terms_of
from .warm import read_study, warm_points

if TYPE_CHECKING:
    from optuna import Study
    from optuna.trial import FrozenTrial, Trial

    from ...documents import ResultDoc


def _suggest(trial: Trial, space: Dict[str, List[int]], models: List[str],
             precisions: List[str], batches: List[int]) -> Settings:
    settings: Settings = {
        "model": trial.suggest_categorical("model", models),
        "precision": trial.suggest_categorical("precision", precisions),
        "batch": trial.suggest_categorical("batch", batches)}
    for knob, values in space.items():
        # A clock is ordered, and img/J changes smoothly along it: searched as its index in
        # the table (TPE models neighbours), not as unrelated categories.
        settings[f"{knob}_hz"] = values[trial.suggest_int(f"{knob}_index", 0, len(values) - 1)]
    return settings


def _mhz(rates: Sequence[int]) -> str:
    return ", ".join(f"{hz / 1e6:g}" for hz in rates) + " MHz"


def tune(root: Root, req: TuneRequest,
         progress: Optional[Callable[[str], None]] = None) -> TuneReport:
    """Run trials until the study has `req.budget` of them; see the module docstring."""

    check(req)
    optuna = load_optuna()
    say = progress or (lambda line: None)
    models = [COMMAND_MODEL] if req.options.cmd else split_list(req.options.model)
    precisions = split_list(req.options.precision)
    probe = build_request(dataclasses.replace(req.options, out=None))  # every option rule
    batches = list(probe.batches)
    if probe.command is not None:
        req = dataclasses.replace(req, unit=probe.command.unit)
    earlier = read_study(req.warm_start) if req.warm_start is not None else None
    made = not req.out_dir.exists()
    with removed_if_left_empty(req.out_dir if made else None):
        io.check_out_dir(req.out_dir)  # before any work: a bad --out costs nothing
        storage = req.storage or f"sqlite:///{os.path.abspath(req.out_dir / STUDY_FILE)}"
        check_storage(storage)
        if req.storage is None:
            check_study_kept(req.out_dir, STUDY_FILE)
        with storage_errors(storage):
            return _tune(root, req, optuna, say, models, precisions, batches, storage,
                         probe.wait_s, earlier)


def _tune(root: Root, req: TuneRequest, optuna: ModuleType, say: Callable[[str], None],
          models: List[str], precisions: List[str], batches: List[int], storage: str,
          wait_s: Optional[float], earlier: Optional[Dict[str, object]]) -> TuneReport:
    from ...hw.nvpmodel import read_power_mode
    from ...open_board import open_board

    name = req.study or "jetbench-" + "-".join([*models, *precisions, *map(str, batches),
                                                *req.knobs])
    directions = [OBJECTIVES[o] for o in req.objectives]

    def constraints(trial: FrozenTrial) -> Sequence[float]:
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
    study = _open_study(optuna, name, storage, directions, sampler,
                        req.heartbeat_s if req.storage is not None else None)
    # The board is ours for the whole study (the lock, or one lease from the daemon): a second
    # tune or a measure is refused with who holds it, and no trial is lent away half-way.
    with borrow_board(root, "tune", wait_s) as guard:
        # Put back what a killed run left before reading the space: its pinned clocks are not
        # the power mode's caps.
        _recover(optuna, root, guard, study, req.board_name, say)
        with open_board(root, simulate_power=False) as board:
            tables = search_space(root, board, req.knobs, req.options.beyond_power_mode)
            simulated = board.simulated
            listed = bool(board.emc and board.emc.available_hz)
            model, l4t = board.model, board.l4t or ""
        mode = read_power_mode(root)
        asked = terms_of(model, req.objectives, req.constraints, req.knobs, models, precisions,
                         batches, tables, workload=req.options.cmd or "", l4t=l4t,
                         power_mode=mode.text if mode else "")
        stored = check_same(study, asked, shared=req.storage is not None,
                            mix_boards=req.mix_boards)
        if stored is not None and stored["space"]:
            space = {k: list(v) for k, v in stored["space"].items()}  # fixed at creation
            if req.reprobe and "emc" in space and not listed:
                # asked: are the rates the study was made with still the ones the EMC runs?
                found = probe_emc_rates(root, tables["emc"], req.options.beyond_power_mode)
                if found != space["emc"]:
                    raise UsageError(
                        "--reprobe: the EMC now runs " + _mhz(found) + "; the study's space "
                        "has " + _mhz(space["emc"]),
                        hint="a study's space is fixed when it is made: give another --out "
                             "(or --study NAME) for a study over the rates found now")
                say(f"tune: --reprobe: the EMC runs the study's {len(found)} rates")
        else:
            space = {k: list(v) for k, v in tables.items()}
            if "emc" in space and not listed:  # the kernel lists no rates: ask what it runs
                space["emc"] = probe_emc_rates(root, space["emc"],
                                               req.options.beyond_power_mode)
            study.set_user_attr(TERMS_ATTR, dict(asked, space=space))
        return _study(root, req, optuna, say, study, space, simulated, models, precisions,
                      batches, directions, modern, fingerprint(asked), earlier)


def _study(root: Root, req: TuneRequest, optuna: ModuleType, say: Callable[[str], None],
           study: Study,
           space: Dict[str, List[int]], simulated: bool, models: List[str],
           precisions: List[str], batches: List[int], directions: List[str],
           modern: bool, board_print: Dict[str, str],
           earlier: Optional[Dict[str, object]] = None) -> TuneReport:
    from ..measure import measure

    fatal: List[BaseException] = []
    timed: List[Optional[float]] = []  # each trial's timed iterations (thin_p99_note)
    study.set_user_attr("space", {k: v for k, v in space.items()})

    def same_board(trials: Sequence[FrozenTrial]) -> List[FrozenTrial]:  # (--mix-boards)
        return [t for t in trials if t.user_attrs.get("fingerprint", board_print) == board_print]

    shown = [""]  # the best point the progress last named: named again only when it changes

    limit = [req.budget]  # the trials the phase running now may bring the study to
    inferred_run = [0]  # trials in a row the sampler chose where a miss was already known
    exhausted: List[int] = []  # INFERRED_IN_A_ROW of them: what is left cannot meet them
    yielded: List[int] = []  # trials this board left to others' (the budget was theirs)

    def objective(trial: Trial) -> Union[float, Tuple[float, ...]]:
        # Several boards on one study: the trials already measuring on the others (started
        # before this one) fill the budget first, so the study stops at its budget, not past
        # it. A trial says it measures before it looks, so of two that look at once the later
        # one yields; one that yields never counts as measuring (it is no longer RUNNING).
        # A point queued again (a dead board's trial, failed by the heartbeat; an interrupted
        # one) keeps the place in the budget its trial had: while it waits or runs, no new
        # trial takes that place, and it runs against the whole budget, not a phase's limit.
        trial.set_user_attr("measuring", True)
        state = optuna.trial.TrialState
        retry = "retry_of" in trial.user_attrs
        earlier = [t for t in study.get_trials(deepcopy=False, states=(state.RUNNING,
                                                                       state.WAITING))
                   if t.number != trial.number and (
                       (t.state == state.RUNNING and t.number < trial.number
                        and t.user_attrs.get("measuring"))
                       or ("retry_of" in t.user_attrs and (not retry or t.number < trial.number)
                           and (t.state == state.RUNNING or not retry)))]
        if count() + len(earlier) >= (req.budget if retry else limit[0]):
            trial.set_user_attr("not_run", "the budget was taken by other boards' trials")
            yielded.append(trial.number)
            study.stop()
            raise optuna.TrialPruned()
        settings = _suggest(trial, space, models, precisions, batches)
        trial.set_user_attr("board", req.board_name)
        trial.set_user_attr("fingerprint", board_print)
        trial.set_user_attr("settings", settings)
        implied = implied_miss(same_board(study.get_trials(deepcopy=False,
                                                           states=(state.COMPLETE,))),
                               settings, list(space), req.constraints)
        if implied is not None:
            # known without measuring: closed as pruned, with the constraints the point it
            # follows from broke (the sampler learns it is infeasible); never counted
            source, missed = implied
            why = (f"not measured: trial #{source.number + 1} missed {missed}"
                   if missed.endswith(" at this very point") else
                   f"not measured: its clocks are no better than trial #{source.number + 1}'s,"
                   f" which missed {missed}")
            trial.set_user_attr("inferred", why)
            violations = list(source.user_attrs.get("constraints") or [1.0])
            trial.set_user_attr("constraints", violations)
            if modern:
                for k, v in enumerate(violations):
                    trial.set_constraint(f"c{k}", v)
            say(f"(#{trial.number + 1}) {_settings_text(settings)} -> {why}")
            inferred_run[0] += 1
            if inferred_run[0] >= INFERRED_IN_A_ROW:
                exhausted.append(trial.number)
                study.stop()
            raise optuna.TrialPruned()
        inferred_run[0] = 0
        out = req.out_dir / "trials" / f"{trial.number:04d}"
        options = options_for(req.options, settings, out, P99_BATCHES if req.p99_matters
                               and trial.user_attrs.get("confirms") else 0)  # a p99 read again
        try:
            report = measure(root, build_request(options), command="tune")
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM: not counted; its point measured again
            retry_callback(optuna)(study, study.get_trials(deepcopy=False)[trial.number])
            raise
        except Exception as err:
            # One line (Optuna's own log, with its traceback, is off); a trial that lost the
            # board (taken back, busy, its sampler gone) ends the study with its error.
            say(f"{ordinal(trial.number, count() + 1)}: {_settings_text(settings)} -> "
                f"failed: {err if isinstance(err, JetbenchError) else first_line(err)}")
            trial.set_user_attr("error", str(err)[:300])
            if isinstance(err, (BoardBusy, LeaseRevoked, SamplerDied)):
                fatal.append(err)
                study.stop()
            raise
        doc: ResultDoc = report.results[0] if report.results else {}
        metrics = metrics_of(doc)
        timed.append(schema.timed_iterations(doc))
        trial.set_user_attr("batches", timed[-1])
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
        values = [v for v in (metrics.get(o) for o in req.objectives)
                  if v is not None and not math.isnan(v)]
        if len(values) < len(req.objectives):
            return tuple(_worst(d) for d in directions) if len(values) > 1 else _worst(
                directions[0])
        return tuple(values) if len(values) > 1 else values[0]

    def progress(_: Study, trial: FrozenTrial) -> None:
        """A measured trial's line, once Optuna has stored it: the best point it names counts
        this trial too (from inside the objective it would be one trial late)."""
        metrics = trial.user_attrs.get("metrics")
        if metrics is None:  # a trial that failed said so itself
            return
        violations = trial.user_attrs.get("constraints") or []
        say(f"{ordinal(trial.number, count())}: "
            f"{_settings_text(trial.user_attrs['settings'])} -> {_metrics_text(metrics, req.unit)}"
            f"{'' if trial.user_attrs.get('valid') else ' (invalid)'}"
            f"{' (breaks a constraint)' if any(v > 0 for v in violations[:-1]) else ''}"
            + _best_news(_best_line(study, req, space, req.unit), shown, trial.number))

    def ordinal(number: int, counted: int) -> str:
        """`trial K/BUDGET`: the K-th trial to count against the budget (the study's, every
        board's), and Optuna's number (`#N`, as tune.json and the answer name it) where that
        differs (another board's trials, points not measured)."""
        return f"trial {counted}/{req.budget}" + (f" (#{number + 1})" if counted != number + 1
                                                  else "")

    def count() -> int:
        return len([t for t in study.get_trials(deepcopy=False) if counts(optuna, t)])

    def stop_at(n: int) -> Callable[[Study, FrozenTrial], None]:
        def callback(_: Study, _trial: FrozenTrial) -> None:
            if count() >= n:
                study.stop()
        return callback

    # The last trials of the budget measure the best points found once more: a search keeps
    # the luckiest of many noisy readings, and a second reading is what tells a real peak.
    confirm = req.confirm_trials
    search = req.budget - confirm
    if count() < req.budget:
        again_text = f", the last {confirm} measuring the best points again" if confirm else ""
        say(f"tune: {req.budget - count()} trial(s) to run here ({req.budget} in the study, "
            f"{count()} done{again_text}); space: "
            + ", ".join(f"{k} {len(v)}" for k, v in space.items()))
    def search_to(n: int) -> None:
        """Trials until `n` count (a point known to miss is not measured and does not count),
        this board yields its place to others', the space left is all known misses, or a
        trial loses the board."""
        yielded.clear()
        for _ in range(n + INFERRED_IN_A_ROW):
            if count() >= n or fatal or yielded or exhausted or still:
                return
            study.optimize(objective, n_trials=n - count(), catch=(Exception,),
                           callbacks=[progress, stop_at(n), patience])

    moved: List[Tuple[Optional[str], int]] = [(None, count())]  # the best's point, since when
    still: List[int] = []  # --patience: the count at which the best had stood still long enough

    def patience(_: Study, trial: FrozenTrial) -> None:
        """--patience N: the search stops once N trials in a row have not moved the best."""
        if not req.patience or len(directions) > 1 or not counts(optuna, trial):
            return
        best = choose_best(_usable(study.get_trials(deepcopy=False), space), req.objectives[0],
                           req.constraints)
        key = _key(best) if best else None
        if key != moved[0][0]:
            moved[0] = (key, count())
        elif key is not None and count() - moved[0][1] >= req.patience:
            still.append(count())
            study.stop()

    def to_edge(n: int, choices: Dict[str, Sequence[Union[str, int]]]) -> None:
        """Trials halving the way from the best point to a constraint's edge (this board's
        trials), until n count, none is left, or the search ended otherwise."""
        for _ in range(n):
            mine = same_board(_usable(study.get_trials(deepcopy=False), space))
            best = choose_best(mine, req.objectives[0], req.constraints)
            points = [] if best is None else [p for p in (_params_of(s, space, choices) for s in
                      edge_points(mine, best.user_attrs["settings"], space, req.constraints))
                      if p is not None][:n - count()]
            if not points or fatal or yielded or exhausted or still:
                return
            for params in points:
                study.enqueue_trial(params, user_attrs={"edge": True})
            limit[0] = n
            study.optimize(objective, n_trials=len(points), catch=(Exception,),
                           callbacks=[progress, stop_at(n)])

    choices: Dict[str, Sequence[Union[str, int]]] = {"model": models, "precision": precisions,
                                                     "batch": batches}
    if not study.get_trials(deepcopy=False):
        # a new study starts from an earlier one's best points (--warm-start), else at the top
        # of the space for each workload setting: the fastest each can be (a setting that
        # cannot meet a throughput constraint there cannot anywhere), where there are few
        # enough settings for the budget
        firsts = [] if earlier is None else warm_points(earlier, req.objectives[0], space,
                                                       choices, search)
        if earlier is not None:
            say(f"tune: starting from {len(firsts)} of the best points of {req.warm_start}"
                + ("" if firsts else " (none is a point of this study: from the top instead)"))
        tops = top_points(space, models, precisions, batches)
        if not firsts and len(tops) <= max(1, search // 3):
            firsts = tops
        for params in firsts:  # (boards starting a shared study together: queued once)
            study.enqueue_trial(params, user_attrs={"warm": str(req.warm_start)} if earlier
                                else {"top": True}, skip_if_exists=True)
    elif earlier is not None:
        say(f"tune: --warm-start starts a new study; this one has trials already: "
            f"{req.warm_start} is not used")
    # the search's last quarter seeks a throughput floor's edge (monotone.edge_points)
    edge = search // 4 if len(directions) == 1 and any(
        (c.name, c.op) in EDGES for c in req.constraints) else 0
    if count() < search - edge:
        limit[0] = search - edge
        search_to(search - edge)
    if edge and count() < search:
        to_edge(search, choices)
    if count() < search:
        limit[0] = search
        search_to(search)
    if fatal:
        raise fatal[0]
    if exhausted:
        say(f"tune: the sampler chose {INFERRED_IN_A_ROW} points in a row that the trials "
            "already measured show cannot meet the constraints: the search stops there")
    if still:
        say(f"tune: the best point has not changed in {req.patience} trials: the search stops "
            f"at {still[0]} of the budget's {req.budget} (--patience)")

    def read_again(room: int) -> None:
        """The best points read once, read again (at most `room`; none after a fatal)."""
        again = [] if fatal else _to_confirm(_usable(study.get_trials(deepcopy=False), space),
                                             req.objectives[0], room, req.constraints)
        # (a queued trial's point is its fixed params until it runs)
        queued = [t.system_attrs.get("fixed_params", t.params) for t in study.get_trials(
            deepcopy=False, states=(optuna.trial.TrialState.WAITING,))]
        # (a point another board of a shared study has queued already is not queued twice)
        again = [p for p in (_params_of(s, space, choices) for s in again)
                 if p is not None and p not in queued]
        for params in again:
            study.enqueue_trial(params, user_attrs={"confirms": True})
        limit[0] = req.budget
        if again:
            study.optimize(objective, n_trials=len(again), catch=(Exception,),
                           callbacks=[progress, stop_at(req.budget)])
    read_again(min(confirm, req.budget - count()) if still or exhausted
               else req.budget - count())
    if not fatal and not exhausted and not still and count() < req.budget:
        # fewer points to read again than the budget kept for them (every good point already
        # read twice, or another board's trials stopped this one's search early): the edge
        # first where its halving stopped short (its new best read again), then searched
        if edge and count() < req.budget - 1:
            to_edge(req.budget - 1, choices)
            read_again(req.budget - count())
        search_to(req.budget)
    if fatal:
        raise fatal[0]
    if req.storage is not None:
        def rerun() -> bool:
            """Points queued again (a dead board's trial, by the heartbeat), or budget left
            that another board's yield gave back: measured here."""
            room = req.budget - count()
            if room <= 0 or fatal:
                return False
            waiting = study.get_trials(deepcopy=False,
                                       states=(optuna.trial.TrialState.WAITING,))
            if still or exhausted:  # this board's search has ended: only points queued again
                waiting = [t for t in waiting if "retry_of" in t.user_attrs]
                if not waiting:
                    return False
            if not waiting and others_measuring(optuna, study):
                return False
            before = (count(), len(waiting))
            study.optimize(objective, n_trials=min(room, len(waiting) or room),
                           catch=(Exception,), callbacks=[progress, stop_at(req.budget)])
            after = (count(), len(study.get_trials(deepcopy=False,
                                                   states=(optuna.trial.TrialState.WAITING,))))
            # went on only while it gets somewhere: a trial counted or a queued point taken
            return after[0] > before[0] or after[1] < before[1]

        wait_for_others(optuna, study, say, rerun=rerun)
        if fatal:
            raise fatal[0]
    if count() >= req.budget:
        drain_waiting(optuna, study)
    if (thin := thin_p99_note(timed, req)):
        say(thin)
    doc = study_doc(study, req, space, simulated, req.unit)
    path = req.out_dir / "tune.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return TuneReport(doc, path)
