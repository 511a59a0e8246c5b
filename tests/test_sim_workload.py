"""`--model sim:NAME`: a built-in network whose speed follows the simulated board's clocks
(sim/workload_model.py, workload/sim_run.py), and the simulated power that follows its load."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from jetbench.sim import boards
from jetbench.sim.power_model import ClockState, component_powers_w
from jetbench.sim.workload_model import FAMILIES, Clocks, NetworkCost, batch_time
from jetbench.workload.registry import get_spec

from conftest import REPO, make_board, make_generic_host, run_cli

# NVIDIA's TX1 whitepaper, AlexNet at a 690 MHz GPU clock: (batch, precision) -> img/s
WHITEPAPER_TX1_690MHZ = {(1, "fp32"): 47, (128, "fp32"): 155, (1, "fp16"): 67,
                         (128, "fp16"): 258}


def _alexnet() -> NetworkCost:
    spec = get_spec("alexnet")
    return NetworkCost(spec.macs_per_image, spec.params, spec.activation_elems_per_image)


def _ips(batch: int, precision: str, gpu_hz: float, emc_hz: float = 1600e6,
         cpu_hz: float = 1912.5e6, family: str = "tx1") -> float:
    t = batch_time(FAMILIES[family], _alexnet(), precision, batch, Clocks(gpu_hz, emc_hz, cpu_hz))
    return batch / t.total_s


@pytest.mark.parametrize("batch,precision", sorted(WHITEPAPER_TX1_690MHZ))
def test_tx1_is_calibrated_on_the_whitepaper_at_690mhz(batch, precision):
    tx1 = boards.get("tx1")
    gpu = min(tx1.gpu_freqs_hz, key=lambda f: abs(f - 690e6))  # the 691.2 MHz table entry
    cpu = tx1.clusters[0].freqs_khz[-1] * 1000.0
    got = _ips(batch, precision, gpu, tx1.emc_freqs_hz[-1], cpu)
    assert got == pytest.approx(WHITEPAPER_TX1_690MHZ[(batch, precision)], rel=0.10)


def test_speed_rises_with_the_gpu_clock_and_with_the_emc_clock_when_memory_bound():
    gpu_table = boards.get("tx1").gpu_freqs_hz
    speeds = [_ips(128, "fp16", g) for g in gpu_table]
    assert speeds == sorted(speeds) and speeds[-1] > 3 * speeds[2]
    # Batch 1 FP32 reads 244 MB of weights per image: memory bound.
    emc = [_ips(1, "fp32", 998.4e6, emc_hz=e) for e in (408e6, 800e6, 1600e6)]
    assert emc[0] < emc[1] < emc[2] and emc[2] > 2 * emc[0]
    # ...where the GPU clock matters little above the memory's pace
    assert _ips(1, "fp32", 998.4e6) < 1.1 * _ips(1, "fp32", 691.2e6)


def test_a_precision_the_family_lacks_is_not_modelled():
    with pytest.raises(KeyError):
        batch_time(FAMILIES["tx1"], _alexnet(), "int8", 1, Clocks(1e9, 1.6e9, 1.9e9))


def _module_w(board_key: str, gpu_hz: float, emc_hz: float, load: float) -> float:
    b = boards.get(board_key)
    cpu = b.clusters[0].freqs_khz[-1] * 1000
    clocks = ClockState(gpu_hz, b.gpu_freqs_hz, cpu, [f * 1000 for f in b.clusters[0].freqs_khz],
                        1.0, emc_hz, b.emc_freqs_hz[-1])
    parts = component_powers_w(b.soc, clocks, 0.0, load)
    return sum(w for name, w in parts.items() if name != "carrier")


def test_images_per_joule_has_an_optimum_inside_the_gpu_table():
    """Power follows the clock and the simulated GPU's load: img/J peaks between the ends."""
    b = boards.get("tx1")
    per_j = []
    for g in b.gpu_freqs_hz:
        t = batch_time(FAMILIES["tx1"], _alexnet(), "fp16", 1,
                       Clocks(g, b.emc_freqs_hz[-1], 1912.5e6))
        per_j.append(1 / t.total_s / _module_w("tx1", g, b.emc_freqs_hz[-1], t.gpu_busy))
    best = per_j.index(max(per_j))
    assert 0 < best < len(per_j) - 1, per_j


def test_the_gpu_load_file_drives_the_simulated_power(tmp_path):
    from jetbench.sim.file_kernel import FileKernel

    base = make_board(tmp_path, "tx1")
    load = base / boards.get("tx1").gpu_device.lstrip("/") / "load"
    rail = next(base.glob("sys/devices/*/i2c-1/1-0040/iio:device0/in_power1_input"))  # VDD_GPU
    kernel = FileKernel(base, activity=lambda: 0.0)
    kernel.sync()
    idle_mw = int(rail.read_text())
    load.write_text("1000\n")
    kernel.sync()
    busy_mw = int(rail.read_text())
    assert busy_mw > 1.5 * idle_mw  # at the boot clock (76.8 MHz): 0.32 W -> 0.54 W


