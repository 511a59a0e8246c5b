"""Issue 63: full disks. With a full state directory `restore` needs no new space (the board
lock's holder record is written where there is room, and skipped where there is none), so after
`maxperf` the board still comes back; every message about a full disk names the directory and
says to free space there (sudo would not help: root writes into the same full disk). A result
that cannot be written leaves no empty placeholder."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from conftest import cli, make_board, snapshot

STATE = "var/lib/jetbench"


@pytest.fixture
def full_disk(monkeypatch):
    """Every write of data under a state directory fails with ENOSPC from now on (`on()`),
    as a full file system answers: creating an empty file and removing one still work."""
    state = {"on": False}
    real_pwrite, real_write, real_ftruncate = os.pwrite, os.write, os.ftruncate

    def in_state_dir(fd: int) -> bool:
        try:
            return f"/{STATE}/" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return False

    def guard(real):
        def write(fd, data, *rest):
            if state["on"] and in_state_dir(fd) and len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, data, *rest)
        return write

    monkeypatch.setattr(os, "pwrite", guard(real_pwrite))
    monkeypatch.setattr(os, "write", guard(real_write))
    monkeypatch.setattr(os, "ftruncate", real_ftruncate)
    return state


def _board(base: Path):
    return snapshot(base, exclude=("var",))


def test_restore_after_maxperf_works_on_a_full_state_directory(tmp_path, full_disk):
    base = make_board(tmp_path, "tx1")
    before = _board(base)
    assert cli(base, "maxperf").exit_code == 0
    assert _board(base) != before
    full_disk["on"] = True
    result = cli(base, "restore")
    assert result.exit_code == 0, result.output
    assert _board(base) == before
    assert not (base / STATE / "journal.json").exists()


def test_a_full_disk_is_said_with_the_directory_and_what_to_do(tmp_path, full_disk):
    base = make_board(tmp_path, "tx1")
    before = _board(base)
    full_disk["on"] = True
    result = cli(base, "maxperf")
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "No space left on device" in text and "free space there" in text, text
    assert str(base / STATE) in text and "sudo" not in text.split("hint:")[1], text
    assert _board(base) == before  # nothing was changed


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_restore_on_a_really_full_tmpfs(tmp_path):
    """The same on a real full file system (a 64 KiB tmpfs filled up), as the issue found it."""
    import subprocess

    from conftest import run_cli

    base = make_board(tmp_path, "tx1")
    before = _board(base)
    state = base / STATE
    state.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs",
                       str(state)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        assert run_cli("--root", str(base), "maxperf").returncode == 0
        fd = os.open(state / "fill", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as err:
            assert err.errno == errno.ENOSPC
        finally:
            os.close(fd)
        done = run_cli("--root", str(base), "restore")
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert _board(base) == before
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)


def test_a_result_that_cannot_be_written_leaves_no_empty_file(tmp_path, monkeypatch):
    """The O_EXCL placeholders that claim a result's names go when the write fails (a full
    --out): before, an empty `.json` stayed behind, looking like a result."""
    from jetbench.report import io

    def full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(io, "atomic_write_text", full)
    out = tmp_path / "out"
    with pytest.raises(OSError):
        io.claim_result(out / "r.json", {"power": {}}, "t_s\n")
    with pytest.raises(OSError):
        io.claim_result(out / "r.json", {"power": {}}, None)
    assert list(out.iterdir()) == []


def test_a_study_store_that_fills_mid_run_is_one_message():
    """Optuna ends a trial whose commit failed with `AssertionError("Should not reach.")`
    raised while handling its StorageInternalError: that is the storage's failure, said in
    one line with the database's own words, not a traceback."""
    import sqlite3

    from optuna.exceptions import StorageInternalError
    from sqlalchemy.exc import OperationalError

    from jetbench.errors import HardwareError
    from jetbench.run.tune.storage import storage_errors

    def commit() -> None:
        try:
            raise OperationalError("COMMIT", {}, sqlite3.OperationalError(
                "database or disk is full"))
        except OperationalError as err:
            raise StorageInternalError("An exception is raised during the commit.") from err

    with pytest.raises(HardwareError, match="disk is full"):
        with storage_errors("sqlite:////x/study.db"):
            try:
                commit()
            finally:
                raise AssertionError("Should not reach.")
    with pytest.raises(AssertionError):  # an assertion of jetbench's own stays a bug
        with storage_errors("sqlite:////x/study.db"):
            raise AssertionError("a bug")
