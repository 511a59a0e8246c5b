"""New-user messages (issue 13): a bad --root, flag help, hints; real subprocesses."""

import os
import re
import subprocess
import sys

from conftest import make_board, run_cli


def test_root_that_does_not_exist_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "doesnotexist"
    for cmd in ("maxperf", "info"):
        res = run_cli("--root", str(missing), cmd)
        assert res.returncode == 1, (cmd, res.stdout, res.stderr)
        assert f"--root {missing}: no such directory" in res.stderr
        assert "Traceback" not in res.stderr


def test_jetbench_root_without_sys_is_named(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run_cli("info", env=dict(os.environ, JETBENCH_ROOT=str(empty)))
    assert res.returncode == 1
    assert f"JETBENCH_ROOT {empty}: has no sys/ directory" in res.stderr


def test_a_simulated_root_still_works(tmp_path):
    base = make_board(tmp_path, "tx1")
    res = run_cli("--root", str(base), "info")
    assert res.returncode == 0, res.stderr


def test_bare_small_frequency_hints_at_mhz(tmp_path):
    base = make_board(tmp_path, "tx1")
    res = run_cli("--root", str(base), "measure", "--freq", "690", "--model", "alexnet",
                  "--device", "cpu", "--out", str(tmp_path / "o"))
    assert res.returncode == 1, res.stderr
    assert "did you mean 690MHz?" in res.stderr
    assert not (base / "var/lib/jetbench/journal.json").exists()


_NO_TORCH = """
import sys
from typer.testing import CliRunner
from jetbench.cli.main import app
res = CliRunner().invoke(app, sys.argv[1:])
print("torch loaded" if "torch" in sys.modules else "torch not loaded")
print(res.output)
"""


def _in_process(*args):
    return subprocess.run([sys.executable, "-c", _NO_TORCH, *args], capture_output=True,
                          text=True, timeout=60).stdout


def test_misspelt_model_is_suggested_before_torch_loads(tmp_path):
    out = _in_process("time", "--model", "alexnnet", "--device", "cpu")
    assert "unknown model: 'alexnnet' (did you mean 'alexnet'?)" in out
    assert "torch not loaded" in out
    base = make_board(tmp_path, "tx1")
    out = _in_process("--root", str(base), "measure", "--model", "resnet5O", "--device", "cpu",
                      "--out", str(tmp_path / "o"))
    assert "did you mean 'resnet50'?" in out and "torch not loaded" in out


def test_batch_zero_says_sizes_start_at_1():
    for cmd in ("time", "measure"):
        res = run_cli(cmd, "--batch", "0", "--model", "alexnet", "--device", "cpu")
        assert res.returncode == 1
        assert "batch sizes start at 1" in res.stderr, (cmd, res.stderr)


def test_flags_show_no_bool_type_in_help():
    res = run_cli("measure", "--help", env=dict(os.environ, COLUMNS="120"))
    assert res.returncode == 0
    assert "--keep-clocks" in res.stdout
    assert "<bool>" not in res.stdout
    # options that take a value show what to give, in the user's words
    assert re.search(r"--iterations\s+-n\s+N\s", res.stdout), res.stdout


def test_help_groups_options_gives_examples_and_human_placeholders():
    wide = dict(os.environ, COLUMNS="100")
    top = run_cli("--help", env=wide).stdout
    panels = [p for p in ("Start here", "Clocks", "Measure", "On a board") if p in top]
    assert panels == ["Start here", "Clocks", "Measure", "On a board"]
    assert top.index("Start here") < top.index("│ sim ") < top.index("─ Clocks")
    assert len(top.splitlines()) < 60, top  # one line per command, not its whole docstring
    for cmd in ("measure", "sweep", "monitor", "time", "apply", "report"):
        page = run_cli(cmd, "--help", env=wide).stdout
        assert "Examples:" in page and f"jetbench {cmd}" in page.split("Examples:")[1], cmd
        assert not re.search(r"<list\[|<path>|\{directory\}", page), (cmd, page)
    measure = run_cli("measure", "--help", env=wide).stdout
    for panel in ("Workload", "Clocks", "Power", "Timing window", "Output", "Several devices"):
        assert f"─ {panel} " in measure, panel


def test_install_service_dry_run_says_so(tmp_path):
    res = run_cli("install-service", "--dest", str(tmp_path), "--dry-run", "--executable",
                  "/usr/bin/jetbench")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == "dry run: nothing below was done"
    assert list(tmp_path.iterdir()) == []


def test_sim_run_says_what_it_does_and_how_to_stop(tmp_path):
    base = make_board(tmp_path, "tx1")
    res = run_cli("sim", "run", str(base), "--duration", "0.2")
    assert res.returncode == 0, res.stderr
    assert f"simulating the kernel of {base} for 0.2 s" in res.stderr
    res = run_cli("sim", "run", "--help")
    assert "Ctrl-C" in res.stdout


def test_status_says_simulated(monkeypatch):
    from typer.testing import CliRunner

    import jetbench.ownership.client as client
    from jetbench.cli.main import app

    reply = {"ok": True, "summary": "holding tx1-690mhz", "simulated": True,
             "board": {"model": "NVIDIA Jetson TX1", "family": "tx1"}, "profile": "tx1-690mhz",
             "started": "now", "pid": 1, "counters": {}, "clocks": [], "rails": []}
    monkeypatch.setattr(client, "request", lambda socket, cmd: reply)
    res = CliRunner().invoke(app, ["status", "--socket", "/nonexistent"],
                             env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    assert "SIMULATED" in res.output


def test_a_bad_freq_is_said_in_the_options_given_with_what_to_give_and_leaves_nothing(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    for cmd, freq in (("measure", "690MHz"), ("measure", "5GHz"), ("sweep", "690MHz")):
        out = tmp_path / f"out-{cmd}-{freq}"
        res = run_cli("--root", str(base), cmd, "--model", "sim:alexnet", "--freq", freq,
                      "--out", str(out))
        assert res.returncode == 1, res.stderr
        assert res.stderr.startswith("jetbench: error: --freq: "), res.stderr
        assert "profile measure" not in res.stderr and "min_freq" not in res.stderr
        assert "nearest table entries are" in res.stderr and "max is 624.8 MHz" in res.stderr
        assert not out.exists(), (cmd, freq)  # a refused request creates nothing
