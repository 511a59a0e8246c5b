"""Issue 9, items 6 and 7: the state directory and the journal are hardware paths.

Symlinks planted in a simulated tree point outside it, at a directory that is then checked to be
untouched; journals of the wrong shape are refused with one message (the file and the fix),
exit 2, from every command that reads the journal, and never extended.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from jetbench.hw.fs import Root

from conftest import cli, diff, make_board, run_cli, snapshot

runner = CliRunner()
STATE = "var/lib/jetbench"
GPU_MIN = "sys/devices/57000000.gpu/devfreq/57000000.gpu/min_freq"  # tx1, docs/hardware.md
GPU_MIN_BOARD = "/" + GPU_MIN



@pytest.fixture
def outside(tmp_path):
    """A directory outside the board's root, with one precious file."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "precious").write_text("precious\n")
    return d


def _journal_doc(entries):
    return {"schema": "jetbench.journal/1", "board": "tx1", "entries": entries}


# -- item 6: the state directory --------------------------------------------------------------
def test_symlinked_state_dir_is_refused_and_nothing_lands_outside(tmp_path, outside):
    base = make_board(tmp_path, "tx1")
    os.rmdir(base / STATE)
    os.symlink(outside, base / STATE)
    before = snapshot(outside)
    tree = snapshot(base)
    for args in (["maxperf"], ["restore"], ["info", "--json"]):
        result = cli(base, *args)
        assert result.exit_code == 2, (args, result.output)
        assert "symlink" in result.output and str(base / STATE) in result.output, result.output
        assert "sudo rm" in result.output, result.output  # the fix
    assert diff(before, snapshot(outside)) == []
    assert diff(tree, snapshot(base)) == []


def test_symlinked_parent_var_lib_is_refused(tmp_path, outside):
    base = make_board(tmp_path, "tx1")
    (outside / "jetbench").mkdir()
    os.rmdir(base / STATE)
    os.rmdir(base / "var/lib")
    os.symlink(outside, base / "var/lib")
    before = snapshot(outside)
    result = cli(base, "maxperf")
    assert result.exit_code == 2 and str(base / "var/lib") in result.output, result.output
    assert diff(before, snapshot(outside)) == []
    assert (base / GPU_MIN).read_text() == "76800000\n"  # nothing pinned


def test_state_dir_created_when_missing_but_not_by_readers(tmp_path):
    base = make_board(tmp_path, "tx1")
    os.rmdir(base / STATE)
    assert cli(base, "info", "--json").exit_code == 0
    assert not (base / STATE).exists()  # a read-only command creates nothing
    assert cli(base, "maxperf").exit_code == 0
    mode = os.lstat(base / STATE).st_mode
    assert stat.S_ISDIR(mode) and not mode & (stat.S_IWGRP | stat.S_IWOTH)
    assert cli(base, "restore").exit_code == 0


def test_planted_predictable_temporary_symlink_is_never_written_through(tmp_path, outside):
    base = make_board(tmp_path, "tx1")
    # The old name, `.journal.json.<pid>.tmp`: this process's pid is the CliRunner's.
    for pid in (os.getpid(), os.getpid() + 1):
        os.symlink(outside / "precious", base / STATE / f".journal.json.{pid}.tmp")
    before = snapshot(outside)
    assert cli(base, "maxperf").exit_code == 0
    assert diff(before, snapshot(outside)) == []
    journal = base / STATE / "journal.json"
    assert stat.S_ISREG(os.lstat(journal).st_mode)
    assert stat.S_IMODE(os.lstat(journal).st_mode) == 0o644
    assert cli(base, "restore").exit_code == 0
    assert (outside / "precious").read_text() == "precious\n"


def test_planted_journal_symlink_is_refused_then_discarded(tmp_path, outside):
    base = make_board(tmp_path, "tx1")
    target = outside / "journal.json"
    # A well-formed journal elsewhere: restore must not act on it through the link.
    target.write_text(json.dumps(_journal_doc([{"path": GPU_MIN_BOARD, "raw": "998400000\n",
                                                "step": "gpu"}])))
    os.symlink(target, base / STATE / "journal.json")
    before, tree = snapshot(outside), snapshot(base)
    for args in (["restore"], ["maxperf"]):
        result = cli(base, *args)
        assert result.exit_code == 2, result.output
        assert "symbolic link" in result.output and "restore --discard" in result.output
    assert diff(before, snapshot(outside)) == [] and diff(tree, snapshot(base)) == []
    result = cli(base, "restore", "--discard")
    assert result.exit_code == 0, result.output
    aside = [p for p in os.listdir(base / STATE) if p.startswith("journal.json.discarded-")]
    assert len(aside) == 1 and aside[0] in result.output.replace("\n", "")
    assert os.path.islink(base / STATE / aside[0])  # the link moved, its target untouched
    assert diff(before, snapshot(outside)) == []
    assert cli(base, "restore").output.startswith("Nothing to restore")


