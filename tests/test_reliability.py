"""Rejected writes roll back their step; kill -9 at any moment leaves a board `restore` brings
back byte for byte; errors are messages with documented exit codes, never tracebacks."""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from jetbench.cli.main import app

from conftest import REPO, bound_s, diff, make_board, run_cli, sigint_as_on_a_terminal, snapshot

runner = CliRunner()


def _make_unwritable(path):
    """A real OS error on write (EISDIR), for root and non-root alike: the file becomes a
    directory, as a kernel knob that refuses the write would."""
    saved = path.read_bytes()
    path.unlink()
    path.mkdir()
    return saved


def _heal(path, saved):
    path.rmdir()
    path.write_bytes(saved)


class _ReadOnly:
    """A file that reads but refuses writes with a real OS error: chmod 0444 for a normal user;
    for root (who ignores modes) the immutable attribute, where the filesystem has one."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        if os.geteuid() != 0:
            os.chmod(self.path, 0o444)
            return self
        done = subprocess.run(["chattr", "+i", str(self.path)], capture_output=True)
        if done.returncode != 0:
            pytest.skip("root on a filesystem without chattr +i: cannot make a file read-only")
        return self

    def __exit__(self, *exc):
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(self.path)], check=True)
        else:
            os.chmod(self.path, 0o644)


def test_rejected_write_rolls_back_the_step(tmp_path):
    base = make_board(tmp_path, "tx1")
    policy = base / "sys/devices/system/cpu/cpufreq/policy0"
    before = snapshot(base)
    # The CPU step writes governor, min, then setspeed: make the last one fail.
    with _ReadOnly(policy / "scaling_setspeed"):
        result = runner.invoke(app, ["--root", str(base), "maxperf"])
        assert result.exit_code == 2, result.output
        assert "rolled back" in result.output and "scaling_setspeed" in result.output
        assert "permission denied" in result.output and "Traceback" not in result.output
        # The step's earlier writes were undone.
        assert (policy / "scaling_governor").read_text() == "schedutil\n"
        assert (policy / "scaling_min_freq").read_text() == "102000\n"
    # Steps before it (none here) or after it never ran; restore leaves the tree as it was.
    assert runner.invoke(app, ["--root", str(base), "restore"]).exit_code == 0
    assert diff(before, snapshot(base)) == []


def test_failure_in_a_later_step_keeps_journal_for_restore(tmp_path):
    base = make_board(tmp_path, "tx2")
    before = snapshot(base)
    lock = base / "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked"
    with _ReadOnly(lock):
        result = runner.invoke(app, ["--root", str(base), "maxperf"])
    assert result.exit_code == 2
    # CPU and GPU steps went through; the journal says how to undo them.
    assert (base / "var/lib/jetbench/journal.json").exists()
    assert (base / "sys/devices/17000000.gp10b/railgate_enable").read_text() == "0\n"
    assert runner.invoke(app, ["--root", str(base), "restore"]).exit_code == 0
    assert diff(before, snapshot(base)) == []


def test_restore_keeps_journal_when_a_write_fails(tmp_path):
    base = make_board(tmp_path, "nano")
    before = snapshot(base)
    assert runner.invoke(app, ["--root", str(base), "maxperf"]).exit_code == 0
    railgate = base / "sys/devices/57000000.gpu/railgate_enable"
    saved = _make_unwritable(railgate)
    result = runner.invoke(app, ["--root", str(base), "restore"])
    assert result.exit_code == 2 and "journal is kept" in result.output
    assert (base / "var/lib/jetbench/journal.json").exists()
    _heal(railgate, saved)
    assert runner.invoke(app, ["--root", str(base), "restore"]).exit_code == 0
    assert diff(before, snapshot(base)) == []


_CHILD = """
import sys
from jetbench.cli.main import app
import jetbench.cli.clocks, jetbench.profiles.apply, jetbench.ownership.journal
sys.stdout.write("ready\\n")
sys.stdout.flush()
sys.stdin.readline()
app(["--root", sys.argv[1], "maxperf", "--fan"])
"""


def _child(base):
    """maxperf in a child that has done its imports and waits for "go" (an event: on a loaded
    machine the imports alone can take longer than any fixed sleep)."""
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(base)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert child.stdout.readline() == b"ready\n"
    return child


@pytest.mark.parametrize("board", ["tx1-r24", "xavier-agx", "thor", "orin-nano-super"])
def test_kill9_at_random_points_then_restore_is_exact(tmp_path, board):
    pristine = make_board(tmp_path, board)
    before = snapshot(pristine)
    # How long maxperf takes once the interpreter is up: kills are spread over that span.
    probe = tmp_path / "probe"
    shutil.copytree(pristine, probe, symlinks=True)
    child = _child(probe)
    t0 = time.monotonic()
    child.communicate(b"go\n", timeout=bound_s(60))
    span = time.monotonic() - t0
    rng = random.Random(1234)
    interrupted = 0
    # 8 kills at least; on a loaded machine the span varies from run to run, so more (up to
    # 32) until one has landed between the first write and the end
    for k in range(32):
        if k >= 8 and interrupted:
            break
        base = tmp_path / f"run{k}"
        shutil.copytree(pristine, base, symlinks=True)
        child = _child(base)
        child.stdin.write(b"go\n")
        child.stdin.flush()
        time.sleep(rng.uniform(0, span))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        journal = base / "var/lib/jetbench/journal.json"
        if journal.exists() and diff(before, snapshot(base, exclude=("var",))):
            interrupted += 1
        result = run_cli("--root", str(base), "restore", cwd=REPO)
        assert result.returncode == 0, result.stderr
        assert diff(before, snapshot(base)) == [], f"run {k}"
    assert interrupted >= 1, "no kill landed between the first write and the end"


def test_cli_errors_exit_codes_and_no_traceback(tmp_path):
    base = make_board(tmp_path, "tx1")
    cases = [
        (["--root", str(base), "apply", "no-such-profile"], 1, "no profile named"),
        (["--root", str(base), "apply", "orin-agx-816mhz"], 1, "[match]"),
        (["sim", "create", "--board", "tx9", str(tmp_path / "x")], 1, "unknown simulated board"),
        (["sim", "create", "--board", "tx1", str(base)], 1, "not empty"),
        (["--root", str(base), "info", "--bogus"], 1, "No such option"),
        (["frobnicate"], 1, "No such command"),
    ]
    for args, code, message in cases:
        result = run_cli(*args, cwd=REPO)
        assert result.returncode == code, (args, result.stderr)
        assert message in result.stderr + result.stdout, (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_cli_hardware_error_is_exit_2_in_a_subprocess(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    with _ReadOnly(base / "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked"):
        result = run_cli("--root", str(base), "maxperf", cwd=REPO)
    assert result.returncode == 2
    assert "jetbench: error:" in result.stderr and "Traceback" not in result.stderr


def test_sigint_is_exit_130(tmp_path):
    base = make_board(tmp_path, "tx1")
    proc = subprocess.Popen([sys.executable, "-m", "jetbench.cli.main", "sim", "run", str(base)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                            preexec_fn=sigint_as_on_a_terminal)
    # Wait for an event, not a guess: the simulated kernel runs (inside the command, past
    # Python's start-up) once it answers a governor change.
    policy = base / "sys/devices/system/cpu/cpu0/cpufreq"
    (policy / "scaling_governor").write_text("performance\n")
    top = (policy / "cpuinfo_max_freq").read_text().strip()
    deadline = time.monotonic() + bound_s(60)
    while (policy / "scaling_cur_freq").read_text().strip() != top:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the simulated kernel never ran"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert b"interrupted" in err and b"Traceback" not in err


def test_info_json_from_a_subprocess_with_env_root(tmp_path):
    base = make_board(tmp_path, "tx2")
    env = dict(os.environ, JETBENCH_ROOT=str(base))
    result = run_cli("info", "--json", cwd=REPO, env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["board"]["family"] == "tx2"
