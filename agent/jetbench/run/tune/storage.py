"""Where a study lives (Optuna's storage: SQLite in the output directory, or a server) and
how a storage's failures read as one message; a study recovered after a kill."""

from __future__ import annotations

import inspect
import os
import stat
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional, Union

from ...errors import HardwareError, JetbenchError, UsageError, first_line
from ...hw.fs import Root
from ...ownership import journal
from ...ownership.lease import Guard

if TYPE_CHECKING:
    from optuna import Study
    from optuna.samplers import BaseSampler
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial

RETRIES = 2  # an interrupted trial's point is measured again at most this many times
# optuna's error where a trial this board measured was told (finished) by another first
TOLD_ELSEWHERE = "Cannot tell a "
GRACE_BEATS = 3  # a trial whose board missed this many heartbeats is taken as dead


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


def check_study_kept(out_dir: Path, study_file: str) -> None:
    """The results of earlier trials in `out_dir` need the study that chose them: an empty or
    missing study file beside them (a disk filled while SQLite wrote, a file deleted) would
    start a new study over them silently."""
    trials = out_dir / "trials"
    ran = sorted(p.name for p in trials.iterdir()) if trials.is_dir() else []
    if not ran:
        return
    path = out_dir / study_file
    try:
        size: Optional[int] = path.stat().st_size
    except FileNotFoundError:
        size = None
    if not size:
        raise HardwareError(f"{len(ran)} trial(s) ran in this directory, but the study that "
                            f"chose them is {'empty' if size == 0 else 'missing'}",
                            path=str(path),
                            hint="give tune another --out for a new study (the trials' results "
                                 "stay readable with jetbench report)")


_STORAGE_MODULES = ("sqlalchemy", "sqlite3", "optuna", "psycopg2", "pymysql")


def _storage_cause(err: BaseException) -> Optional[BaseException]:
    """The storage's own error in `err` or in what it was raised from or during: Optuna ends
    a trial whose commit failed (a disk that filled mid-run) with `AssertionError("Should not
    reach.")` raised while handling its StorageInternalError (issue 63). None: not the
    storage's (a bug is not dressed up as a storage error)."""
    found: Optional[BaseException] = None
    link: Optional[BaseException] = err
    for _ in range(8):  # the innermost says most ("database or disk is full")
        if link is None:
            break
        if (type(link).__module__ or "").startswith(_STORAGE_MODULES) or \
                isinstance(link, ImportError):
            found = link
        link = link.__cause__ or link.__context__
    return found


@contextmanager
def storage_errors(storage: str) -> Iterator[None]:
    """The storage's failures as one message: a URL no database driver takes (exit 1), a
    study file that is not a database, read-only, on a full disk, unreachable (exit 2)."""
    try:
        yield
    except JetbenchError:
        raise
    except Exception as raised:
        err = _storage_cause(raised)
        if err is None:
            raise
        kind = type(err)
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


def _open_study(optuna: ModuleType, name: str, storage: str, directions: List[str],
                sampler: BaseSampler, heartbeat_s: Optional[int] = None) -> Study:
    """The study, created or joined. Boards starting together on a new database race to create
    Optuna's tables ("table alembic_version already exists", a duplicated study): the one that
    loses tries again and joins what the other made. With `heartbeat_s`, each running trial
    beats that often (Optuna's heartbeat): a trial whose board stopped beating for
    GRACE_BEATS beats is failed by the next board that looks, and its point queued again."""
    for attempt in range(20):
        try:
            return optuna.create_study(study_name=name,
                                       storage=_with_heartbeat(optuna, storage, heartbeat_s),
                                       directions=directions, sampler=sampler,
                                       load_if_exists=True)
        except Exception as err:  # noqa: BLE001 - SQLAlchemy's and Optuna's, whichever won
            text = str(err)
            racing = any(w in text for w in ("already exists", "locked", "no such table")) \
                or type(err).__name__ in ("IntegrityError", "DuplicatedStudyError")
            if attempt == 19 or not racing:
                raise
            time.sleep(0.1 + 0.05 * attempt)
    raise AssertionError("unreachable")


def _with_heartbeat(optuna: ModuleType, storage: str, heartbeat_s: Optional[int]
                    ) -> Union[str, BaseStorage]:
    if not heartbeat_s:
        return storage
    rdb = optuna.storages.RDBStorage
    # the callback's name: heartbeat_stale_trial_callback (Optuna 4.9+), failed_trial_callback
    accepts = inspect.signature(rdb.__init__).parameters
    name = ("heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in accepts
            else "failed_trial_callback")
    with warnings.catch_warnings():  # Optuna calls the heartbeat experimental
        warnings.simplefilter("ignore")
        return rdb(storage, heartbeat_interval=heartbeat_s,
                   grace_period=GRACE_BEATS * heartbeat_s, **{name: retry_callback(optuna)})


def counts(optuna: ModuleType, trial: FrozenTrial) -> bool:
    """Whether a trial counts against the budget: it ran to its end (measured, or failed with
    its own error). One interrupted (Ctrl-C, SIGTERM, a kill -9 found RUNNING and failed by
    the next run) ran nothing to the end: its point is measured again by a later trial; nor
    does one a board did not run because other boards' trials had taken the budget, nor one
    not measured because the trials measured show it misses a constraint (monotone.py)."""
    state = optuna.trial.TrialState
    return trial.state == state.COMPLETE or (
        trial.state == state.PRUNED and "not_run" not in trial.user_attrs
        and "inferred" not in trial.user_attrs) or (
        trial.state == state.FAIL and "error" in trial.user_attrs)


