"""Issue 39: each command's --help says only what that command does."""

import os

from conftest import REPO, run_cli


def test_time_help_claims_no_power_window():
    # `time` pins no clock and samples no power (docs/workloads.md): its help says neither
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"), COLUMNS="80")
    res = run_cli("time", "--help", env=env)
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split()).lower()
    assert "--workload-python" in text
    assert "power window" not in text and "keeps the clocks" not in text
