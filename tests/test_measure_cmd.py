"""`jetbench measure --cmd` / `sweep --cmd` through the real CLI on a simulated TX1: fake
programs (tests/fake_commands/) print trtexec's summary, an LLM client's eval rate, a
DeepStream fps sink's line, or nothing; the clocks are pinned and restored, the output is
streamed, failures exit 3 with the output's tail, Ctrl-C ends the command's process group."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.workloads import board_snapshot

from conftest import REPO, bound_s, diff, make_board, run_cli, sigint_as_on_a_terminal, wait_until

FAKES = Path(__file__).parent / "fake_commands"
PY = sys.executable
JOURNAL = "var/lib/jetbench/journal.json"


def fake(name, *args):
    return " ".join([PY, str(FAKES / name), *args])


def measure_cmd(tmp_path, base, cmd, *extra, out="out"):
    return run_cli("--root", str(base), "measure", "--freq", "690MHz", "--cmd", cmd,
                   "--duration", "0.3s", "--out", str(tmp_path / out), *extra)


def only_result(tmp_path, out="out"):
    files = sorted((tmp_path / out).glob("*.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def test_trtexec_images_per_s_is_qps_times_the_shapes_batch(tmp_path):
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    r = measure_cmd(tmp_path, base, fake("fake_trtexec.py", "--load-s=0.5", "--run-s=0.6",
                                         "--shapes=input:8x3x224x224"),
                    "--throughput-from", "trtexec")
    assert r.returncode == 0, r.stderr
    assert "Throughput: 411.25 qps" in r.stdout  # streamed through, not swallowed
    assert "Performance (img/s)" in r.stdout
    doc = only_result(tmp_path)
    thr, eff = doc["throughput"], doc["efficiency"]
    assert thr["items_per_s"] == 411.25 * 8 == thr["images_per_s"]
    assert thr["unit"] == "images" and thr["qps"] == 411.25
    assert thr["latency_ms"]["p50"] == 2.375 and thr["latency_ms"]["p99"] == 2.8
    assert thr["gpu_compute_ms"]["mean"] == 2.25
    watts = doc["power"]["total"]["mean_w"]
    assert watts > 0
    assert abs(eff["items_per_j"] - 3290.0 / watts) < 1e-8 * eff["items_per_j"]  # 9 digits stored
    assert eff["images_per_j"] == eff["items_per_j"]
    assert doc["workload"]["batch"] == 8 and doc["workload"]["framework"] == "command"
    cmd = doc["command"]
    assert cmd["exit_code"] == 0 and cmd["argv"][-1] == "--shapes=input:8x3x224x224"
    assert cmd["run_s"] >= 0.5 + 0.6 + 0.2
    assert any("Throughput: 411.25 qps" in line for line in cmd["output_tail"])
    # the window is trtexec's timed span (0.6 s), not its engine loading nor its teardown
    window = doc["power"]["window"]
    assert thr["inference_s"] == 0.6 and "timed queries" in thr["window"]
    assert window["duration_s"] == pytest.approx(0.6)
    phases = doc["power"]["phases_s"]
    assert window["start_s"] - phases["timed_start"] >= 0.5  # after the engine "loaded"
    assert window["start_s"] + 0.6 <= phases["timed_end"] - 0.15  # before its 0.2 s teardown
    assert doc["settings"]["applied"]["gpu_hz"] == 691200000
    assert doc["validity"]["valid"] is True
    assert not (base / JOURNAL).exists()
    assert diff(before, board_snapshot(base, "tx1")) == []


def test_llm_tokens_from_a_regex_last_match_on_stderr(tmp_path):
    base = make_board(tmp_path, "tx1")
    r = measure_cmd(tmp_path, base, fake("fake_llm_bench.py", "0.6"),
                    "--throughput-from", r"regex:^eval rate: +([0-9.]+) tokens/s",
                    "--unit", "tokens")
    assert r.returncode == 0, r.stderr
    assert "eval rate:            17.25 tokens/s" in r.stderr  # its stderr stays stderr
    assert "Performance (tokens/s)" in r.stdout and "tokens/J" in r.stdout
    assert "img/s" not in r.stdout
    doc = only_result(tmp_path)
    assert doc["throughput"]["items_per_s"] == 17.25
    assert doc["throughput"]["unit"] == "tokens"
    assert "images_per_s" not in doc["throughput"]
    eff = doc["efficiency"]
    assert "images_per_j" not in eff
    # both stored to 9 significant digits
    assert eff["items_per_j"] == pytest.approx(17.25 / doc["power"]["total"]["mean_w"], rel=1e-8)
    assert all("images_per_j" not in p and p["items_per_j"] > 0 for p in eff["by_point"])
    # what would lower the uncertainty, said for a command from the start (measure's layer
    # once rewrote its sentences after the fact): no --iterations, no per-iteration basis
    unc = eff["uncertainty"]
    assert "throughput: unknown (a command reports no per-iteration times" in unc["basis"]
    assert not any("--iterations" in line for line in unc["lower_it"]), unc


def test_deepstream_fps_sink_frames_and_json_output_stays_clean(tmp_path):
    base = make_board(tmp_path, "tx1")
    r = measure_cmd(tmp_path, base, fake("fake_fpsdisplaysink.py", "0.6"),
                    "--throughput-from", r"regex:average: ([0-9.]+)", "--unit", "frames",
                    "--json")
    assert r.returncode == 0, r.stderr + r.stdout  # the JSON says why a result is invalid
    printed = json.loads(r.stdout)  # the command's stdout went to stderr under --json
    assert "last-message = rendered: 31" in r.stderr
    doc = printed["results"][0]
    assert doc["throughput"]["items_per_s"] == 30.12 and doc["throughput"]["unit"] == "frames"


def test_items_rate_is_n_over_the_run_time_and_cmd_log_takes_the_output(tmp_path):
    base = make_board(tmp_path, "tx1")
    log = tmp_path / "cmd.log"
    r = measure_cmd(tmp_path, base, fake("fake_work.py", "0.6", "0", "processed-120-files"),
                    "--throughput-from", "items:120", "--cmd-log", str(log))
    assert r.returncode == 0, r.stderr
    assert "processed-120-files" not in r.stdout + r.stderr
    assert "processed-120-files" in log.read_text()
    doc = only_result(tmp_path)
    run_s = doc["command"]["run_s"]
    assert 0.6 <= run_s < 5
    assert doc["throughput"]["items_per_s"] == pytest.approx(120 / run_s, rel=1e-8)  # 9 digits
    assert doc["throughput"]["window"] == "the command's run"
    assert abs(doc["power"]["window"]["duration_s"] - run_s) < 0.1
    assert doc["command"]["log"] == str(log)


def test_a_failing_command_exits_3_with_its_tail_and_the_clocks_restored(tmp_path):
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    r = measure_cmd(tmp_path, base, fake("fake_work.py", "0.1", "2"),
                    "--throughput-from", "trtexec")
    assert r.returncode == 3, r.stderr
    assert "exited with status 2" in r.stderr
    assert "| error: the engine file is corrupt" in r.stderr  # the tail, in the message
    assert "Traceback" not in r.stderr
    assert not list((tmp_path / "out").glob("*.json"))
    assert not (base / JOURNAL).exists()
    assert diff(before, board_snapshot(base, "tx1")) == []


def test_a_command_with_no_match_exits_3(tmp_path):
    base = make_board(tmp_path, "tx1")
    r = measure_cmd(tmp_path, base, fake("fake_work.py", "0.4", "0", "speed-unknown"),
                    "--throughput-from", r"regex:([0-9.]+) tokens/s", "--unit", "tokens")
    assert r.returncode == 3, r.stderr
    assert "no line matched regex" in r.stderr and "| speed-unknown" in r.stderr
    assert not (base / JOURNAL).exists()


def test_a_command_shorter_than_the_window_is_written_invalid_exit_3(tmp_path):
    base = make_board(tmp_path, "tx1")
    r = run_cli("--root", str(base), "measure", "--freq", "690MHz", "--duration", "2s",
                "--cmd", fake("fake_work.py", "0.2"), "--throughput-from", "items:10",
                "--out", str(tmp_path / "out"))
    assert r.returncode == 3, r.stderr
    doc = only_result(tmp_path)
    assert doc["validity"]["valid"] is False
    assert any("shorter than the window needs (--duration 2s)" in x
               for x in doc["validity"]["reasons"])
    assert doc["efficiency"]["items_per_j"] is None and doc["efficiency"]["images_per_j"] is None
    assert doc["throughput"]["items_per_s"] > 0  # the figure is kept, its efficiency is not
    assert "INVALID" in r.stderr


def test_a_missing_program_is_a_usage_error_and_nothing_stays_pinned(tmp_path):
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    r = measure_cmd(tmp_path, base, str(tmp_path / "no-such-program"),
                    "--throughput-from", "items:1")
    assert r.returncode == 1, r.stderr
    assert "cannot start" in r.stderr
    assert diff(before, board_snapshot(base, "tx1")) == []


def test_option_mistakes_exit_1_before_anything_runs(tmp_path):
    base = make_board(tmp_path, "tx1")
    for args in (["--throughput-from", "trtexec"],  # without --cmd
                 ["--cmd", "true"],  # without --throughput-from
                 ["--cmd", "true", "--throughput-from", "items:1", "--model", "resnet18"],
                 ["--cmd", "true", "--throughput-from", "items:1", "--unit", "watts"],
                 ["--cmd", "true", "--throughput-from", "items:1", "--batch", "1,2"]):
        r = run_cli("--root", str(base), "measure", *args, "--out", str(tmp_path / "o"))
        assert r.returncode == 1, (args, r.stderr)
        assert not (base / JOURNAL).exists()


def test_sweep_runs_the_command_once_per_clock_and_records_a_failure(tmp_path):
    base = make_board(tmp_path, "tx1")
    # a 1.5 s run, 1 s window: a gap of tens of ms in the sampler's reads on a loaded machine
    # stays well inside the 90% coverage a window needs (0.4 s runs were refused: 86.9%)
    r = run_cli("--root", str(base), "sweep", "--freq", "614MHz,691MHz", "--no-plot",
                "--cmd", fake("fake_llm_bench.py", "1.5"), "--duration", "1s",
                "--throughput-from", r"regex:eval rate: +([0-9.]+) tokens/s", "--unit", "tokens",
                "--out", str(tmp_path / "sweep"))
    assert r.returncode == 0, r.stderr
    docs = [json.loads(p.read_text()) for p in sorted((tmp_path / "sweep").glob("*.json"))]
    assert sorted(d["settings"]["applied"]["gpu_hz"] for d in docs) == [614400000, 691200000]
    assert all(d["throughput"]["items_per_s"] == 17.25 for d in docs)
    assert "tokens/J" in r.stdout
    r = run_cli("--root", str(base), "sweep", "--freq", "614MHz", "--no-plot",
                "--cmd", fake("fake_work.py", "0.1", "1"), "--throughput-from", "items:1",
                "--out", str(tmp_path / "failed"))
    doc = json.loads(next((tmp_path / "failed").glob("*.json")).read_text())
    assert doc["status"] == "failed" and "exited with status 1" in doc["message"]


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie waiting for its reaper has ended
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True


@pytest.mark.parametrize("sig,stubborn", [(signal.SIGINT, False), (signal.SIGTERM, False),
                                          (signal.SIGINT, True)])
def test_ctrl_c_ends_the_command_group_restores_the_clocks_exit_130(tmp_path, sig, stubborn):
    """Ctrl-C or SIGTERM: the command and its child end (SIGKILL after 5 s for one that
    ignores SIGTERM), the clocks are restored, exit 130, no result."""
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    marker = tmp_path / "running"
    hang = fake("fake_hang.py", str(marker), *(["--stubborn"] if stubborn else []))
    proc = subprocess.Popen(
        [PY, "-m", "jetbench.cli.main", "--root", str(base), "measure", "--freq", "690MHz",
         "--cmd", hang, "--throughput-from", "items:1",
         "--out", str(tmp_path / "out")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(REPO / "agent")), preexec_fn=sigint_as_on_a_terminal)
    deadline = time.monotonic() + bound_s(60)
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    pids = [int(x) for x in marker.read_text().split()]
    assert (base / JOURNAL).exists()  # pinned while it runs
    t_signal = time.monotonic()
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    if stubborn:  # the grace period before SIGKILL was waited for
        assert time.monotonic() - t_signal >= 5.0
    assert b"Traceback" not in err
    wait_until(lambda: all(_gone(p) for p in pids))
    assert all(_gone(p) for p in pids), pids  # the command and its own child
    assert not (base / JOURNAL).exists()
    assert diff(before, board_snapshot(base, "tx1")) == []
    assert not list((tmp_path / "out").glob("*.json"))


def test_an_interrupt_as_the_command_starts_still_ends_its_group(tmp_path, monkeypatch):
    """A Ctrl-C that lands right after the command started (while jetbench starts its output
    readers; seen under load: the test sent it as soon as the command had written its marker)
    ends the command's process group too: nothing is left running."""
    import threading

    from jetbench.workload.command import run as command
    from jetbench.workload.command.spec import command_spec

    marker = tmp_path / "running"
    spec = command_spec(fake("fake_hang.py", str(marker)), "items:1")
    real_start = threading.Thread.start

    def start(self):  # the interrupt arrives once the command is running, before the readers
        if not getattr(start, "fired", False):
            start.fired = True
            assert wait_until(marker.exists)
            raise KeyboardInterrupt
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(KeyboardInterrupt):
        command.run_command(spec, lambda: None, lambda: None)
    monkeypatch.undo()
    pids = [int(x) for x in marker.read_text().split()]
    assert wait_until(lambda: all(_gone(p) for p in pids)), pids


def test_a_closed_stdout_does_not_hang_the_command(tmp_path):
    """`jetbench measure --cmd ... | head -1`: once jetbench's stdout is gone the command's
    output is still read (a command blocked on a full pipe would never end) and parsed."""
    base = make_board(tmp_path, "tx1")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        subprocess.run(
            [PY, "-m", "jetbench.cli.main", "--root", str(base), "measure", "--freq", "690MHz",
             "--cmd", fake("fake_trtexec.py", "--run-s=0.4"), "--throughput-from", "trtexec",
             "--duration", "0.3s", "--out", str(tmp_path / "out")],
            stdout=write_end, stderr=subprocess.PIPE, timeout=60,
            env=dict(os.environ, PYTHONPATH=str(REPO / "agent")))
    finally:
        os.close(write_end)
    doc = only_result(tmp_path)
    assert doc["throughput"]["items_per_s"] == 411.25
    assert any("could not be passed on" in w for w in doc["warnings"])
    assert not (base / JOURNAL).exists()
