"""measure / report through the real CLI in subprocesses: exit codes, Ctrl-C and kill -9
(then `jetbench restore`) leave the board as it was, the table and plots come out."""

import json
import os
import signal
import subprocess
import sys

from helpers.processes import FAST, start_measure, wait_for_pin, wait_for_window
from helpers.workloads import board_snapshot, write_tiny

from jetbench.report.plots import png_size
from jetbench.sim.meters import sim_for

from conftest import REPO, diff, jetbench_env, make_board, run_cli


def test_ctrl_c_restores_the_clocks(tmp_path):
    write_tiny(tmp_path)
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    proc = start_measure(tmp_path, base)
    wait_for_window(proc, base, tmp_path)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert b"Traceback" not in err
    assert not (base / "var/lib/jetbench/journal.json").exists()
    assert diff(before, board_snapshot(base, "tx1")) == []
    assert not list((tmp_path / "out").glob("*.json"))  # no result for an interrupted run


def test_ctrl_c_while_torch_loads_still_exits_130(tmp_path):
    """Ctrl-C right after the pin lands while torch is being imported: it is held until the
    import ends (a KeyboardInterrupt inside torch's C++ initialisation made CPython die of
    SIGINT after the restore, 1 run in 6), then the clocks are restored and the exit is 130."""
    write_tiny(tmp_path)
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    proc = start_measure(tmp_path, base)
    wait_for_pin(proc, base)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"Traceback" not in err
    assert not (base / "var/lib/jetbench/journal.json").exists()
    assert diff(before, board_snapshot(base, "tx1")) == []


def test_sigterm_ends_a_measurement_like_ctrl_c(tmp_path):
    """SIGTERM inside the window of the network running in this process: raised exactly there
    (tests/interrupt_at.py, measure's hook point), not at a guessed moment that could be the
    window's end; every other boundary is in test_interrupt_boundaries.py."""
    write_tiny(tmp_path)
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    env = dict(jetbench_env(), INTERRUPT_AT="window-open:SIGTERM")
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests/interrupt_at.py"), "--root", str(base), "measure",
         *FAST, "--freq", "690MHz", "--duration", "60", "--out", str(tmp_path / "out")],
        cwd=tmp_path, capture_output=True, env=env, stdin=subprocess.DEVNULL, timeout=120)
    err = proc.stderr
    assert proc.returncode == 130, err
    assert b"interrupt_at: SIGTERM" in err and b"Traceback" not in err
    assert not (base / "var/lib/jetbench/journal.json").exists()
    assert diff(before, board_snapshot(base, "tx1")) == []
    assert not list((tmp_path / "out").glob("*.json"))


def test_kill9_then_restore_is_exact(tmp_path):
    write_tiny(tmp_path)
    base = make_board(tmp_path, "tx1-r24")
    before = board_snapshot(base, "tx1-r24")
    proc = start_measure(tmp_path, base, "--cpu-freq", "max", "--emc-freq", "max")
    wait_for_window(proc, base, tmp_path)
    assert diff(before, board_snapshot(base, "tx1-r24"))  # pinned right now
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    result = run_cli("--root", str(base), "restore", cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert diff(before, board_snapshot(base, "tx1-r24")) == []
    out = tmp_path / "out"
    assert not out.exists() or not [p for p in out.iterdir() if not p.name.startswith(".")]


def test_window_too_short_exit_3_with_hint(tmp_path):
    write_tiny(tmp_path)
    base = make_board(tmp_path, "tx1")
    with sim_for("scpi", 5.0) as meter:  # read once a second: a 0.3 s window is 4x too short
        result = subprocess.run(
            [sys.executable, "-m", "jetbench.cli.main", "--root", str(base), "measure", *FAST,
             "--meter", "auto", "--meter", meter.spec + "?interval=1s&timeout=5s",
             "--duration", "0.3",
             "--out", str(tmp_path / "out")],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, env=jetbench_env())
    assert result.returncode == 3, result.stderr
    assert "img/s/W refused" in result.stderr and "--duration" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (base / "var/lib/jetbench/journal.json").exists()


def test_measure_then_report_table_markdown_plots_and_compare(tmp_path):
    write_tiny(tmp_path)
    base = make_board(tmp_path, "tx1")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "jetbench.cli.main", "--root", str(base), "measure", *FAST,
         "--freq", "690MHz", "--precision", "fp32", "--batch", "1,2", "--duration", "0.3",
         "--regulator-efficiency", "0.8", "--idle", "0.2", "--out", str(out), "--plot"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180, env=jetbench_env())
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "SIMULATED" in text
    for row in ("Performance (img/s)", "Power (W): VDD_IN, module input; module, measured",
                "Performance/W (img/s/W): VDD_IN; module, measured", "ESTIMATE", "691.2 MHz"):
        assert row in text, row
    names = sorted(p.name for p in out.iterdir())
    assert names == ["jb_tinynet_tiny-fp32-b1-gpu691mhz.csv",
                     "jb_tinynet_tiny-fp32-b1-gpu691mhz.json",
                     "jb_tinynet_tiny-fp32-b1-gpu691mhz.trace.png",
                     "jb_tinynet_tiny-fp32-b2-gpu691mhz.csv",
                     "jb_tinynet_tiny-fp32-b2-gpu691mhz.json",
                     "jb_tinynet_tiny-fp32-b2-gpu691mhz.trace.png"]
    assert png_size(out / names[2]) == (900, 500)

    md = run_cli("report", str(out), "--markdown", cwd=REPO)
    assert md.returncode == 0, md.stderr
    assert "SIMULATED" in md.stdout and "| Performance (img/s) |" in md.stdout
    plots = tmp_path / "plots"
    rep = run_cli("report", str(out), "--plot", str(plots), cwd=REPO)
    assert rep.returncode == 0, rep.stderr
    assert (plots / "throughput_vs_batch.png").is_file()
    assert len(list(plots.glob("*.trace.png"))) == 2

    a, b = out / names[1], out / names[4]
    cmp = run_cli("report", str(a), "--compare", str(b), "--json", cwd=REPO)
    assert cmp.returncode == 0, cmp.stderr
    doc = json.loads(cmp.stdout)
    metrics = {c["metric"]: c for c in doc["changes"]}
    assert metrics["GPU clock (MHz)"]["verdict"] == "same"
    assert metrics["img/s"]["a"] > 0 and metrics["img/s"]["b"] > 0
    assert any("different batch" in c for c in doc["caveats"])
    bad = run_cli("report", str(tmp_path / "nope.json"), cwd=REPO)
    assert bad.returncode == 1 and "no such result file" in bad.stderr
