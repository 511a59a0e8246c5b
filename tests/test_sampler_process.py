"""The sampler in its own process: real child processes, real pipes, real signals, simulated
board trees in tmp_path."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jetbench.errors import HardwareError, SamplerDied, UsageError
from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.hw.meters.registry import open_sources, parse_meter_spec
from jetbench.run.measure import measure
from jetbench.run.request import MeasureRequest
from jetbench.sampling.records import RecordReader, RecordWriter, split_faults
from jetbench.sampling.sampler import Sampler
from jetbench.sampling.sampler_process import ProcessSampler

from conftest import bound_s, make_board, wait_until

# The Orin Nano's INA3221 (hwmon, 1-0040): channel 1 VDD_IN, 2 VDD_CPU_GPU_CV, 3 VDD_SOC.
HWMON = "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1"


def _hwmon(base: Path) -> Path:
    (d,) = [p for p in (base / "sys/bus/i2c/drivers/ina3221/1-0040/hwmon").iterdir()]
    return d


def _ina_sources(base: Path, *specs: str):
    root = Root(base)
    board = detect(root)
    return open_sources(list(specs) or ["ina3221"], root, board.rails, board.total_rail)


def _gone(pid: int) -> bool:
    """No such process, or a zombie nobody has reaped yet (it runs no code any more)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def test_records_round_trip_through_a_pipe():
    r, w = os.pipe()
    try:
        a = RecordWriter(w, 0, 3, 2)
        b = RecordWriter(w, 1, 3, 3)
        a.append(1.5, (2.0, None))
        b.append(1.6, (1.0, 2.0, 3.0))
        a.mark_fault(1.7, "stall")
        a.append(1.8, (4.0, 5.0))
        data = os.read(r, 1 << 16)
    finally:
        os.close(r)
        os.close(w)
    reader = RecordReader(3)
    first = reader.feed(data[:50])  # a partial record is kept for the next block
    rest = reader.feed(data[50:])
    assert len(first) + len(rest) == 4 and reader.pending_bytes == 0
    recs = rest if not len(first) else __import__("numpy").concatenate([first, rest])
    assert list(recs["source"]) == [0, 1, 0, 0]
    assert list(recs["t_ns"]) == [1_500_000_000, 1_600_000_000, 1_700_000_000, 1_800_000_000]
    assert recs["values"][0][0] == 2.0 and math.isnan(recs["values"][0][1])
    assert math.isnan(recs["values"][0][2])  # padding of a 2-channel source
    runs = split_faults(recs[recs["source"] == 0])
    assert [(len(run), kind) for run, kind in runs] == [(1, None), (1, "stall"), (1, None)]


def test_window_values_come_from_the_child_exactly(tmp_path):
    """Fixed rail files (no board simulator running): V x I as docs/hardware.md says, mV x mA."""
    base = make_board(tmp_path, "orin-nano")
    d = _hwmon(base)
    for ch, (mv, ma) in {1: (5000, 1000), 2: (5000, 300), 3: (5000, 200)}.items():
        (d / f"in{ch}_input").write_text(f"{mv}\n")
        (d / f"curr{ch}_input").write_text(f"{ma}\n")
    sampler = ProcessSampler(_ina_sources(base), interval_s=0.002).start()
    try:
        child = sampler.proc.pid
        assert child != os.getpid() and not _gone(child)
        wait_until(lambda: len(sampler.traces()[0].trace), step=0.01)  # the first sample
        with sampler.window() as w:
            time.sleep(0.3)
        res = w.result
    finally:
        sampler.stop()
    assert res.channel("VDD_IN").mean_w == pytest.approx(5.0, rel=1e-12)
    assert res.channel("VDD_SOC").mean_w == pytest.approx(1.0, rel=1e-12)
    assert res.total.total.name == "VDD_IN" and res.total.mean_w == pytest.approx(5.0)
    assert res.channel("VDD_IN").coverage > 0.9
    t, _v = sampler.traces()[0].trace.arrays()
    # monotonic timestamps taken in the child fall inside this process's own clock readings
    assert t[0] < w.t_start_s and t[-1] >= w.t_end_s
    assert _gone(child)  # stop() ended it


