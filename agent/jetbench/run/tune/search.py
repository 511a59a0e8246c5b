"""`Study`: one board's run of a study, from its first trial to tune.json.

The budget. A space no larger than the budget is measured whole, a trial a point (the top
first, so a point below a throughput floor's miss is known to miss in its turn), and what is
left of the budget reads the leaders again, round by round. A larger space is searched from
the top of the space (or an earlier study's best points): under throughput floors alone, at the
points models of rate and power fitted from the points read propose (model.next_point); else
by the sampler, its last quarter seeking a throughput floor's edge (monotone.edge_points); and
the last trials read the best points again (choice._to_confirm). A trial that measures a point
measured before says why in its line.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ...errors import JetbenchError, SamplerDied, first_line
from ...hw.fs import Root
from ...ownership.lease import LeaseRevoked
from ...ownership.lock import BoardBusy
from ...report.io import atomic_write_text
from .choice import _key, _params_of, _to_confirm, _usable, choose_best, leaders_again
from .model import NEAR_LAST, next_point
from .monotone import EDGES, edge_points, every_point, implied_miss, top_points
from .options import CONFIRM, INFERRED_IN_A_ROW, P99_BATCHES, TuneReport, TuneRequest, request_for
from .output import _settings_text, study_doc, thin_p99_note
from .preflight import check_some_ran
from .progress import Progress, again_reason, earlier_readings
from .storage import (
    counts,
    drain_waiting,
    others_measuring,
    retry_callback,
    told_elsewhere,
    wait_for_others,
)
from .trial import (
    Choices,
    budget_taken,
    known_miss,
    objective_values,
    record,
    suggest,
)
from .warm import warm_points

if TYPE_CHECKING:
    from optuna import Study as OptunaStudy
    from optuna.trial import FrozenTrial, Trial

    from ..measure import MeasureReport

Callback = Callable[["OptunaStudy", "FrozenTrial"], None]


class Study:
    """The trials this board runs in a study until its budget, and the answer (`run`)."""

    def __init__(self, root: Root, req: TuneRequest, optuna: ModuleType,
                 say: Callable[[str], None], study: OptunaStudy, space: Dict[str, List[int]],
                 simulated: bool, models: List[str], precisions: List[str], batches: List[int],
                 directions: List[str], modern: bool,
                 board_print: Dict[str, str], earlier: Optional[Dict[str, object]] = None):
        self.root, self.req, self.optuna, self.say = root, req, optuna, say
        self.study, self.space, self.simulated = study, space, simulated
        self.models, self.precisions, self.batches = models, precisions, batches
        self.choices: Choices = {"model": models, "precision": precisions, "batch": batches}
        self.directions, self.modern = directions, modern
        self.board_print, self.earlier = board_print, earlier
        self.progress = Progress(say, req, space)
        self.fatal: Optional[BaseException] = None  # a trial lost the board: the study ends
        self.timed: List[Optional[float]] = []  # each trial's timed iterations (thin_p99_note)
        self.limit = req.budget  # the trials the phase running now may bring the study to
        self.inferred_run = 0  # trials in a row the sampler chose where a miss was known
        self.exhausted = False  # INFERRED_IN_A_ROW of them: what is left cannot meet them
        self.yielded = False  # a trial left to others' (the budget was theirs)
        self.still: Optional[int] = None  # --patience: the count where the best stood still
        self.moved: Tuple[Optional[str], int] = (None, 0)  # the best's point, since when

    # -- what the study holds ----------------------------------------------------------------
    def count(self) -> int:
        """Trials that count against the budget (every board's)."""
        return len([t for t in self.study.get_trials(deepcopy=False)
                    if counts(self.optuna, t)])

    @property
    def size(self) -> int:
        """The space's points (clocks x models x precisions x batches)."""
        n = 1
        for values in [*self.space.values(), *self.choices.values()]:
            n *= len(values)
        return n

    def same_board(self, trials: Sequence[FrozenTrial]) -> List[FrozenTrial]:
        """Trials of this board's fingerprint (--mix-boards: another's miss says nothing)."""
        return [t for t in trials
                if t.user_attrs.get("fingerprint", self.board_print) == self.board_print]

    def usable(self) -> List[FrozenTrial]:
        return _usable(self.study.get_trials(deepcopy=False), self.space)

    @property
    def ended(self) -> bool:
        """This board's search is over: the board lost, yielded, exhausted or --patience."""
        return bool(self.fatal or self.yielded or self.exhausted or self.still is not None)

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> TuneReport:
        self.study.set_user_attr("space", {k: v for k, v in self.space.items()})
        self.moved = (None, self.count())
        covers = self.size <= self.req.budget
        self._announce(covers)
        self._start_points()
        if covers:
            self._cover()
        else:
            self._search()
        self._raise_fatal()
        if self.req.storage is not None:
            wait_for_others(self.optuna, self.study, self.say, rerun=self._rerun)
            self._raise_fatal()
        return self._finish()

    def _announce(self, covers: bool) -> None:
        count, budget, confirm = self.count(), self.req.budget, self.req.confirm_trials
        if count >= budget:
            return
        plan = (f", every one of the space's {self.size} points once, the rest reading the "
                "best again" if covers else
                f", the last {confirm} measuring the best points again" if confirm else "")
        self.say(f"tune: {budget - count} trial(s) to run here ({budget} in the study, "
                 f"{count} done{plan}); space: "
                 + ", ".join(f"{k} {len(v)}" for k, v in self.space.items()))

    def _start_points(self) -> None:
        """A new study starts from an earlier one's best points (--warm-start), else at the
        top of the space for each workload setting: the fastest each can be (a setting that
        cannot meet a throughput constraint there cannot anywhere), where there are few
        enough settings for the budget."""
        req, earlier = self.req, self.earlier
        if self.study.get_trials(deepcopy=False):
            if earlier is not None:
                self.say(f"tune: --warm-start starts a new study; this one has trials already: "
                         f"{req.warm_start} is not used")
            return
        search = req.budget - req.confirm_trials
        firsts = [] if earlier is None else warm_points(earlier, req.objectives[0], self.space,
                                                       self.choices, search)
        if earlier is not None:
            self.say(f"tune: starting from {len(firsts)} of the best points of "
                     f"{req.warm_start}" + ("" if firsts else
                                            " (none is a point of this study: from the top "
                                            "instead)"))
        tops = top_points(self.space, self.models, self.precisions, self.batches)
        if not firsts and len(tops) <= max(1, search // 3):
            firsts = tops
        for params in firsts:  # (boards starting a shared study together: queued once)
            self.study.enqueue_trial(params, user_attrs={"warm": str(req.warm_start)}
                                     if earlier else {"top": True}, skip_if_exists=True)

    def _cover(self) -> None:
        """A space no larger than the budget: each point measured once (those not measured
        yet, the top first), then the leaders read again with what is left."""
        for params in every_point(self.space, self.models, self.precisions, self.batches):
            # (a point with a trial already, measured or queued, is skipped)
            self.study.enqueue_trial(params, user_attrs={"cover": True}, skip_if_exists=True)
        waiting = self.study.get_trials(deepcopy=False,
                                        states=(self.optuna.trial.TrialState.WAITING,))
        self.limit = self.req.budget
        if waiting:
            self._optimize(len(waiting), self.req.budget)
        if len(self.directions) > 1:  # a Pareto front has no leaders to read again
            self._say_unspent("a Pareto front's points are read once")
            return
        self._read_leaders()
        self._say_why_stopped()
        self._say_unspent("none meets the constraints to be read again")

    def _read_leaders(self) -> None:
        """Rounds of reading the leaders again (choice.leaders_again) until the budget is
        spent, none is left to read, --patience or a trial lost the board."""
        best = choose_best(self.usable(), self.req.objectives[0], self.req.constraints)
        self.moved = (_key(best) if best else None, self.count())  # (--patience from here)
        while not self.fatal and self.still is None and self.count() < self.req.budget:
            before = self.count()
            again = leaders_again(self.same_board(self.usable()), self.req.objectives[0],
                                  self.req.budget - before, CONFIRM, self.req.constraints)
            if not self._enqueue_again(again, self._patience) or self.count() == before:
                return

    def _say_unspent(self, why: str) -> None:
        """Where the whole space is measured and the budget is not spent: why."""
        if not self.fatal and self.still is None and self.count() < self.req.budget \
                and self.req.storage is None:
            self.say(f"tune: every point of the space is measured (or known to miss) and "
                     f"{why}: {self.req.budget - self.count()} trial(s) of the budget left "
                     "unspent")

    def _search(self) -> None:
        """The search (under throughput floors alone, the models' proposals, `_model_search`;
        else the sampler's, the edge of a throughput floor in its last quarter), then the best
        points read again; budget they did not need goes to the edge first, then to the
        search."""
        req = self.req
        search = req.budget - req.confirm_trials
        modelled = self._modelled()
        edge = search // 4 if not modelled and len(self.directions) == 1 and any(
            (c.name, c.op) in EDGES for c in req.constraints) else 0
        if modelled:
            self._model_search(search)
        elif self.count() < search - edge:
            self.limit = search - edge
            self._search_to(search - edge)
        if edge and self.count() < search:
            self._to_edge(search)
        if self.count() < search:
            self.limit = search
            self._search_to(search)
        self._raise_fatal()
        self._say_why_stopped()
        left = req.budget - self.count()
        stopped = self.still is not None or self.exhausted
        self._read_again(min(req.confirm_trials, left) if stopped else left)
        if not self.fatal and not stopped and self.count() < req.budget:
            # fewer points to read again than the budget kept for them (every good point
            # read twice, or another board's trials stopped this one's search early): the
            # edge first where its halving stopped short (its new best read again), then
            # searched
            if edge and self.count() < req.budget - 1:
                self._to_edge(req.budget - 1)
                self._read_again(req.budget - self.count())
            if modelled:
                self._model_search(req.budget)
            self._search_to(req.budget)

    def _modelled(self) -> bool:
        """Whether the models propose the points (model.py): one objective, img/J, every
        constraint a throughput floor (at least one), one workload setting."""
        req = self.req
        return (tuple(req.objectives) == ("images_per_j",) and bool(req.constraints)
                and all((c.name, c.op) in EDGES for c in req.constraints)
                and all(len(v) == 1 for v in self.choices.values()))

    def _model_search(self, n: int) -> None:
        """Trials at the models' points (model.next_point) until n count; where they have
        none, the sampler's (a point queued first, the top, is measured first)."""
        state = self.optuna.trial.TrialState
        for _ in range(n + INFERRED_IN_A_ROW):
            if self.count() >= n or self.ended:
                return
            self.limit = n
            if self.study.get_trials(deepcopy=False, states=(state.WAITING,)):
                self._optimize(1, n, self._patience)
                continue
            mine = self.same_board(self.usable())
            best = choose_best(mine, self.req.objectives[0], self.req.constraints)
            near = n - self.count() <= max(NEAR_LAST, n // 4) and best is not None
            point = next_point(mine, self.space, self.req.constraints, {
                f"{k}_hz": best.user_attrs["settings"][f"{k}_hz"] for k in self.space}
                if near and best is not None else None)
            params = None if point is None else _params_of(
                {**{k: v[0] for k, v in self.choices.items()}, **point}, self.space,
                self.choices)
            if params is None:
                return
            self.study.enqueue_trial(params, user_attrs={"model": True})
            self._optimize(1, n, self._patience)

    def _say_why_stopped(self) -> None:
        if self.exhausted:
            self.say(f"tune: the sampler chose {INFERRED_IN_A_ROW} points in a row that the "
                     "trials already measured show cannot meet the constraints: the search "
                     "stops there")
        if self.still is not None:
            self.say(f"tune: the best point has not changed in {self.req.patience} trials: "
                     f"the search stops at {self.still} of the budget's {self.req.budget} "
                     "(--patience)")

    def _raise_fatal(self) -> None:
        if self.fatal:
            raise self.fatal

    def _finish(self) -> TuneReport:
        if self.count() >= self.req.budget:
            drain_waiting(self.optuna, self.study)
        if (thin := thin_p99_note(self.timed, self.req)):
            self.say(thin)
        doc = study_doc(self.study, self.req, self.space, self.simulated, self.req.unit,
                        self.size)
        path = self.req.out_dir / "tune.json"
        # atomic: a full disk leaves the earlier tune.json or none, never an empty one
        atomic_write_text(path, json.dumps(doc, indent=2) + "\n")
        check_some_ran(self.study.get_trials(deepcopy=False))  # after tune.json: nothing lost
        return TuneReport(doc, path)

    # -- phases --------------------------------------------------------------------------------
    def _optimize(self, n_trials: int, stop: int, *more: Callback) -> None:
        try:
            self.study.optimize(self.objective, n_trials=n_trials, catch=(Exception,),
                                callbacks=[self._progress, self._stop_at(stop), *more])
        except (ValueError, RuntimeError) as e:
            if not told_elsewhere(e):
                raise
            # a point queued to be read (again) was taken by two boards sharing the study at
            # once (its storage let both pop it): the other's reading was told first and
            # stands, this one's is dropped; the search goes on from what the study holds
            self.say("tune: a queued trial was measured by another board sharing the study at "
                     "the same time: its reading stands, this board's is dropped")

    def _search_to(self, n: int) -> None:
        """Trials until `n` count (a point known to miss is not measured and does not count),
        this board yields its place to others', the space left is all known misses, or a
        trial loses the board."""
        self.yielded = False
        for _ in range(n + INFERRED_IN_A_ROW):
            if self.count() >= n or self.ended:
                return
            self._optimize(n - self.count(), n, self._patience)

    def _to_edge(self, n: int) -> None:
        """Trials halving the way from the best point to a constraint's edge (this board's
        trials), until n count, none is left, or the search ended otherwise."""
        for _ in range(n):
            mine = self.same_board(self.usable())
            best = choose_best(mine, self.req.objectives[0], self.req.constraints)
            points = [] if best is None else [p for p in (
                _params_of(s, self.space, self.choices) for s in edge_points(
                    mine, best.user_attrs["settings"], self.space, self.req.constraints))
                if p is not None][:n - self.count()]
            if not points or self.ended:
                return
            for params in points:
                self.study.enqueue_trial(params, user_attrs={"edge": True})
            self.limit = n
            self._optimize(len(points), n)

    def _read_again(self, room: int) -> None:
        """The best points read once, read again (at most `room`; none after a fatal)."""
        again = [] if self.fatal else _to_confirm(self.usable(), self.req.objectives[0], room,
                                                  self.req.constraints)
        self._enqueue_again(again)

    def _enqueue_again(self, settings: Sequence[Dict[str, Union[str, int]]],
                       *more: Callback) -> bool:
        """Points read again (not one another board of a shared study has queued already),
        measured now; False where there were none."""
        # (a queued trial's point is its fixed params until it runs)
        queued = [t.system_attrs.get("fixed_params", t.params) for t in self.study.get_trials(
            deepcopy=False, states=(self.optuna.trial.TrialState.WAITING,))]
        again = [p for p in (_params_of(s, self.space, self.choices) for s in settings)
                 if p is not None and p not in queued]
        for params in again:
            self.study.enqueue_trial(params, user_attrs={"confirms": True})
        self.limit = self.req.budget
        if again:
            self._optimize(len(again), self.req.budget, *more)
        return bool(again)

    def _rerun(self) -> bool:
        """Points queued again (a dead board's trial, by the heartbeat), or budget left that
        another board's yield gave back: measured here."""
        room = self.req.budget - self.count()
        if room <= 0 or self.fatal:
            return False
        state = self.optuna.trial.TrialState
        waiting = self.study.get_trials(deepcopy=False, states=(state.WAITING,))
        if self.still is not None or self.exhausted:  # the search has ended: retries only
            waiting = [t for t in waiting if "retry_of" in t.user_attrs]
            if not waiting:
                return False
        if not waiting and others_measuring(self.optuna, self.study):
            return False
        before = (self.count(), len(waiting))
        self._optimize(min(room, len(waiting) or room), self.req.budget)
        after = (self.count(), len(self.study.get_trials(deepcopy=False,
                                                         states=(state.WAITING,))))
        # went on only while it gets somewhere: a trial counted or a queued point taken
        return after[0] > before[0] or after[1] < before[1]

    # -- Optuna's callbacks ----------------------------------------------------------------------
    def _progress(self, study: OptunaStudy, trial: FrozenTrial) -> None:
        """A measured trial's line, once Optuna has stored it: the best point it names counts
        this trial too (from inside the objective it would be one trial late)."""
        self.progress.trial(study, trial, self.count())

    def _stop_at(self, n: int) -> Callback:
        def callback(_: OptunaStudy, _trial: FrozenTrial) -> None:
            if self.count() >= n:
                self.study.stop()
        return callback

    def _patience(self, _: OptunaStudy, trial: FrozenTrial) -> None:
        """--patience N: the search stops once N trials in a row have not moved the best."""
        req = self.req
        if not req.patience or len(self.directions) > 1 or not counts(self.optuna, trial):
            return
        best = choose_best(self.usable(), req.objectives[0], req.constraints)
        key = _key(best) if best else None
        if key != self.moved[0]:
            self.moved = (key, self.count())
        elif key is not None and self.count() - self.moved[1] >= req.patience:
            self.still = self.count()
            self.study.stop()

    # -- one trial -------------------------------------------------------------------------------
    def objective(self, trial: Trial) -> Union[float, Tuple[float, ...]]:
        trial.set_user_attr("measuring", True)
        if budget_taken(self.optuna, self.study, trial, self.count, self.limit,
                        self.req.budget):
            trial.set_user_attr("not_run", "the budget was taken by other boards' trials")
            self.yielded = True
            self.study.stop()
            raise self.optuna.TrialPruned()
        settings = suggest(trial, self.space, self.choices)
        for key, value in (("board", self.req.board_name), ("fingerprint", self.board_print),
                           ("settings", settings)):
            trial.set_user_attr(key, value)
        self._skip_known_miss(trial, settings)
        self.inferred_run = 0
        again = again_reason(trial, earlier_readings(
            self.same_board(self.study.get_trials(deepcopy=False)), trial))
        if again:
            trial.set_user_attr("again", again)
        report = self._measure(trial, settings)
        metrics = record(trial, report, self.req.constraints, self.modern)
        self.timed.append(trial.user_attrs.get("batches"))
        return objective_values(metrics, self.req.objectives, self.directions)

    def _skip_known_miss(self, trial: Trial, settings: Dict[str, Union[str, int]]) -> None:
        """A point the trials measured show misses a constraint: not measured, not counted."""
        state = self.optuna.trial.TrialState
        implied = implied_miss(self.same_board(self.study.get_trials(
            deepcopy=False, states=(state.COMPLETE,))), settings, list(self.space),
            self.req.constraints)
        if implied is None:
            return
        why = known_miss(trial, *implied, modern=self.modern)
        self.say(f"(#{trial.number + 1}) {_settings_text(settings)} -> {why}")
        # (a point of a space measured whole was not the sampler's choice: no run of them)
        self.inferred_run += 0 if trial.user_attrs.get("cover") else 1
        if self.inferred_run >= INFERRED_IN_A_ROW:
            self.exhausted = True
            self.study.stop()
        raise self.optuna.TrialPruned()

    def _measure(self, trial: Trial, settings: Dict[str, Union[str, int]]) -> MeasureReport:
        from ..measure import measure

        out = self.req.out_dir / "trials" / f"{trial.number:04d}"
        assert self.req.checked is not None  # tune() checks the options once
        request = request_for(self.req.checked, settings, out, P99_BATCHES
                              if self.req.p99_matters and trial.user_attrs.get("confirms")
                              else 0)  # a p99 read again
        try:
            return measure(self.root, request, command="tune")
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM: not counted; its point measured again
            retry_callback(self.optuna)(self.study,
                                        self.study.get_trials(deepcopy=False)[trial.number])
            raise
        except Exception as err:
            # One line (Optuna's own log, with its traceback, is off); a trial that lost the
            # board (taken back, busy, its sampler gone) ends the study with its error.
            self.say(f"{self.progress.ordinal(trial.number, self.count() + 1)}: "
                     f"{_settings_text(settings)} -> failed: "
                     f"{err if isinstance(err, JetbenchError) else first_line(err)}")
            trial.set_user_attr("error", str(err)[:300])
            if isinstance(err, (BoardBusy, LeaseRevoked, SamplerDied)):
                self.fatal = self.fatal or err
                self.study.stop()
            raise
