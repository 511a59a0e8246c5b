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

Here: the study opened (its storage, sampler, the board held, the space and the terms it
keeps); its trials are search.Study's (how the budget is spent), each one trial.py's parts,
said by progress.py.
"""

from __future__ import annotations

import dataclasses
import os
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

from ...errors import UsageError
from ...hw.fs import Root
from ...ownership.owner import borrow_board
from ...report import io
from ...report.io import removed_if_left_empty
from ..request import build_request, split_list
from .options import (
    COMMAND_MODEL,
    OBJECTIVES,
    STUDY_FILE,
    TuneReport,
    TuneRequest,
    check,
    load_optuna,
)
from .preflight import check_can_run
from .search import Study
from .space import probe_emc_rates, search_space
from .storage import (  # noqa: F401 (counts: the tests' way to the study's count)
    _open_study,
    _recover,
    check_storage,
    check_study_kept,
    counts,
    storage_errors,
)
from .terms import TERMS_ATTR, check_same, fingerprint, terms_of
from .warm import read_study

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler
    from optuna.trial import FrozenTrial


def _mhz(rates: Sequence[int]) -> str:
    return ", ".join(f"{hz / 1e6:g}" for hz in rates) + " MHz"


def tune(root: Root, req: TuneRequest,
         progress: Optional[Callable[[str], None]] = None) -> TuneReport:
    """Run trials until the study has `req.budget` of them; see the module docstring."""

    check(req)
    optuna = load_optuna()
    say = progress or (lambda line: None)
    models = [COMMAND_MODEL] if req.options.cmd else split_list(req.options.model)
    probe = build_request(dataclasses.replace(req.options, out=None))  # every option rule, once
    # the checked names (a precision as measure spells it), every trial a copy of `probe`
    precisions = split_list(req.options.precision) if req.options.cmd else list(probe.precisions)
    req = dataclasses.replace(req, checked=probe)
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
        check_can_run(root, probe)  # a meter or command that cannot open: no study, no trial
        with storage_errors(storage):
            return _tune(root, req, optuna, say, models, precisions, batches, storage,
                         probe.wait_s, earlier)


def make_sampler(optuna: ModuleType, req: TuneRequest, directions: Sequence[str]
                 ) -> Tuple[bool, BaseSampler]:
    """(whether Optuna takes constraints from the trial, the study's sampler): multivariate
    TPE for one objective, NSGA-II for a Pareto front."""
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
    return modern, sampler


def _tune(root: Root, req: TuneRequest, optuna: ModuleType, say: Callable[[str], None],
          models: List[str], precisions: List[str], batches: List[int], storage: str,
          wait_s: Optional[float], earlier: Optional[Dict[str, object]]) -> TuneReport:
    from ...hw.nvpmodel import read_power_mode
    from ...open_board import open_board

    name = req.study or "jetbench-" + "-".join([*models, *precisions, *map(str, batches),
                                                *req.knobs])
    directions = [OBJECTIVES[o] for o in req.objectives]

    modern, sampler = make_sampler(optuna, req, directions)
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
        return Study(root, req, optuna, say, study, space, simulated, models, precisions,
                     batches, directions, modern, fingerprint(asked), earlier).run()


