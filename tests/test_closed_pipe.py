"""Issue 39: `jetbench sweep | head -1` exits 0: a reader that closed its end of the pipe has
what it wanted (rich's own handler exits 1), and nothing about it is printed on stderr."""

import os
import subprocess
import sys

from conftest import REPO, bound_s, make_board


def test_sweep_into_a_closed_pipe_exits_0(tmp_path):
    board = make_board(tmp_path, "orin-nano")
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
    env.pop("JETBENCH_ROOT", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetbench.cli.main", "--root", str(board), "sweep",
         "--model", "sim:resnet18", "--freq", "306MHz,408MHz", "--duration", "0.3s",
         "--iterations", "3", "--warmup", "0.2s", "--no-plot", "--out", str(tmp_path / "s")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    first = proc.stdout.readline()  # what `head -1` reads, then it closes the pipe
    proc.stdout.close()
    _, err = proc.communicate(timeout=bound_s(300))
    err = err.decode()
    assert b"jetbench sweep" in first
    assert proc.returncode == 0, err
    # (a warning's "standard error" is no error: jetbench's own say `jetbench: error:`)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert "jetbench: error" not in err and "Exception ignored" not in err, err
    # the sweep ran whole before its table: both points written, the clocks put back
    assert len(list((tmp_path / "s").glob("*.json"))) == 2