def test_a_clock_change_mid_run_changes_the_batch_time(tmp_path):
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.workload import sim_run

    base = make_board(tmp_path, "tx1")
    root = Root(base)
    board = detect(root)
    workload, network = sim_run.build_sim_workload(root, board, "sim:alexnet", "fp16", 8)
    cur = base / board.gpu.cur_freq.lstrip("/")
    cur.write_text("998400000\n")
    fast = network.batch_time().total_s
    cur.write_text("76800000\n")
    time.sleep(sim_run.CLOCK_READ_EVERY_S * 2)
    slow = network.batch_time().total_s
    assert slow > 3 * fast
    assert network.clocks is not None and network.clocks.gpu_hz == 76.8e6
    t0 = time.perf_counter()
    workload.step()  # sleeps for the batch: no CPU burnt
    assert time.perf_counter() - t0 == pytest.approx(slow, rel=0.5, abs=0.02)
    assert workload.describe()["framework"] == "sim"


def test_the_emc_clock_in_the_tree_sets_a_memory_bound_batchs_time(tmp_path):
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.workload import sim_run

    base = make_board(tmp_path, "tx1")
    root = Root(base)
    board = detect(root)
    _, network = sim_run.build_sim_workload(root, board, "sim:alexnet", "fp32", 1)
    (base / board.gpu.cur_freq.lstrip("/")).write_text("998400000\n")  # GPU at its max
    emc = base / board.emc.cur_freq.lstrip("/")
    emc.write_text("1600000000\n")
    fast = network.batch_time().total_s
    emc.write_text("408000000\n")
    time.sleep(sim_run.CLOCK_READ_EVERY_S * 2)
    slow = network.batch_time().total_s
    assert network.clocks is not None and network.clocks.emc_hz == 408e6
    assert slow > 2 * fast


def test_a_cluster_the_power_mode_took_offline_sets_no_clock(tmp_path):
    """The AGX Orin's 15 W mode takes cpu4-11 offline; their policies still read their table's
    top as max. The simulated network runs at the online cluster's clock (pinned low here),
    not the offline ones' (it read 2.2 GHz whatever the CPU knob said, before)."""
    from jetbench.hw.board import detect
    from jetbench.hw.clocks.domains import read_clocks
    from jetbench.hw.fs import Root
    from jetbench.sim.create import create_board
    from jetbench.workload import sim_run

    base = tmp_path / "orin-agx"
    create_board("orin-agx", base, power_mode=1)
    root = Root(base)
    board = detect(root)
    cpus = [r for r in read_clocks(root, board) if r.domain == "cpu"]
    assert [r.online for r in cpus] == [True, False, False]
    policy0 = base / "sys/devices/system/cpu/cpufreq/policy0"
    (policy0 / "scaling_governor").write_text("userspace\n")
    (policy0 / "scaling_cur_freq").write_text("729600\n")
    _, network = sim_run.build_sim_workload(root, board, "sim:resnet18", "fp16", 1)
    network.batch_time()
    assert network.clocks is not None and network.clocks.cpu_hz == 729.6e6


_NO_TORCH = ("import runpy, sys\n"
             "class _Block:\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name == 'torch' or name.startswith('torch.'):\n"
             "            raise ImportError('torch blocked by the test')\n"
             "sys.meta_path.insert(0, _Block())\n"
             "sys.argv = ['jetbench'] + sys.argv[1:]\n"
             "runpy.run_module('jetbench.cli.main', run_name='__main__')\n")


def _jetbench_without_torch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _NO_TORCH, *args], capture_output=True,
                          text=True, timeout=120, cwd=REPO)


def test_measure_sim_alexnet_end_to_end_without_torch(tmp_path):
    base = make_board(tmp_path, "tx1")
    out = tmp_path / "out"
    res = _jetbench_without_torch("--root", str(base), "measure", "--model", "sim:alexnet",
                                  "--precision", "fp16", "--batch", "1",
                                  "--freq", "77MHz,998MHz", "--emc-freq", "max",
                                  "--iterations", "5", "--duration", "0.4s", "--warmup", "0.1s",
                                  "--out", str(out))
    assert res.returncode == 0, res.stderr + res.stdout
    assert "Traceback" not in res.stderr
    docs = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert sorted(docs) == ["sim_alexnet-fp16-b1-gpu77mhz", "sim_alexnet-fp16-b1-gpu998mhz"]
    for doc in docs.values():
        assert doc["simulated"] is True
        assert doc["workload"]["model"] == "sim:alexnet"
        assert doc["workload"]["framework"] == "sim"
        assert doc["validity"]["valid"] is True
    slow, fast = docs["sim_alexnet-fp16-b1-gpu77mhz"], docs["sim_alexnet-fp16-b1-gpu998mhz"]
    ratio = fast["throughput"]["images_per_s"] / slow["throughput"]["images_per_s"]
    want = _ips(1, "fp16", 998.4e6) / _ips(1, "fp16", 76.8e6)
    assert ratio == pytest.approx(want, rel=0.25)
    assert fast["efficiency"]["images_per_j"] is not None