def test_stale_temporaries_are_removed_links_left_alone(tmp_path, outside):
    base = make_board(tmp_path, "tx1")
    state = base / STATE
    (state / ".journal.json.4242.tmp").write_text('{"half": ')
    (state / ".journal.json.0123456789abcdef.tmp").write_text("")
    os.symlink(outside / "precious", state / ".journal.json.77.tmp")
    (state / "keep.tmp").write_text("not ours\n")
    before = snapshot(outside)
    assert cli(base, "maxperf").exit_code == 0
    assert sorted(os.listdir(state)) == [".journal.json.77.tmp", "journal.json", "keep.tmp"]
    assert cli(base, "restore").exit_code == 0
    assert diff(before, snapshot(outside)) == []


def test_kill9_mid_replace_leaves_a_temporary_that_restore_cleans(tmp_path):
    """SIGSTOP the writer between creating its temporary and renaming it, kill -9 it there."""
    base = make_board(tmp_path, "tx1")
    code = (
        "import os, signal, sys\n"
        "import jetbench.ownership.journal as j\n"
        "real = os.replace\n"
        "def stop_then_replace(*a, **k):\n"
        "    os.kill(os.getpid(), signal.SIGSTOP)\n"
        "    return real(*a, **k)\n"
        "j.os.replace = stop_then_replace\n"
        "from jetbench.cli.main import app\n"
        f"sys.argv = ['jetbench', '--root', {str(base)!r}, 'maxperf']\n"
        "app()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        _, status = os.waitpid(proc.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        temps = [n for n in os.listdir(base / STATE) if n.endswith(".tmp")]
        assert len(temps) == 1 and temps[0].startswith(".journal.json.")
        assert len(temps[0]) == len(".journal.json..tmp") + 16  # a random name, not the pid
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not (base / STATE / "journal.json").exists()  # killed before the first write
    result = run_cli("--root", str(base), "restore")
    assert result.returncode == 0, result.stderr
    assert os.listdir(base / STATE) == []


def test_group_writable_state_dir_only_for_the_jetbench_group(tmp_path, monkeypatch):
    from jetbench.ownership import statedir

    base = make_board(tmp_path, "tx1")
    os.chmod(base / STATE, 0o2775)
    os.chown(base / STATE, 0, 0)  # group root: not the jetbench group
    result = cli(base, "maxperf")
    assert result.exit_code == 2 and "writable by group" in result.output, result.output
    assert "chmod g-w" in result.output and "chgrp jetbench" in result.output
    monkeypatch.setattr(statedir, "_group_name", lambda gid: "jetbench")
    assert statedir.ensure_state_dir(Root(base)) == base / STATE
    os.chmod(base / STATE, 0o777)
    with pytest.raises(Exception, match="writable by every user"):
        statedir.ensure_state_dir(Root(base))


def test_world_writable_parent_is_refused(tmp_path):
    base = make_board(tmp_path, "tx1")
    os.chmod(base / "var/lib", 0o777)
    result = cli(base, "maxperf")
    assert result.exit_code == 2 and "parent" in result.output, result.output
    os.chmod(base / "var/lib", 0o1777)  # sticky, like /tmp: others cannot rename our entries
    assert cli(base, "maxperf").exit_code == 0
    assert cli(base, "restore").exit_code == 0


def _other_group() -> int:
    """A group that is not `jetbench` (the state directory's only trusted group)."""
    import grp

    return next(g.gr_gid for g in grp.getgrall() if g.gr_name not in ("jetbench",))


@pytest.mark.parametrize("parent", ["var", "var/lib"])
def test_a_parent_writable_by_another_group_or_owned_by_another_user_is_refused(tmp_path,
                                                                               parent):
    """Issue 21: README promises parents "not writable by other users": a parent at 0775 of
    some other group, or owned by another uid, is refused (exit 2, naming it and the fix)."""
    base = make_board(tmp_path, "tx1")
    tree = snapshot(base)
    os.chown(base / parent, -1, _other_group())
    os.chmod(base / parent, 0o775)
    result = cli(base, "maxperf")
    assert result.exit_code == 2, result.output
    assert "a parent of the state directory is writable by group" in result.output
    assert f"chmod g-w {base / parent}" in result.output
    os.chmod(base / parent, 0o755)
    if os.geteuid() == 0:  # only root can give a directory away
        os.chown(base / parent, 65534, -1)
        result = cli(base, "maxperf")
        assert result.exit_code == 2, result.output
        assert "a parent of the state directory is owned by uid 65534" in result.output
        os.chown(base / parent, 0, -1)
    os.chown(base / parent, -1, os.getegid())
    assert diff(tree, snapshot(base)) == []  # nothing was written


def test_a_symlinked_board_lock_is_named_with_its_fix(tmp_path, outside):
    base = make_board(tmp_path, "tx1")
    (base / STATE).mkdir(exist_ok=True)
    os.symlink(outside / "precious", base / STATE / "board.lock")
    result = cli(base, "maxperf")
    assert result.exit_code == 2, result.output
    assert "the board lock is a symbolic link" in result.output
    assert f"sudo rm {base / STATE / 'board.lock'}" in result.output
    assert "jetbench group" not in result.output  # not a permission problem
    assert (outside / "precious").read_text() == "precious\n"


@pytest.mark.parametrize("where", ["outside the root", "inside the root"])
def test_a_knob_replaced_by_a_symlink_exits_2_wherever_it_points(tmp_path, outside, where):
    base = make_board(tmp_path, "tx1")
    knob = base / GPU_MIN
    # A value the knob could hold (the simulated kernel reads it too): the original, 76.8 MHz.
    target = outside / "min_freq" if where == "outside the root" else base / "etc/min_freq"
    target.write_text("76800000\n")
    knob.unlink()
    os.symlink(target, knob)
    before = target.read_text()
    result = cli(base, "maxperf")
    assert result.exit_code == 2, result.output
    assert "symbolic link" in result.output or "->" in result.output, result.output
    assert target.read_text() == before
    assert not (base / STATE / "journal.json").exists()


# -- item 7: the journal validated whole --------------------------------------------------------
def _entry(**over):
    e = {"path": GPU_MIN_BOARD, "raw": "76800000\n", "step": "gpu"}
    e.update(over)
    return e


BAD_JOURNALS = {
    "a list": b"[]",
    "a string": b'"x"',
    "entries a number": b'{"entries": 5}',
    "schema but entries a number": json.dumps(_journal_doc(5)).encode(),
    "raw a number": json.dumps(_journal_doc([_entry(raw=5)])).encode(),
    "NUL in a path": json.dumps(_journal_doc([_entry(path=GPU_MIN_BOARD + "\x00x")])).encode(),
    "deep nesting": b"[" * 100000 + b"]" * 100000,
    "deep inside the schema": (b'{"schema": "jetbench.journal/1", "note": ' + b"[" * 50000
                               + b"]" * 50000 + b', "entries": []}'),
    "an entry not an object": json.dumps(_journal_doc(["x"])).encode(),
    "path outside the allowlist": json.dumps(_journal_doc([_entry(path="/etc/passwd")])).encode(),
    "not a knob": json.dumps(_journal_doc([_entry(path="/sys/devices/57000000.gpu/uevent")]))
    .encode(),
    "newline inside raw": json.dumps(_journal_doc([_entry(raw="1\n2\n")])).encode(),
    "duplicate keys": (b'{"schema": "jetbench.journal/1", "entries": [], '
                       b'"entries": [{"path": "/etc/passwd", "raw": "x"}]}'),
    "not UTF-8": b'{"schema": "jetbench.journal/1", "entries": [], "board": "\xff"}',
    "too large": json.dumps(_journal_doc([_entry()] * 1)).encode() + b" " * (1 << 20),
}


@pytest.mark.parametrize("case", sorted(BAD_JOURNALS))
def test_malformed_journal_is_one_message_exit_2(tmp_path, case):
    base = make_board(tmp_path, "tx1")
    journal = base / STATE / "journal.json"
    journal.write_bytes(BAD_JOURNALS[case])
    tree = snapshot(base)
    for args in (["restore"], ["maxperf"], ["apply", "tx1-690mhz"], ["info", "--json"]):
        result = cli(base, *args)
        assert result.exit_code == 2, (case, args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert str(journal) in result.output and "restore --discard" in result.output, \
            result.output
        assert "Traceback" not in result.output
    assert diff(tree, snapshot(base)) == []  # nothing restored, nothing pinned, not extended


def test_maxperf_never_extends_a_journal_with_raw_a_number(tmp_path):
    """The issue's case: maxperf accepted `raw: 5`, then restore crashed."""
    base = make_board(tmp_path, "tx1")
    journal = base / STATE / "journal.json"
    journal.write_text(json.dumps(_journal_doc([_entry(raw=5)])))
    for args in (("maxperf",), ("restore",)):
        result = run_cli("--root", str(base), *args)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr and "restore --discard" in result.stderr
    assert json.loads(journal.read_text())["entries"] == [_entry(raw=5)]
    assert (base / GPU_MIN).read_text() == "76800000\n"


def test_discard_moves_a_bad_journal_aside_then_the_board_works(tmp_path):
    base = make_board(tmp_path, "tx1")
    journal = base / STATE / "journal.json"
    journal.write_bytes(b"[" * 100000)
    result = run_cli("--root", str(base), "restore", "--discard")
    assert result.returncode == 0, result.stderr
    aside = [n for n in os.listdir(base / STATE) if n.startswith("journal.json.discarded-")]
    assert len(aside) == 1 and (base / STATE / aside[0]).read_bytes() == b"[" * 100000
    assert aside[0] in result.stdout.replace("\n", "") and not journal.exists()
    assert run_cli("--root", str(base), "restore", "--discard").stdout.startswith(
        "Nothing to discard")
    assert run_cli("--root", str(base), "maxperf").returncode == 0
    assert run_cli("--root", str(base), "restore").returncode == 0
    assert (base / GPU_MIN).read_text() == "76800000\n"


def test_measure_and_daemon_refuse_a_bad_journal(tmp_path):
    base = make_board(tmp_path, "tx1")
    journal = base / STATE / "journal.json"
    journal.write_text('{"entries": 5}')
    tree = snapshot(base, exclude=("sys/devices/7000c400.i2c",))  # the simulated rails move
    measure = run_cli("--root", str(base), "measure", "--iterations", "1", "--duration", "0.1",
                      "--warmup", "0", "--out", str(tmp_path / "out"), timeout=120)
    assert measure.returncode == 2, measure.stdout + measure.stderr
    assert "restore --discard" in measure.stderr and "Traceback" not in measure.stderr
    daemon = run_cli("--root", str(base), "daemon", "--socket", str(tmp_path / "jb.sock"),
                     timeout=60)
    assert daemon.returncode == 2, daemon.stderr
    assert "restore --discard" in daemon.stderr and "Traceback" not in daemon.stderr
    assert diff(tree, snapshot(base, exclude=("sys/devices/7000c400.i2c",))) == []


def test_a_journal_jetbench_writes_loads_on_every_board_with_the_fan(tmp_path):
    """Every knob a planner writes is in the knob table, so its journal validates."""
    from jetbench.ownership import journal

    from conftest import SIM_BOARDS

    for key in SIM_BOARDS:
        base = make_board(tmp_path, key)
        result = cli(base, "maxperf", "--fan")
        assert result.exit_code == 0, (key, result.output)
        assert journal.load(Root(base)), key
        assert cli(base, "restore").exit_code == 0, key


def test_a_valid_empty_journal_is_removed_by_restore(tmp_path):
    base = make_board(tmp_path, "tx1")
    journal = base / STATE / "journal.json"
    journal.write_text(json.dumps(_journal_doc([])))
    result = cli(base, "restore")
    assert result.exit_code == 0 and "journal removed" in result.output, result.output
    assert not journal.exists()


def test_a_hard_linked_or_fifo_journal_is_refused(tmp_path, outside):
    base = make_board(tmp_path, "tx1")
    journal = base / STATE / "journal.json"
    other = base / "etc/other"  # same filesystem as the journal: a hard link is possible
    other.write_text(json.dumps(_journal_doc([_entry()])))
    os.link(other, journal)
    result = cli(base, "restore")
    assert result.exit_code == 2 and "2 hard links" in result.output, result.output
    journal.unlink()
    os.mkfifo(journal)  # a reader must not block on it
    result = cli(base, "restore")
    assert result.exit_code == 2 and "not a regular file" in result.output, result.output