def test_a_stopped_sampler_starts_again_with_a_new_child(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    sampler = ProcessSampler(_ina_sources(base), interval_s=0.005)
    with sampler:
        first = sampler.proc.pid
    assert _gone(first) and not sampler.running
    with sampler:
        assert sampler.proc.pid != first and not _gone(sampler.proc.pid)
        with sampler.window() as w:
            time.sleep(0.1)
    assert w.result_unchecked.channel("VDD_IN").samples >= 5


def test_open_errors_are_the_same_as_in_process(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    sources = _ina_sources(base)
    (_hwmon(base) / "curr2_input").unlink()
    with pytest.raises(HardwareError) as in_process:
        Sampler(sources).start()
    with pytest.raises(HardwareError) as in_child:
        ProcessSampler(sources).start()
    assert type(in_child.value) is type(in_process.value)
    assert str(in_child.value) == str(in_process.value)
    assert "curr2_input" in str(in_child.value)


def test_a_child_dying_mid_window_is_a_clear_error_not_a_hang(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    sampler = ProcessSampler(_ina_sources(base), interval_s=0.002).start()
    try:
        w = sampler.begin()
        time.sleep(0.1)
        os.kill(sampler.proc.pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(SamplerDied, match="killed by SIGKILL during the window"):
            sampler.end(w)
        assert time.monotonic() - t0 < 2.0
        with pytest.raises(SamplerDied):
            sampler.traces()
    finally:
        sampler.stop()


PARENT = textwrap.dedent("""
    import sys, time
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.hw.meters.registry import open_sources
    from jetbench.sampling.sampler_process import ProcessSampler

    root = Root(sys.argv[1])
    board = detect(root)
    sampler = ProcessSampler(open_sources(["ina3221"], root, board.rails, board.total_rail))
    sampler.start()
    print(sampler.proc.pid, flush=True)
    time.sleep(60)
""")


def test_the_child_is_gone_after_its_parent_is_killed(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(base)],
                              stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert not _gone(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert wait_until(lambda: _gone(child), step=0.02)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_interval_option_on_built_in_meters(tmp_path):
    assert parse_meter_spec("ina3221?interval=1ms").options == {"interval": "1ms"}
    assert parse_meter_spec("RAPL?interval=5ms").kind == "rapl"
    for bad in ("ina3221?interval=", "ina3221?interval=0", "ina3221?interval=fast",
                "ina3221?speed=1", "none?interval=1ms", "rapl?baud=9600"):
        with pytest.raises(UsageError):
            parse_meter_spec(bad)
    base = make_board(tmp_path, "orin-nano")
    (src,) = _ina_sources(base, "ina3221?interval=4ms")
    assert src.sample_interval_s == 0.004
    (plain,) = _ina_sources(base, "ina3221")
    assert getattr(plain, "sample_interval_s", None) is None
    (jtop,) = _ina_sources(base, "jtop?interval=100ms")  # asked of the jtop service
    assert jtop.period_s == 0.1


def test_the_child_reads_at_the_interval_the_spec_asks(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    (_hwmon(base) / "update_interval").write_text("2\n")  # the sensor: every 2 ms x 1 sample
    (_hwmon(base) / "samples").write_text("1\n")
    # the sampler's own interval (monitor's --interval) loses to the meter's ?interval=
    sampler = ProcessSampler(_ina_sources(base, "ina3221?interval=20ms"), interval_s=0.001)
    with sampler:
        (st,) = sampler.traces()
        assert (st.period_s, st.interval_s) == (0.002, 0.02)
        with sampler.window() as w:
            time.sleep(0.5)
    n = w.result.channel("VDD_IN").samples
    assert 15 <= n <= 27  # 25 at 20 ms; far fewer than the 250 at 2 ms


SPIN = '''
import time
import torch

class _Spin(torch.nn.Module):
    """~3 ms of pure Python per forward: the GIL held, as a small model's dispatch holds it."""
    def forward(self, x):
        end = time.perf_counter() + 0.003
        n = 0
        while time.perf_counter() < end:
            n += 1
        return x.mean() + 0.0 * n

def spin():
    return _Spin()

class _Marked(_Spin):
    """_Spin, leaving `inference.mark` in the working directory once it runs."""
    def forward(self, x):
        import os
        if not os.path.exists("inference.mark"):
            open("inference.mark", "w").close()
        return super().forward(x)

def marked():
    return _Marked()
'''


def test_a_gil_holding_workload_is_sampled_at_the_sensors_rate(tmp_path, monkeypatch):
    """The issue's end-to-end case: a ~3 ms pure-Python forward on an Orin Nano tree whose
    INA3221 updates every 2 ms (500 readings/s). In-process, the sampler thread starved and
    VDD_IN covered only 67-83% of the window."""
    pytest.importorskip("torch")
    (tmp_path / "jb_spin.py").write_text(SPIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    base = make_board(tmp_path, "orin-nano")
    (_hwmon(base) / "update_interval").write_text("2\n")  # 2 ms x 1 sample
    (_hwmon(base) / "samples").write_text("1\n")
    request = MeasureRequest(models=("jb_spin:spin",), input_shape=(3, 8, 8), iterations=2,
                             duration_s=1.5, warmup_s=0.0, device="cpu", meters=("ina3221",),
                             out_dir=tmp_path / "out")
    doc = measure(Root(base), request).results[0]
    assert doc["status"] == "ok"
    assert doc["throughput"]["latency_ms"]["p50"] >= 2.9  # the workload did hold the GIL
    vdd_in = next(c for c in doc["power"]["channels"] if c["name"] == "VDD_IN")
    duration_s = doc["power"]["window"]["duration_s"]
    assert duration_s >= 1.4
    assert vdd_in["coverage"] >= 0.90
    assert vdd_in["samples"] / duration_s >= 0.90 * 500
    assert doc["efficiency"]["images_per_j"] is not None  # not refused for coverage


@pytest.mark.parametrize("spec", ["ina3221?interval=1ms", "rapl?interval=5ms", "nvml", "jtop",
                                  "scpi:loop://?accuracy=0.1%+0.05W", "wt310:loop://",
                                  "stream:loop://?columns=ms,W", "um25c:loop://"])
def test_every_meter_can_be_sent_to_the_sampler_process(tmp_path, spec):
    """A source travels unopened, as its own description, and arrives the same."""
    import pickle

    base = make_board(tmp_path, "orin-nano")
    rapl = base / "sys/class/powercap/intel-rapl:0"
    rapl.mkdir(parents=True)
    (rapl / "name").write_text("package-0\n")
    (rapl / "energy_uj").write_text("1000\n")
    for src in _ina_sources(base, spec):
        copy = pickle.loads(pickle.dumps(src))
        assert type(copy) is type(src) and copy.name == src.name
        assert copy.channels() == src.channels() and copy.total() == src.total()
        assert getattr(copy, "sample_interval_s", None) == getattr(src, "sample_interval_s",
                                                                    None)
        assert getattr(copy, "accuracy_spec", None) == getattr(src, "accuracy_spec", None)


def _children(pid: int, needle: str):
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and needle in cmd:
            out.append(int(entry))
    return out


def test_measure_says_so_when_its_sampler_is_killed(tmp_path):
    """The CLI: exit 2 with the sampler's fate, no traceback, no hang."""
    pytest.importorskip("torch")
    (tmp_path / "jb_spin.py").write_text(SPIN)
    base = make_board(tmp_path, "orin-nano")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetbench.cli.main", "--root", str(base), "measure", "--model",
         "jb_spin:marked", "--input-shape", "3,8,8", "--duration", "3s", "--warmup", "0s",
         "--device", "cpu", "--out", str(tmp_path / "out")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + bound_s(120)
        while not (tmp_path / "inference.mark").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        (child,) = _children(proc.pid, "jetbench.sampling.sampler_child")
        time.sleep(0.5)
        os.kill(child, signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, out
    assert f"the power sampler process (pid {child}) was killed by SIGKILL" in out
    assert "Traceback" not in out
    assert not list((tmp_path / "out").glob("*.json"))  # no result from a broken window
