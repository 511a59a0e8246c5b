"""Issue 56, part 4: `tune` spends its budget where it tells. A space no larger than the budget
is measured whole, a trial a point, and the budget left reads the leaders again; a trial that
measures a point measured before says why in its line; "why this point" says over how many of
the space's points its margin was judged; an ETA line says trials done and the time left.

The trials' figures are computed (a stand-in for measure), never timed: a loaded host runs the
same study."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest
from helpers.results import computed_report

from jetbench.hw.fs import Root
from jetbench.run.request import MeasureOptions
from jetbench.run.tune import study as study_module
from jetbench.run.tune.options import TuneRequest

from conftest import make_board

optuna = pytest.importorskip("optuna")

SEVEN = [76_800_000, 153_600_000, 230_400_000, 307_200_000, 384_000_000, 460_800_000,
         537_600_000]


def _stand_in(monkeypatch) -> None:
    """img/J = 100x / (2 + 3x^2) at x = GPU clock / the table's top: best at 0.8 of it."""
    from jetbench.run import measure as measure_module

    def shape(_root, request, command):
        x = int(request.gpu_freqs[0]) / SEVEN[-1]
        rate, watts = 100.0 * x, 2.0 + 3.0 * x * x
        return computed_report(rate, watts)

    monkeypatch.setattr(measure_module, "measure", shape)
    monkeypatch.setattr(study_module, "search_space", lambda *_a, **_k: {"gpu": list(SEVEN)})


def _study(tmp_path: Path, budget: int, lines: List[str], **kw):
    base = make_board(tmp_path, "tx1")
    options = MeasureOptions(model="sim:alexnet", duration="0.3")
    request = TuneRequest(options, tmp_path / "tuned", budget=budget, knobs=("gpu",), seed=1,
                          **kw)
    return study_module.tune(Root(str(base)), request, progress=lines.append).doc


def test_a_space_no_larger_than_the_budget_is_measured_whole_then_its_leaders_again(
        tmp_path, monkeypatch):
    """7 GPU clocks, budget 12: every clock measured once, the 5 trials left read the best
    points again, and each of those says so; the answer's margin says it was judged over all
    7 (before: 4 or 5 distinct clocks measured, the sampler's repeats silent)."""
    _stand_in(monkeypatch)
    lines: List[str] = []
    doc = _study(tmp_path, 12, lines)
    trials = [t for t in doc["trials"] if t["state"] == "COMPLETE"]
    clocks = [t["settings"]["gpu_hz"] for t in trials]
    assert len(trials) == 12 and sorted(set(clocks)) == SEVEN, clocks
    assert clocks[:7] == sorted(SEVEN, reverse=True), clocks  # the top first
    again = [t for t in trials[7:]]
    assert all(t["confirms"] for t in again), clocks
    read_again = [line for line in lines if line.startswith("trial ") and "read again" in line]
    assert len(read_again) == 5, lines
    # 6/7 of the top holds the most img/J, 5/7 within its uncertainty and less power
    assert doc["best"]["settings"]["gpu_hz"] in (384_000_000, 460_800_000), clocks
    assert doc["why"].endswith("over the 7 of 7 points measured"), doc["why"]
    etas = [line for line in lines if "trials done" in line]
    # the times as measure's and sweep's progress says them (it said '0:00:00 left (at
    # 0:00:00 a trial)')
    assert etas and re.fullmatch(r"tune: 1/12 trials done, \d+ s elapsed, ~\d+ s left "
                                 r"\(\d+ s a trial\)", etas[0]), etas
    assert "every one of the space's 7 points once" in lines[0], lines[0]


def test_a_larger_space_says_how_many_of_its_points_the_answer_was_judged_over(
        tmp_path, monkeypatch):
    _stand_in(monkeypatch)
    lines: List[str] = []
    doc = _study(tmp_path, 5, lines)
    measured = {t["settings"]["gpu_hz"] for t in doc["trials"] if t["state"] == "COMPLETE"}
    assert doc["why"].endswith(f"over the {len(measured)} of 7 points measured"), doc["why"]
    assert "every one of the space's" not in lines[0], lines[0]


