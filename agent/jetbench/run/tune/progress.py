"""What a study says while it runs: a line per trial (`trial 3/12: ... -> img/s, W, img/s/W`),
why a trial measures a point measured before, and the times (as `sweep`'s bar: trials done of
the budget, the time since this board started, and the time left at its mean trial so far)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Protocol, Sequence

from ...units import duration_text, times_text
from .output import _best_line, _best_news, _metrics_text, _settings_text

if TYPE_CHECKING:
    from optuna import Study as OptunaStudy
    from optuna.trial import FrozenTrial

    from .options import TuneRequest


class Reading(Protocol):
    """A trial, finished (FrozenTrial) or running (Trial): its number and attributes."""

    @property
    def number(self) -> int: ...

    @property
    def user_attrs(self) -> Dict[str, Any]: ...  # Any: Optuna's type (JSON values)


def again_reason(trial: Reading, before: Sequence[Reading]) -> str:
    """Why a trial measures a point measured before (`before`: the finished trials of this
    board at that point), as its progress line says it; '' for a point measured first here."""
    if "retry_of" in trial.user_attrs:
        retried = ", ".join(f"#{n + 1}" for n in trial.user_attrs["retry_of"] or [])
        return f"measured again: trial {retried} did not finish"
    if not before:
        return ""
    first = before[0].number + 1
    if trial.user_attrs.get("confirms"):
        return (f"read again (its reading {len(before) + 1}): one of the best points, first "
                f"read by trial #{first}")
    if trial.user_attrs.get("edge"):
        return f"again: the edge's halving chose trial #{first}'s point"
    if trial.user_attrs.get("model"):
        return f"again: the models chose trial #{first}'s point"
    return f"again: the sampler chose trial #{first}'s point once more"


class Progress:
    """The progress lines of one board's run of a study."""

    def __init__(self, say: Callable[[str], None], req: TuneRequest,
                 space: Dict[str, List[int]]):
        self.say = say
        self.req = req
        self.space = space
        self.shown = [""]  # the best point last named: named again only when it changes
        self.spent_s: List[float] = []  # this board's measured trials' durations
        self.started = time.monotonic()  # this board's run of the study

    def ordinal(self, number: int, counted: int) -> str:
        """`trial K/BUDGET`: the K-th trial to count against the budget (the study's, every
        board's), and Optuna's number (`#N`, as tune.json and the answer name it) where that
        differs (another board's trials, points not measured)."""
        return f"trial {counted}/{self.req.budget}" + (
            f" (#{number + 1})" if counted != number + 1 else "")

    def trial(self, study: OptunaStudy, trial: FrozenTrial, counted: int) -> None:
        """A measured trial's line, once Optuna has stored it (the best point it names counts
        this trial too), then the time left."""
        metrics = trial.user_attrs.get("metrics")
        if metrics is None:  # a trial that failed said so itself
            return
        violations = trial.user_attrs.get("constraints") or []
        again = trial.user_attrs.get("again")
        self.say(f"{self.ordinal(trial.number, counted)}: "
                 f"{_settings_text(trial.user_attrs['settings'])} -> "
                 f"{_metrics_text(metrics, self.req.unit)}"
                 f"{'' if trial.user_attrs.get('valid') else ' (invalid)'}"
                 f"{' (breaks a constraint)' if any(v > 0 for v in violations[:-1]) else ''}"
                 + (f" [{again}]" if again else "")
                 + _best_news(_best_line(study, self.req, self.space, self.req.unit),
                              self.shown, trial.number))
        if trial.datetime_start and trial.datetime_complete:
            self.spent_s.append((trial.datetime_complete - trial.datetime_start)
                                .total_seconds())
        self.eta(counted)

    def eta(self, done: int) -> None:
        """'tune: 5/12 trials done, 50 s elapsed, ~1 min 10 s left (10 s a trial)': as
        measure's and sweep's progress says its times (units.times_text)."""
        left = self.req.budget - done
        if left <= 0 or not self.spent_s:
            return
        mean = sum(self.spent_s) / len(self.spent_s)
        self.say(f"tune: {done}/{self.req.budget} trials done, "
                 f"{times_text(time.monotonic() - self.started, mean * left)} "
                 f"({duration_text(mean)} a trial)")


def earlier_readings(trials: Sequence[FrozenTrial], trial: Reading) -> List[FrozenTrial]:
    """The finished trials before `trial` of the same point, oldest first."""
    settings = trial.user_attrs.get("settings")
    return [t for t in trials if t.number < trial.number and t.state.name == "COMPLETE"
            and settings and t.user_attrs.get("settings") == settings]
