"""Issue 39: `sweep --resume` with a longer --duration than the resumed points had says that it
mixes window lengths (it was silent), naming the points; a resume with the same --duration
does not."""

import os
import subprocess
import sys

from conftest import REPO, bound_s, make_board


def _sweep(board, out, duration, *extra):
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
    env.pop("JETBENCH_ROOT", None)
    return subprocess.run(
        [sys.executable, "-m", "jetbench.cli.main", "--root", str(board), "sweep",
         "--model", "sim:resnet18", "--freq", "306MHz,408MHz", "--duration", duration,
         "--iterations", "3", "--warmup", "0.2s", "--no-plot", "--out", str(out), *extra],
        capture_output=True, text=True, timeout=bound_s(300), env=env)


def test_resume_with_another_window_says_so(tmp_path):
    board = make_board(tmp_path, "orin-nano")
    out = tmp_path / "s"
    first = _sweep(board, out, "0.3s", "--freq", "306MHz")  # the last --freq wins: one point
    assert first.returncode == 0, first.stderr
    same = _sweep(board, out, "0.3s", "--resume")
    assert same.returncode == 0, same.stderr
    assert "mixes window lengths" not in same.stderr
    # a window of 0.3 s (and a little more) is shorter than the 1.5 s asked now
    longer = _sweep(board, out, "1.5s", "--resume")
    assert longer.returncode == 0, longer.stderr
    assert "--resume mixes window lengths: 2 resumed point(s)" in longer.stderr, longer.stderr
    assert "gpu306mhz" in longer.stderr and "gpu408mhz" in longer.stderr