def test_a_trial_that_repeats_a_point_says_why():
    from optuna.distributions import IntDistribution
    from optuna.trial import TrialState, create_trial

    from jetbench.run.tune.progress import again_reason

    def trial(number, **attrs):
        made = create_trial(state=TrialState.COMPLETE, value=1.0, params={"gpu_index": 3},
                            distributions={"gpu_index": IntDistribution(0, 6)},
                            user_attrs={"settings": {"gpu_hz": 307_200_000}, **attrs})
        made.number = number
        return made

    first = trial(2)
    assert again_reason(trial(5), []) == ""
    assert again_reason(trial(5), [first]) == \
        "again: the sampler chose trial #3's point once more"
    assert again_reason(trial(5, confirms=True), [first]).startswith(
        "read again (its reading 2): one of the best points, first read by trial #3")
    assert again_reason(trial(5, retry_of=[3]), [first]) == \
        "measured again: trial #4 did not finish"


def test_a_space_measured_whole_where_nothing_meets_the_floor_says_what_it_left_unspent(
        tmp_path, monkeypatch):
    """The top misses the floor, so every point below is known to miss without measuring; no
    point is left to read again, and the budget left is said, not spent on repeats."""
    from jetbench.run.tune.options import constraints_for

    _stand_in(monkeypatch)
    lines: List[str] = []
    floor = constraints_for(["items_per_s>=1000"], MeasureOptions(model="sim:alexnet"))
    doc = _study(tmp_path, 12, lines, constraints=floor)
    complete = [t for t in doc["trials"] if t["state"] == "COMPLETE"]
    known = [t for t in doc["trials"] if t["state"] == "PRUNED"]
    assert len(complete) == 1 and len(known) == 6, doc["trials"]
    assert doc["best"] is None and doc["closest"] is not None
    assert lines[-1] == ("tune: every point of the space is measured (or known to miss) and "
                         "none meets the constraints to be read again: 11 trial(s) of the "
                         "budget left unspent"), lines


def test_a_shared_budget_counts_an_earlier_trial_before_it_says_it_measures():
    # two boards on one study: the later trial yields to an earlier one even where that one
    # has not yet said it measures (counted only once it had, both ran: 7 trials of 6 under
    # load, test_tune.py's PostgreSQL study); the earlier never yields to the later
    from jetbench.run.tune.trial import budget_taken

    study = optuna.create_study()
    earlier = study.ask()  # another board's, just started
    mine = study.ask()
    mine.set_user_attr("measuring", True)
    assert budget_taken(optuna, study, mine, lambda: 5, limit=6, budget=6)
    assert not budget_taken(optuna, study, earlier, lambda: 5, limit=6, budget=6)
    # a trial that ends between the two reads is counted twice, never not at all
    ended = []

    def count() -> int:
        if not ended:
            study.tell(earlier, 1.0)
            ended.append(True)
        return 6 if ended else 5
    assert budget_taken(optuna, study, mine, count, limit=7, budget=7)


def test_a_queued_trial_told_by_another_board_first_is_dropped_and_said_not_a_traceback():
    # two boards sharing a study may pop the same queued trial (SQLite let both take it:
    # test_tune.py::test_two_boards_work_on_one_study once died so beside two CPU burners);
    # optuna then refuses this board's tell: the other's reading stands, the search goes on
    from jetbench.run.tune.search import Study

    class Raced:
        def optimize(self, *args, **kwargs):
            raise ValueError("Cannot tell a COMPLETE trial.")

    said = []
    search = Study.__new__(Study)
    search.study, search.say = Raced(), said.append
    search.objective = search._progress = lambda *a: None
    search._stop_at = lambda stop: (lambda *a: None)
    search._optimize(1, 6)
    assert said and "another board sharing the study" in said[0]

    class Broken(Raced):
        def optimize(self, *args, **kwargs):
            raise ValueError("something else")

    search.study = Broken()
    with pytest.raises(ValueError, match="something else"):
        search._optimize(1, 6)