def test_sim_models_are_refused_on_a_board_that_is_not_simulated(tmp_path):
    host = make_generic_host(tmp_path / "pc")
    res = run_cli("--root", str(host), "measure", "--model", "sim:alexnet", "--duration", "0s",
                  "--warmup", "0s", "--iterations", "1")
    assert res.returncode == 1, res.stderr + res.stdout
    assert "simulated board only" in res.stderr and "Traceback" not in res.stderr


def test_an_unknown_sim_network_is_a_usage_error(tmp_path):
    base = make_board(tmp_path, "tx1")
    res = run_cli("--root", str(base), "measure", "--model", "sim:alexnetz")
    assert res.returncode == 1
    # the suggestion as the user would type it: with `sim:` (issue 39: it said 'alexnet')
    assert "unknown model: 'sim:alexnetz' (did you mean 'sim:alexnet'?)" in res.stderr


def test_a_misspelt_simulated_board_gets_the_closest_name(tmp_path):
    """`sim create` and `sim mount` alike (sim mount said only "see `jetbench sim list`")."""
    for cmd in (["sim", "create", "--board", "orin-nanoo", str(tmp_path / "a")],
                ["sim", "mount", "--board", "orin-nanoo", str(tmp_path / "b")]):
        res = run_cli(*cmd)
        assert res.returncode == 1, res.stderr
        assert "unknown simulated board 'orin-nanoo' (did you mean 'orin-nano'?)" in res.stderr
        assert "Traceback" not in res.stderr