def retry_callback(optuna: ModuleType) -> Callable[[Study, FrozenTrial], None]:
    """The retry of an interrupted trial (a board that died, a kill, a reboot): its point
    queued again, RETRIES times at most, the trial numbers it replaces in `retry_of` (a user
    attribute: Optuna's own retry callback keeps them where Optuna 5's Trial cannot read)."""
    def requeue(study: Study, trial: FrozenTrial) -> None:
        history = [*trial.user_attrs.get("retry_of", []), trial.number]
        if not trial.params or len(history) > RETRIES:
            return  # killed before it chose its point, or retried enough
        attrs = {"retry_of": history, **{k: True for k in ("confirms", "edge", "model")
                                         if trial.user_attrs.get(k)}}
        study.add_trial(optuna.trial.create_trial(
            state=optuna.trial.TrialState.WAITING, params=trial.params,
            distributions=trial.distributions, user_attrs=attrs))
    return requeue


def fail_stale(optuna: ModuleType, study: Study) -> None:
    """Trials of boards that stopped beating failed and queued again (a no-op without the
    heartbeat)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optuna.storages.fail_stale_trials(study)


def _worst(direction: str) -> float:
    return -1e30 if direction == "maximize" else 1e30


def _recover(optuna: ModuleType, root: Root, guard: Guard, study: Study, board: str,
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
    retry = retry_callback(optuna)
    for t in stale:
        try:
            study.tell(t.number, state=optuna.trial.TrialState.FAIL)
        except Exception:  # noqa: BLE001 - another board's heartbeat check failed it first
            continue  # (and queued its point again)
        retry(study, study.get_trials(deepcopy=False)[t.number])
    if stale:
        say(f"tune: {len(stale)} trial(s) of an earlier run on this board had not finished "
            "(interrupted): marked failed, not counted against the budget, their points "
            "queued to be measured again")
    if restored:
        say("tune: an interrupted run had left the board pinned: restored from the journal")


def others_measuring(optuna: ModuleType, study: Study) -> List[FrozenTrial]:
    """Trials still measuring on other boards of a shared study (this board's are done)."""
    running = optuna.trial.TrialState.RUNNING
    return [t for t in study.get_trials(deepcopy=False, states=(running,))
            if t.user_attrs.get("measuring")]


def wait_for_others(optuna: ModuleType, study: Study, say: Callable[[str], None],
                    poll_s: float = 0.2, least_s: float = 60.0,
                    rerun: Optional[Callable[[], bool]] = None) -> None:
    """A board that ends its part of a shared study while the others' last trials still
    measure waits for them, so its tune.json is the study's answer, not a snapshot missing
    them. Meanwhile it fails the trials of boards that stopped beating (the heartbeat) and
    `rerun` measures what that queued again (True: it ran something, so the wait starts over).
    It waits at most three times the longest trial so far (`least_s` at least): without a
    heartbeat a board that died mid-trial leaves its trial RUNNING until it tunes again, and
    is not waited for ever."""
    said = False
    deadline = 0.0
    limit_s = 0.0
    while True:
        fail_stale(optuna, study)
        if rerun is not None and rerun():
            said = False  # it measured something: the others' wait is counted anew
            continue
        waiting = others_measuring(optuna, study)
        if not waiting:
            return
        if not said:
            durations = [(t.datetime_complete - t.datetime_start).total_seconds()
                         for t in study.get_trials(deepcopy=False)
                         if t.datetime_complete is not None and t.datetime_start is not None]
            limit_s = max(least_s, 3 * max(durations, default=0.0))
            boards = sorted({str(t.user_attrs.get("board", "?")) for t in waiting})
            say(f"tune: waiting for {len(waiting)} trial(s) still measuring on other boards "
                f"({', '.join(boards)}), {limit_s:.0f} s at most")
            deadline = time.monotonic() + limit_s
            said = True
        if time.monotonic() >= deadline:
            say(f"tune: {len(waiting)} trial(s) on other boards still running after "
                f"{limit_s:.0f} s: the study is written without them")
            return
        time.sleep(poll_s)


def told_elsewhere(err: BaseException) -> bool:
    """Optuna's answer where a trial this board holds was finished by another board sharing
    the study first (both took the same queued point: SQLite lets two pop it): told before our
    own tell looked ("Cannot tell a COMPLETE trial"), or between its look and its write
    (UpdateFinishedTrialError: "Trial#9 has already finished and can not be updated", seen
    with two boards under load)."""
    return type(err).__name__ == "UpdateFinishedTrialError" or (
        isinstance(err, ValueError) and str(err).startswith(TOLD_ELSEWHERE))


def drain_waiting(optuna: ModuleType, study: Study) -> int:
    """Points queued again (or to be read again) that no trial will run, the budget being full:
    taken and closed as not run, so no WAITING trial is left behind in the study. Returns how
    many."""
    waiting = optuna.trial.TrialState.WAITING
    closed = 0
    for _ in range(len(study.get_trials(deepcopy=False, states=(waiting,)))):
        trial = study.ask()  # the oldest WAITING trial (a fresh one if another board took it)
        try:
            trial.set_user_attr("not_run", "the budget was full when its turn came")
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        except (ValueError, RuntimeError) as err:
            if not told_elsewhere(err):
                raise
            continue  # another board closed it at the same moment
        closed += 1
    return closed
