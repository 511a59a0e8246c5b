"""Where a study lives (Optuna's storage: SQLite in the output directory, or a server) and
how a storage's failures read as one message; a study recovered after a kill."""

from __future__ import annotations

import os
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional

from ...errors import HardwareError, JetbenchError, UsageError, first_line
from ...hw.fs import Root
from ...ownership import journal
from ...ownership.lease import Guard

if TYPE_CHECKING:
    from optuna import Study
    from optuna.samplers import BaseSampler
    from optuna.trial import FrozenTrial


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


def _open_study(optuna: ModuleType, name: str, storage: str, directions: List[str],
                sampler: BaseSampler) -> Study:
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
    for t in stale:
        study.tell(t.number, state=optuna.trial.TrialState.FAIL)
    if stale:
        say(f"tune: {len(stale)} trial(s) of an earlier run on this board had not finished "
            "(interrupted): marked failed, not counted against the budget")
    if restored:
        say("tune: an interrupted run had left the board pinned: restored from the journal")


def others_measuring(optuna: ModuleType, study: Study) -> List[FrozenTrial]:
    """Trials still measuring on other boards of a shared study (this board's are done)."""
    running = optuna.trial.TrialState.RUNNING
    return [t for t in study.get_trials(deepcopy=False, states=(running,))
            if t.user_attrs.get("measuring")]


def wait_for_others(optuna: ModuleType, study: Study, say: Callable[[str], None],
                    poll_s: float = 0.2, least_s: float = 60.0) -> None:
    """A board that ends its part of a shared study while the others' last trials still
    measure waits for them, so its tune.json is the study's answer, not a snapshot missing
    them. It waits at most three times the longest trial so far (`least_s` at least): a board that
    died mid-trial leaves its trial RUNNING until it tunes again, and is not waited for ever."""
    waiting = others_measuring(optuna, study)
    if not waiting:
        return
    durations = [(t.datetime_complete - t.datetime_start).total_seconds()
                 for t in study.get_trials(deepcopy=False)
                 if t.datetime_complete is not None and t.datetime_start is not None]
    limit_s = max(least_s, 3 * max(durations, default=0.0))
    boards = sorted({str(t.user_attrs.get("board", "?")) for t in waiting})
    say(f"tune: waiting for {len(waiting)} trial(s) still measuring on other boards "
        f"({', '.join(boards)}), {limit_s:.0f} s at most")
    deadline = time.monotonic() + limit_s
    while waiting and time.monotonic() < deadline:
        time.sleep(poll_s)
        waiting = others_measuring(optuna, study)
    if waiting:
        say(f"tune: {len(waiting)} trial(s) on other boards still running after "
            f"{limit_s:.0f} s: the study is written without them")