def test_the_sim_modules_import_nothing_of_torch():
    code = ("import sys, jetbench.workload.sim_run, jetbench.sim.workload_model, "
            "jetbench.run.measure; print('torch' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"


def test_every_listed_network_has_its_sim_twin():
    from jetbench.workload.models_info import describe_models

    for row in describe_models():
        spec = get_spec(row["name"])
        assert spec.activation_elems_per_image > 0, row["name"]


def test_time_refuses_a_sim_network_with_a_clear_message():
    res = run_cli("time", "--model", "sim:alexnet")
    assert res.returncode == 1, res.stderr + res.stdout
    assert "simulated board" in res.stderr and "Traceback" not in res.stderr


def test_the_demo_runs_sim_alexnet_by_default_at_the_whitepapers_speed(tmp_path):
    from jetbench.run.demo import demo_request, run_demo

    out = tmp_path / "demo"
    request = demo_request(out, duration_s=1.5, iterations=3, warmup_s=0.1, idle_s=0.1)
    assert request.models == ("sim:alexnet",)
    result = run_demo(out, request=request)
    speeds = {d["workload"]["precision"]: d["throughput"]["images_per_s"]
              for d in result.report.results}
    assert result.report.simulated
    # Paced by deadline, a busy host does not slow the simulated board: the model's own figure
    # at the demo's clocks (GPU 691.2 MHz, EMC 1600 MHz, CPU 1912.5 MHz) within 5%; the model
    # is within 10% of the whitepaper's 47 / 67 (test_tx1_is_calibrated_...).
    assert speeds["fp32"] == pytest.approx(_ips(1, "fp32", 691.2e6), rel=0.05)
    assert speeds["fp16"] == pytest.approx(_ips(1, "fp16", 691.2e6), rel=0.05)


class _LateHost:
    """A stand-in for `time` in sim_run: every sleep wakes `overshoot_s` late (a busy host),
    and `stall(s)` makes the next sleep wake that much later still (the process not run)."""

    def __init__(self, overshoot_s: float):
        self.t, self.overshoot_s, self._stall = 100.0, overshoot_s, 0.0

    def perf_counter(self) -> float:
        return self.t

    monotonic = perf_counter

    def sleep(self, s: float) -> None:
        self.t += s + self.overshoot_s + self._stall
        self._stall = 0.0

    def stall(self, s: float) -> None:
        self._stall = s


def _paced_network(tmp_path, monkeypatch, host):
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.workload import sim_run

    monkeypatch.setattr(sim_run, "time", host)
    base = make_board(tmp_path, "tx1")
    root = Root(base)
    _, network = sim_run.build_sim_workload(root, detect(root), "sim:alexnet", "fp32", 1)
    return network


def test_overshooting_sleeps_do_not_add_up(tmp_path, monkeypatch):
    """Each sleep wakes 30% of a batch late; 100 batches still take 100 modelled batch times
    plus the last wake-up's lateness (paced by deadline), not 130 (paced by duration)."""
    probe = _paced_network(tmp_path / "probe", monkeypatch, _LateHost(0.0))
    batch_s = probe.batch_time().total_s  # alexnet fp32 b1 at the tree's boot clocks
    host = _LateHost(0.3 * batch_s)
    network = _paced_network(tmp_path, monkeypatch, host)
    start = host.t
    for _ in range(100):
        network.step()
    assert host.t - start == pytest.approx(100 * batch_s + 0.3 * batch_s, rel=1e-6)
    assert network.pace.late_batches == 0 and network.pace.warning() is None


def test_a_host_that_falls_a_batch_behind_is_said_and_caught_up(tmp_path, monkeypatch):
    host = _LateHost(0.0)
    network = _paced_network(tmp_path, monkeypatch, host)
    batch_s = network.batch_time().total_s
    start = host.t
    network.step()
    host.stall(3.5 * batch_s)  # the process is not run for 3.5 batch times
    for _ in range(9):
        network.step()
    # the late batch ends 3.5 batches behind; the next ones run at once until caught up
    assert host.t - start == pytest.approx(10 * batch_s, rel=1e-6)
    pace = network.pace
    assert pace.batches == 10 and pace.late_batches == 3  # 3.5, 2.5, 1.5 batches behind
    assert pace.worst_behind_s == pytest.approx(3.5 * batch_s, rel=1e-6)
    warning = pace.warning()
    assert warning is not None and "3 of 10 batches" in warning and "caught up" in warning
    host.stall(2.5 * batch_s)
    network.step()  # the window ends 2.5 batches behind: its rate is below the model's
    assert network.pace.end_behind_s == pytest.approx(2.5 * batch_s, rel=1e-6)
    assert "below the model's" in network.pace.warning()
    network.restart()
    assert network.pace.batches == 0 and network.pace.warning() is None


def test_a_fuse_served_board_takes_the_gpu_load_too(tmp_path):
    """The FUSE server's attributes (sim mount) keep the load file and feed it to the power
    model, as the file-based kernel does."""
    from jetbench.sim.attributes import HostLoad, KernelModel, Refused

    base = make_board(tmp_path, "tx1")
    board = boards.get("tx1")
    kernel = KernelModel(board, lambda p: (base / p.lstrip("/")).read_text(),
                             load=HostLoad(0.0))
    attr = kernel.attrs[f"{board.gpu_device}/load"]
    idle = kernel.rails_w()["VDD_GPU"]
    attr.store("1000\n")
    assert attr.show() == "1000"
    assert kernel.rails_w()["VDD_GPU"] > 1.5 * idle
    with pytest.raises(Refused):
        attr.store("1001")


def test_a_sweep_of_sim_networks_says_its_speed_is_modelled():
    from jetbench.run.sweep import MODELLED_THROUGHPUT_NOTE, SIMULATED_THROUGHPUT_NOTE, summarize

    def doc(framework: str) -> dict:
        return {"status": "ok", "simulated": True, "validity": {"valid": True},
                "workload": {"model": "m", "precision": "fp16", "batch": 1,
                             "framework": framework},
                "throughput": {"images_per_s": 10.0}, "efficiency": {"images_per_j": 1.0}}

    assert MODELLED_THROUGHPUT_NOTE in summarize([doc("sim")], simulated=True).lines()
    mixed = summarize([doc("sim"), doc("pytorch")], simulated=True).lines()
    assert SIMULATED_THROUGHPUT_NOTE in mixed and MODELLED_THROUGHPUT_NOTE not in mixed


def test_the_refusal_comes_before_anything_is_pinned(tmp_path):
    """plan_points (before the first pin) refuses sim: on a board that is not simulated."""
    from jetbench.errors import UsageError
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.run.request import MeasureRequest, plan_points

    host = make_generic_host(tmp_path / "pc")
    board = detect(Root(host))
    with pytest.raises(UsageError, match="simulated board only"):
        plan_points(MeasureRequest(models=("alexnet", "sim:alexnet")), board, Root(host))
    assert plan_points(MeasureRequest(models=("alexnet",)), board, Root(host))  # planned


def test_a_bad_batch_for_measure_never_suggests_batch_sweep(tmp_path):
    """`--batch 0` suggested `sweep`, which measure and sweep then refuse (it is time's)."""
    base = make_board(tmp_path, "tx1")
    for cmd in ("measure", "sweep"):
        res = run_cli("--root", str(base), cmd, "--model", "sim:alexnet", "--batch", "0",
                      "--freq", "max")
        assert res.returncode == 1, res.stderr
        assert "batch sizes start at 1" in res.stderr and "sweep" not in res.stderr.split(
            "hint:")[1], res.stderr
