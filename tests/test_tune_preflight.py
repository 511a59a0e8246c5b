"""Issue 62, item 3: tune fails before its first trial where a meter or the workload cannot be
opened (exit 2, one message, the board untouched, no study left behind), and a study whose
every trial failed is an error, not an answer."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from helpers.daemons import board_state

from conftest import REPO, bound_s, make_board

ENV = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
WINDOW = ("--duration", "0.3", "--warmup", "0.1", "--iterations", "3")


def _tune(base: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jetbench", "--root", str(base), "tune",
                           *WINDOW, "--out", str(out), "--no-plot", "--knobs", "gpu",
                           "--budget", "3", *args], capture_output=True, text=True, env=ENV,
                          timeout=bound_s(300))


def _closed_port() -> int:
    """A TCP port on this host with nothing listening (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_message(err: str) -> None:
    assert "Traceback" not in err
    assert "trial 1/" not in err  # no trial ran
    assert err.count("jetbench: error:") == 1


def test_a_meter_that_cannot_be_opened_stops_tune_before_its_first_trial(tmp_path):
    base = make_board(tmp_path, "tx1")
    before = board_state(base)
    out = tmp_path / "tuned"
    port = _closed_port()
    done = _tune(base, out, "--model", "sim:alexnet", "--meter", f"scpi:socket://127.0.0.1:{port}")
    assert done.returncode == 2, done.stderr
    _one_message(done.stderr)
    assert "a meter cannot be opened" in done.stderr
    assert f"127.0.0.1:{port}" in done.stderr and "no trial was run" in done.stderr
    assert not out.exists()  # no study, no trial directory: nothing to resume over
    assert board_state(base) == before


def test_a_command_that_cannot_be_started_stops_tune_before_its_first_trial(tmp_path):
    base = make_board(tmp_path, "tx1")
    before = board_state(base)
    out = tmp_path / "tuned"
    missing = tmp_path / "no-such-program"
    done = _tune(base, out, "--cmd", f"{missing} --iterations 10",
                 "--throughput-from", "trtexec")
    assert done.returncode == 2, done.stderr
    _one_message(done.stderr)
    assert "--cmd cannot be started" in done.stderr and "no such file" in done.stderr
    assert not out.exists()
    assert board_state(base) == before
    on_path = _tune(base, out, "--cmd", "jetbench-no-such-program-62 --x",
                    "--throughput-from", "trtexec")
    assert on_path.returncode == 2 and "not found on PATH" in on_path.stderr, on_path.stderr


def test_a_study_whose_every_trial_failed_is_an_error_with_its_trials_kept(tmp_path):
    base = make_board(tmp_path, "tx1")
    before = board_state(base)
    out = tmp_path / "tuned"
    done = _tune(base, out, "--cmd", "sh -c 'exit 3'", "--throughput-from", "trtexec")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "every one of the study's 3 trial(s) failed" in done.stderr
    assert "exited with status 3" in done.stderr
    doc = json.loads((out / "tune.json").read_text())  # written first: nothing lost
    assert [t["state"] for t in doc["trials"]] == ["FAIL"] * 3 and doc["best"] is None
    assert board_state(base) == before
