"""Issue 35: what a shared study, a saved profile and a second `tune` may not do to a board.
A study is data anyone with its storage can edit: its values reach a profile only as checked
numbers, through a TOML writer; the profile is written without following links; a tune holds
the board for its whole study."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jetbench.errors import HardwareError, ProfileError, UsageError
from jetbench.profiles.profile import load_profile, parse_profile
from jetbench.profiles.profile_file import write_profile_file
from jetbench.run.tune.output import profile_text, save_profile

from conftest import REPO, bound_s, make_board, wait_until

ENV = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
WINDOW = ("--duration", "0.3", "--warmup", "0.1", "--iterations", "3")
INJECTED = '1600000000"\n\n[[write]]\npath = "/sys/devices/system/cpu/cpu1/online"\nvalue = "0'


def _doc(**settings) -> dict:
    base = {"model": "sim:alexnet", "precision": "fp32", "batch": 1, "gpu_hz": 998400000,
            "emc_hz": 1600000000}
    base.update(settings)
    return {"created": "2026-11-26T15:00:00+0000", "study": "s", "objectives": ["images_per_j"],
            "constraints": [], "simulated": True,
            "space": {"gpu": [76800000, 998400000], "emc": [800000000, 1600000000]},
            "best": {"settings": base, "metrics": {"images_per_s": 10.0, "power_w": 2.0,
                                                   "images_per_j": 5.0}}}


class _Board:
    family = "tx1"


def test_a_profile_from_a_hostile_study_is_refused_and_text_cannot_add_tables():
    board = _Board()
    text = profile_text(_doc(), board, "ok")  # type: ignore[arg-type]
    profile = parse_profile(text, "ok")
    assert profile.emc_freq == 1_600_000_000 and profile.gpu_freq.min == 998_400_000
    assert profile.writes == () and profile.match_family == ("tx1",)
    # an EMC rate that closes its string and opens a [[write]] table (the study)
    for hostile in (INJECTED, "1600000000", 1600000000.0, True, 123, None):
        with pytest.raises(UsageError, match="emc_hz"):
            profile_text(_doc(emc_hz=hostile), board, "x")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="not a knob"):
        profile_text(_doc(cpu_hz=1), board, "x")  # type: ignore[arg-type]
    # free text (the model, the study's name) reaches only comments and escaped strings
    text = profile_text(_doc(model='m"\n[[write]]\npath = "/x"\n#'), board,  # type: ignore
                        "x")
    assert parse_profile(text, "x").writes == ()
    doc = _doc()
    doc["study"] = "s\n[[write]]\npath = '/sys/devices/system/cpu/cpu1/online'\nvalue = '0'"
    assert parse_profile(profile_text(doc, board, "x"), "x").writes == ()  # type: ignore


def _tune(base: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jetbench", "--root", str(base), "tune",
                           "--model", "sim:alexnet", *WINDOW, "--out", str(out), "--no-plot",
                           *args], capture_output=True, text=True, env=ENV, timeout=300)


def test_an_edited_shared_study_cannot_write_into_the_saved_profile(tmp_path):
    base = make_board(tmp_path, "tx1")
    out = tmp_path / "tuned"
    first = _tune(base, out, "--knobs", "gpu", "--budget", "1", "--seed", "1")
    assert first.returncode == 0, first.stderr
    with sqlite3.connect(out / "study.db") as con:
        (raw,) = con.execute("SELECT value_json FROM trial_user_attributes "
                             "WHERE key = 'settings'").fetchone()
        settings = json.loads(raw)
        settings["gpu_hz"] = f'{settings["gpu_hz"]}"\n\n[[write]]\npath = ' \
                             '"/sys/devices/system/cpu/cpu1/online"\nvalue = "0'
        con.execute("UPDATE trial_user_attributes SET value_json = ? WHERE key = 'settings'",
                    (json.dumps(settings),))
    again = _tune(base, out, "--knobs", "gpu", "--budget", "1", "--save-profile", "evil")
    assert again.returncode == 1, again.stderr
    assert "no profile written" in again.stderr and "Traceback" not in again.stderr
    assert not (base / "etc/jetbench/profiles/evil.toml").exists()
    doc = json.loads((out / "tune.json").read_text())
    assert doc["best"] is None and not doc["trials"][0]["feasible"]
    assert "not a point of this board" in doc["trials"][0]["reasons"][-1]
    assert (base / "sys/devices/system/cpu/cpu1/online").read_text().strip() == "1"


def test_the_profile_is_written_without_following_a_link(tmp_path):
    base = tmp_path / "root"
    folder = base / "etc/jetbench/profiles"
    folder.mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    (folder / "p.toml").symlink_to(outside)
    with pytest.raises(HardwareError, match="symbolic link"):
        write_profile_file(base, "p", "description = 'x'\n")
    assert outside.read_text() == "keep me\n"
    # a folder on the way that is a link is refused too
    (folder / "p.toml").unlink()
    os.rename(folder, tmp_path / "real-profiles")
    folder.symlink_to(tmp_path / "real-profiles")
    with pytest.raises(HardwareError, match="symbolic link"):
        write_profile_file(base, "p", "description = 'x'\n")
    assert list((tmp_path / "real-profiles").iterdir()) == []
    # a plain folder: written through a temporary file renamed over the old profile
    folder.unlink()
    folder.mkdir()
    (folder / "p.toml").write_text("old\n")
    assert write_profile_file(base, "p", "description = 'new'\n") == folder / "p.toml"
    assert (folder / "p.toml").read_text() == "description = 'new'\n"
    assert sorted(p.name for p in folder.iterdir()) == ["p.toml"]


def test_save_profile_through_tune_refuses_a_linked_profile(tmp_path):
    base = tmp_path / "root"
    (base / "etc/jetbench/profiles").mkdir(parents=True)
    outside = tmp_path / "outside.toml"
    outside.write_text("keep me\n")
    (base / "etc/jetbench/profiles/p.toml").symlink_to(outside)
    from jetbench.hw.fs import Root

    with pytest.raises(HardwareError):
        save_profile(Root(str(base)), _Board(), _doc(), "p")  # type: ignore[arg-type]
    assert outside.read_text() == "keep me\n"


@pytest.mark.parametrize("value", ["inf", "nan", "1e400", "-inf", '"1e400MHz"'])
def test_non_finite_clocks_in_a_profile_are_one_profile_error(value):
    with pytest.raises(ProfileError, match=r"\[gpu\] freq"):
        parse_profile(f"[gpu]\nfreq = {value}\n", "p")


def test_a_profile_is_read_with_a_bound_and_only_from_a_regular_file(tmp_path):
    base = tmp_path / "root"
    folder = base / "etc/jetbench/profiles"
    folder.mkdir(parents=True)
    (folder / "zero.toml").symlink_to("/dev/zero")
    with pytest.raises(UsageError, match="regular file"):
        load_profile("zero", base)
    (folder / "big.toml").write_text("# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(UsageError, match="larger than"):
        load_profile("big", base)
    os.mkfifo(folder / "fifo.toml")
    with pytest.raises(UsageError, match="regular file"):
        load_profile("fifo", base)


# -- item 3: a tune holds the board for its whole study --------------------------------------
def _trial_states(db: Path):
    try:
        with sqlite3.connect(db) as con:
            return [s for (s,) in con.execute("SELECT state FROM trials")]
    except sqlite3.OperationalError:  # "no such table" while Optuna creates it
        return []


def test_a_second_tune_is_refused_while_the_first_finishes_its_budget(tmp_path):
    base = make_board(tmp_path, "tx1")
    out = tmp_path / "tuned"
    release = tmp_path / "release"
    # The first tune holds at its second trial's pin (tests/interrupt_at.py) until released:
    # the second tunes run while it owns the board, however slow the machine.
    first = subprocess.Popen([sys.executable, str(REPO / "tests/interrupt_at.py"), "--root",
                              str(base), "tune", "--model", "sim:alexnet", *WINDOW,
                              "--out", str(out), "--no-plot", "--knobs", "gpu", "--budget",
                              "4", "--seed", "2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(ENV, INTERRUPT_AT=f"pinned#2:hold:{release}"))
    journal = base / "var/lib/jetbench/journal.json"
    held = tmp_path / "release.held"
    assert wait_until(lambda: held.exists() or first.poll() is not None, step=0.02)
    assert first.poll() is None, first.communicate()
    assert journal.exists()  # the second trial's pin: the first tune owns the board
    for other in (out, tmp_path / "other"):  # the same study, or another one
        second = _tune(base, other, "--knobs", "gpu", "--budget", "4")
        assert second.returncode == 2, second.stderr
        assert f"in use by pid {first.pid} (" in second.stderr
        assert "tune" in second.stderr
        assert "Traceback" not in second.stderr and "trial" not in second.stderr
    release.touch()
    _, err = first.communicate(timeout=bound_s(300))
    assert first.returncode == 0, err
    assert _trial_states(out / "study.db") == ["COMPLETE"] * 4
    assert not journal.exists()


def test_a_second_tune_with_wait_runs_once_the_first_is_done(tmp_path):
    """`--wait`: the second tune queues behind the first instead of being refused, then runs
    its own budget on the board the first gave back."""
    base = make_board(tmp_path, "tx1")
    before = board_state(base)
    first = subprocess.Popen([sys.executable, "-m", "jetbench", "--root", str(base), "tune",
                              "--model", "sim:alexnet", *WINDOW, "--out", str(tmp_path / "a"),
                              "--no-plot", "--knobs", "gpu", "--budget", "2", "--seed", "2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    journal = base / "var/lib/jetbench/journal.json"
    assert wait_until(lambda: journal.exists() or first.poll() is not None, step=0.02)
    assert first.poll() is None, first.communicate()  # the first holds the board now
    second = _tune(base, tmp_path / "b", "--knobs", "gpu", "--budget", "2", "--wait", "300")
    _, err = first.communicate(timeout=bound_s(300))
    assert first.returncode == 0, err
    assert second.returncode == 0, second.stderr
    assert _trial_states(tmp_path / "b" / "study.db") == ["COMPLETE"] * 2
    assert board_state(base) == before and not journal.exists()


# -- item 9: every bad study is one message -------------------------------------------------
def _request(out: Path, storage=None):
    from jetbench.run.request import MeasureOptions
    from jetbench.run.tune.options import TuneRequest

    return TuneRequest(MeasureOptions(model="sim:alexnet", duration="0.3", warmup="0.1",
                                      iterations=3), out, budget=1, storage=storage)


def _board_files(base: Path):
    return {p: p.read_bytes() for p in sorted(base.joinpath("sys").rglob("*"))
            if p.is_file() and not p.is_symlink()}


def test_bad_studies_and_storage_urls_are_one_message_before_the_board(tmp_path):
    from jetbench.errors import JetbenchError
    from jetbench.hw.fs import Root
    from jetbench.run.tune.study import tune

    base = make_board(tmp_path, "tx1")
    before = _board_files(base)
    root = Root(str(base))

    def refused(out: Path, storage=None, code=2, match=""):
        with pytest.raises(JetbenchError, match=match) as caught:
            tune(root, _request(out, storage))
        assert caught.value.exit_code == code, caught.value
        return caught.value

    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "study.db").write_bytes(b"not a database\n" * 300)
    refused(garbage, match="not a database")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "study.db").symlink_to(garbage / "study.db")
    refused(linked, match="symbolic link")
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "study.db")  # SQLite would block on it for ever
    refused(fifo, match="FIFO")
    folder = tmp_path / "folder"
    (folder / "study.db").mkdir(parents=True)
    refused(folder, match="not a regular file")
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    refused(tmp_path / "ro", f"sqlite:///file:{empty}?mode=ro&uri=true", match="readonly")
    for url in ("not a url", "garbage://x", "sqlite:"):
        refused(tmp_path / "url", url, code=1, match="--storage")
    if os.geteuid() == 0:  # a study another user can write would write this board's profile
        foreign = tmp_path / "foreign"
        foreign.mkdir()
        sqlite3.connect(foreign / "study.db").close()
        os.chown(foreign / "study.db", 65534, 65534)
        refused(foreign, match="owned by uid 65534")
    assert _board_files(base) == before
    assert not (base / "var/lib/jetbench/journal.json").exists()


def test_a_full_disk_under_the_study_is_one_message():
    from sqlalchemy.exc import OperationalError

    from jetbench.run.tune.storage import storage_errors

    with pytest.raises(HardwareError, match="disk is full"):
        with storage_errors("sqlite:////x/study.db"):
            raise OperationalError("INSERT INTO trials", {},
                                   sqlite3.OperationalError("database or disk is full"))
    with pytest.raises(ZeroDivisionError):  # a bug is not dressed up as a storage error
        with storage_errors("sqlite:////x/study.db"):
            raise ZeroDivisionError()


def test_a_fifo_study_is_refused_by_the_cli_without_hanging(tmp_path):
    base = make_board(tmp_path, "tx1")
    out = tmp_path / "tuned"
    out.mkdir()
    os.mkfifo(out / "study.db")
    done = _tune(base, out, "--budget", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("error") == 1 and "FIFO" in done.stderr


# -- items 4, 6, 7: under the daemon; kill -9 at each phase ----------------------------------
def board_state(base: Path):
    from helpers.daemons import board_state as state

    return state(base)


def _popen_tune(base: Path, out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "jetbench", "--root", str(base), "tune",
                             "--model", "sim:alexnet", *WINDOW, "--out", str(out), "--no-plot",
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)


@pytest.mark.parametrize("key", ["tx1", "orin-nano"])
def test_tune_gpu_emc_runs_its_budget_under_the_daemon(tmp_path, started, key):
    """The EMC lists no rates on either: the probe borrows the board from the daemon too."""
    from helpers.daemons import Daemon

    base = make_board(tmp_path, key)
    before = board_state(base)
    d = Daemon(tmp_path, base, "--profile", "maxperf")
    started.append(d)
    d.ready()
    pinned = board_state(base)
    out = tmp_path / "tuned"
    first = _popen_tune(base, out, "--knobs", "gpu,emc", "--budget", "3", "--seed", "1")
    deadline = time.monotonic() + 120
    while first.poll() is None and time.monotonic() < deadline:
        lease = d.ask("status").get("lease")
        if lease and lease["who"] == "tune":
            break
        time.sleep(0.05)
    second = _tune(base, tmp_path / "other", "--knobs", "gpu", "--budget", "1")
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert second.returncode == 2 and "Traceback" not in second.stderr, second.stderr
    assert _trial_states(out / "study.db") == ["COMPLETE"] * 3
    doc = json.loads((out / "tune.json").read_text())
    assert len(doc["space"]["emc"]) >= 2
    deadline = time.monotonic() + 30  # the daemon pins its profile again once lent back
    while board_state(base) != pinned and time.monotonic() < deadline:
        time.sleep(0.05)
    assert board_state(base) == pinned
    assert d.stop() == 0
    assert board_state(base) == before


def _kill_when(proc: subprocess.Popen, ready, what: str) -> None:
    deadline = time.monotonic() + 120
    while not ready():
        assert proc.poll() is None and time.monotonic() < deadline, \
            (what, proc.communicate(timeout=5) if proc.poll() is not None else "timed out")
        time.sleep(0.01)
    proc.kill()
    proc.communicate(timeout=30)


@pytest.mark.parametrize("key", ["tx1", "orin-nano"])
def test_a_tune_killed_in_the_emc_probe_resumes_to_the_original_board(tmp_path, key):
    base = make_board(tmp_path, key)
    before = board_state(base)
    out = tmp_path / "tuned"
    journal = base / "var/lib/jetbench/journal.json"
    args = ("--knobs", "gpu,emc", "--budget", "1", "--seed", "1")
    proc = _popen_tune(base, out, *args)
    # pinned by the probe: before the first trial, the journal written and a knob moved
    _kill_when(proc, lambda: journal.exists() and (out / "study.db").exists()
               and board_state(base) != before and not _trial_states(out / "study.db"),
               "the EMC probe's pin")
    resumed = _tune(base, out, *args)
    assert resumed.returncode == 0, resumed.stderr
    assert "restored from the journal" in resumed.stderr
    assert board_state(base) == before and not journal.exists()


def test_a_point_read_again_takes_its_params_from_checked_settings_not_stored_params():
    from types import SimpleNamespace

    from jetbench.run.tune.choice import _params_of, _to_confirm, _usable

    space = {"gpu": [76800000, 998400000]}
    settings = {"model": "sim:alexnet", "precision": "fp32", "batch": 1, "gpu_hz": 998400000}
    trial = SimpleNamespace(number=0, state=SimpleNamespace(name="COMPLETE"),
                            params={"gpu_index": 999},  # edited in the storage
                            user_attrs={"valid": True, "constraints": [0.0],
                                        "settings": settings,
                                        "metrics": {"images_per_j": 3.0}})
    again = _to_confirm(_usable([trial], space), "images_per_j", 1)
    choices = {"model": ["sim:alexnet"], "precision": ["fp32"], "batch": [1]}
    assert [_params_of(s, space, choices) for s in again] == [
        {"model": "sim:alexnet", "precision": "fp32", "batch": 1, "gpu_index": 1}]
    assert _params_of(dict(settings, model="other"), space, choices) is None


# put-back#2: the first trial's put-back (#1 is the EMC probe's, Orin Nano listing no rates)
@pytest.mark.parametrize("phase", ["pinned", "window-open", "window-closed", "put-back#2"])
def test_a_tune_killed_at_each_phase_of_a_trial_resumes_to_the_original_board(tmp_path,
                                                                              phase):
    """kill -9 exactly at one of measure's boundaries inside tune's first trial (the hook
    point of tests/interrupt_at.py): the resumed study searches the same space and the board
    ends byte-identical."""
    import optuna

    base = make_board(tmp_path, "orin-nano")
    before = board_state(base)
    out = tmp_path / "tuned"
    args = ("--model", "sim:alexnet", *WINDOW, "--out", str(out), "--no-plot",
            "--knobs", "gpu,emc", "--budget", "2", "--seed", "5", "--study", "s")
    killed = subprocess.run([sys.executable, str(REPO / "tests" / "interrupt_at.py"), "--root",
                             str(base), "tune", *args], capture_output=True, text=True,
                            env=dict(ENV, INTERRUPT_AT=f"{phase}:SIGKILL"), timeout=300)
    assert killed.returncode == -9, killed.stderr
    space = optuna.load_study(study_name="s", storage=f"sqlite:///{out / 'study.db'}"
                              ).user_attrs["space"]
    resumed = subprocess.run([sys.executable, "-m", "jetbench", "--root", str(base), "tune",
                              *args], capture_output=True, text=True, env=ENV, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "restored from the journal" in resumed.stderr
    assert json.loads((out / "tune.json").read_text())["space"] == space
    assert board_state(base) == before
    assert not (base / "var/lib/jetbench/journal.json").exists()
