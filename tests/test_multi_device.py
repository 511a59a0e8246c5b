"""measure on several devices as one run (issue 15.1), on this CPU: gloo, 2 ranks x 1 thread,
real launcher subprocesses on a simulated TX1. `--devices 2` and `torchrun -m jetbench` each
give one gathered result; a rank that raises fails the run with its message; Ctrl-C and a
kill of rank 0 leave no process behind."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from helpers.workloads import board_snapshot

from jetbench.distributed.devices import (
    DeviceSpec,
    RankEnv,
    cpu_share,
    describe_devices,
    parse_devices,
    rank_device,
    rank_env,
)
from jetbench.distributed.launch import _exit_status, _run_status
from jetbench.distributed.rows import (
    RankRow,
    aggregate_timing,
    device_docs,
    devices_power_sum,
    own_channels,
    scaling_doc,
)
from jetbench.errors import RankFailed, UsageError
from jetbench.report import tables
from jetbench.workload.timing.runner import TimingResult
from jetbench.workload.timing.stats import latency_stats

from conftest import REPO, bound_s, diff, make_board, sigint_as_on_a_terminal

JOURNAL = "var/lib/jetbench/journal.json"

# Each rank leaves inference.<RANK>.mark at its first inference (an event to wait on); a rank
# named in JB_FAIL_RANK raises in its forward pass.
MODELS = '''
import os
import torch

class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(),
                                       torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10))
    def forward(self, x):
        rank = os.environ.get("RANK", "-")
        mark = "inference.%s.mark" % rank
        if not os.path.exists(mark):
            open(mark, "w").close()
        if rank == os.environ.get("JB_FAIL_RANK"):
            raise RuntimeError("rank %s boom" % rank)
        return self.net(x)

def net():
    return _Net()
'''

FAST = ["--model", "jb_ranknet:net", "--input-shape", "3,16,16", "--iterations", "2",
        "--warmup", "0", "--device", "cpu", "--freq", "690MHz"]


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"), **extra)
    env.pop("JB_FAIL_RANK", None)
    env.update(extra)
    return env


def _setup(tmp_path):
    (tmp_path / "jb_ranknet.py").write_text(MODELS)
    base = make_board(tmp_path, "tx1")
    return base, board_snapshot(base, "tx1")


def _jetbench(tmp_path, base, *args, **env):
    """`python -m jetbench --root BASE measure ...` as a user types it (cwd has the model)."""
    return [sys.executable, "-m", "jetbench", "--root", str(base), "measure", *FAST,
            "--out", str(tmp_path / "out"), "--json", *args], \
        dict(cwd=tmp_path, env=_env(TMPDIR=str(tmp_path), **env))


def _run(cmd_kw, timeout=240):
    cmd, kw = cmd_kw
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


# Windows of 2 s, not less: on 2 busy cores the sampler's process can wait 0.15 s for a core,
# and a 0.5 s window with such a gap is rightly refused (coverage under 90%).
WINDOW = ["--duration", "2"]


def _why(proc):
    """stderr, then each result's validity and warnings (the full JSON is long)."""
    try:
        docs = json.loads(proc.stdout)["results"]
        return proc.stderr + json.dumps([[d.get("validity"), d.get("warnings")] for d in docs])
    except (ValueError, KeyError, TypeError):
        return proc.stderr + proc.stdout[-3000:]


def _one_result(proc):
    assert proc.returncode == 0, _why(proc)
    docs = json.loads(proc.stdout)["results"]
    assert len(docs) == 1
    return docs[0]


def _check_gathered(doc, tmp_path):
    rows = doc["devices"]
    assert [r["rank"] for r in rows] == [0, 1]
    assert [r["device"] for r in rows] == ["cpu", "cpu"]
    assert [r["threads"] for r in rows] == [1, 1]  # 2 ranks share this machine's 2 cores
    assert len({r["pid"] for r in rows}) == 2
    per_rank = [r["throughput"]["images_per_s"] for r in rows]
    assert min(per_rank) > 0
    # the sum of the ranks', as the result file keeps figures (9 significant digits)
    assert doc["throughput"]["images_per_s"] == pytest.approx(sum(per_rank), rel=1e-8)
    assert doc["workload"]["device"] == "cpu x2"
    assert doc["distributed"]["backend"] == "gloo"
    assert doc["distributed"]["world_size"] == 2
    assert [r["power"] for r in rows] == [None, None]  # a CPU share has no sensor of its own
    assert doc["power"]["total"]["name"] == "VDD_IN"  # the node's sources, as a plain measure
    assert doc["simulated"] is True
    assert len(list((tmp_path / "out").glob("*.json"))) == 1  # one result, written by rank 0


def _wait_for(paths, proc, timeout=180):
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"never appeared: {paths}"
        time.sleep(0.05)


def _gone(pids):
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


# -- end to end ---------------------------------------------------------------------------
@pytest.mark.long
def test_devices_2_gives_one_gathered_result_with_scaling(tmp_path):
    base, before = _setup(tmp_path)
    doc = _one_result(_run(_jetbench(tmp_path, base, *WINDOW, "--devices", "2", "--scaling",
                                     "--idle", "0.5")))
    _check_gathered(doc, tmp_path)
    # every rank's timed run lies inside the window (none started during rank 0's idle)
    window = doc["power"]["window"]["duration_s"]
    for row in doc["devices"]:
        began, ended = row["timed_in_window_s"]
        assert 0 <= began < ended <= window + 1e-3, (row["rank"], began, ended, window)
    assert doc["power"]["idle"]["duration_s"] >= 0.5
    assert doc["distributed"]["launcher"] == "jetbench --devices"
    scaling = doc["scaling"]
    assert scaling["baseline_images_per_s"] > 0
    assert scaling["efficiency"] == pytest.approx(
        doc["throughput"]["images_per_s"] / (2 * scaling["baseline_images_per_s"]))
    assert doc["settings"]["applied"]["gpu_hz"] == 691200000  # pinned by rank 0 (TX1 table)
    _headers, rows = tables.table_cells([doc])
    cells = dict(rows)
    each = [r["throughput"]["images_per_s"] for r in doc["devices"]]
    assert cells["Devices (img/s each)"] == [f"cpu {each[0]:.1f} + cpu {each[1]:.1f}"]
    assert cells["Scaling efficiency"] == [
        f"{scaling['efficiency']:.1%} of 2 x {scaling['baseline_images_per_s']:.1f} img/s"]
    assert not (base / JOURNAL).exists()
    assert diff(before, board_snapshot(base, "tx1")) == []


def test_torchrun_runs_the_same_measure(tmp_path):
    base, before = _setup(tmp_path)
    cmd, kw = _jetbench(tmp_path, base, *WINDOW)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0"]
    doc = _one_result(_run((launcher + cmd[1:], kw)))
    _check_gathered(doc, tmp_path)
    assert doc["distributed"]["launcher"] == "torchrun"
    assert "scaling" not in doc
    assert diff(before, board_snapshot(base, "tx1")) == []


def test_a_rank_that_raises_fails_the_run_with_its_message(tmp_path):
    base, before = _setup(tmp_path)
    proc = _run(_jetbench(tmp_path, base, "--duration", "0.5", "--devices", "2",
                          JB_FAIL_RANK="1"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("jetbench: error: rank 1 (cpu): "), proc.stderr
    assert "(rank 1 boom)" in lines[0]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert not list((tmp_path / "out").glob("*.json"))
    assert not (base / JOURNAL).exists()
    assert diff(before, board_snapshot(base, "tx1")) == []


def test_ctrl_c_leaves_no_process_and_restores_the_clocks(tmp_path):
    base, before = _setup(tmp_path)
    cmd, kw = _jetbench(tmp_path, base, "--duration", "60", "--devices", "2")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=sigint_as_on_a_terminal, **kw)
    _wait_for([base / JOURNAL, tmp_path / "inference.0.mark", tmp_path / "inference.1.mark"],
              proc)
    tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert len(tree) >= 2  # the two ranks (and whatever the launcher started)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    text = err.decode()
    assert proc.returncode == 130, text
    assert "clocks: restored" in text  # said by rank 0, which owns the board
    assert "Traceback" not in text
    assert _gone(tree) == []
    assert not (base / JOURNAL).exists()
    assert diff(before, board_snapshot(base, "tx1")) == []


def test_kill_of_rank_0_stops_the_others_and_restore_finishes(tmp_path):
    base, before = _setup(tmp_path)
    cmd, kw = _jetbench(tmp_path, base, "--duration", "60", "--devices", "2")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    _wait_for([base / JOURNAL, tmp_path / "inference.0.mark", tmp_path / "inference.1.mark"],
              proc)
    tree = psutil.Process(proc.pid).children(recursive=True)
    # the launcher's own child (rank 0's power sampler process inherits RANK too)
    rank0 = [p for p in psutil.Process(proc.pid).children() if p.environ().get("RANK") == "0"]
    assert len(rank0) == 1
    rank0[0].kill()
    _out, err = proc.communicate(timeout=60)
    text = err.decode()
    assert proc.returncode == 2, text
    assert "rank 0 was ended by SIGKILL" in text
    assert _gone([p.pid for p in tree]) == []
    restore = subprocess.run([sys.executable, "-m", "jetbench", "--root", str(base), "restore"],
                             capture_output=True, text=True, env=_env(), timeout=60)
    assert restore.returncode == 0, restore.stderr
    assert diff(before, board_snapshot(base, "tx1")) == []


def test_kill_of_the_launcher_ends_the_ranks_and_rank_0_restores(tmp_path):
    base, before = _setup(tmp_path)
    # a window far longer than the wait below: only the kill can end the ranks in time
    cmd, kw = _jetbench(tmp_path, base, "--duration", "600", "--devices", "2")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    _wait_for([base / JOURNAL, tmp_path / "inference.0.mark", tmp_path / "inference.1.mark"],
              proc)
    tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    proc.kill()  # the launcher: its ranks get SIGTERM (prctl), rank 0 restores as on Ctrl-C
    proc.communicate(timeout=30)
    deadline = time.monotonic() + bound_s(60)
    while _gone(tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(tree) == []
    assert not (base / JOURNAL).exists()
    assert diff(before, board_snapshot(base, "tx1")) == []


@pytest.mark.long
def test_sweep_runs_every_point_on_both_ranks(tmp_path):
    base, before = _setup(tmp_path)
    cmd, kw = _jetbench(tmp_path, base, *WINDOW, "--devices", "2", "--no-plot")
    cmd[cmd.index("measure")] = "sweep"
    freq = cmd.index("--freq")
    cmd[freq + 1] = "614MHz,998MHz"
    proc = _run((cmd, kw))
    assert proc.returncode == 0, _why(proc)
    docs = json.loads(proc.stdout)["results"]
    assert [d["settings"]["applied"]["gpu_hz"] for d in docs] == [614400000, 998400000]
    for doc in docs:
        assert [r["rank"] for r in doc["devices"]] == [0, 1]
        assert doc["throughput"]["images_per_s"] == pytest.approx(
            sum(r["throughput"]["images_per_s"] for r in doc["devices"]), rel=1e-8)
    assert diff(before, board_snapshot(base, "tx1")) == []


def test_scaling_without_devices_is_a_usage_error(tmp_path):
    base, _ = _setup(tmp_path)
    proc = _run(_jetbench(tmp_path, base, "--scaling"))
    assert proc.returncode == 1
    assert "--scaling compares several devices" in proc.stderr


def test_cmd_does_not_go_with_several_devices(tmp_path):
    base = make_board(tmp_path, "tx1")
    proc = subprocess.run([sys.executable, "-m", "jetbench", "--root", str(base), "measure",
                           "--cmd", "true", "--throughput-from", "items:1", "--devices", "2",
                           "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=_env(), timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "--cmd runs one command" in proc.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_devices_without_torch_says_how_to_install_it(tmp_path):
    base, _ = _setup(tmp_path)
    code = ("import sys\n"
            "sys.modules['torch'] = None  # as if torch were not installed\n"
            "from jetbench.cli.main import main\n"
            f"sys.argv = ['jetbench', '--root', {str(base)!r}, 'measure', '--devices', '2']\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "PyTorch is not installed" in proc.stderr and "pip install torch" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- the parts, by hand ---------------------------------------------------------------------
def test_parse_devices():
    assert parse_devices("2") == DeviceSpec(2)
    assert parse_devices("0,2") == DeviceSpec(2, (0, 2))
    assert parse_devices("3,").indices == (3,)
    for bad in ("0", "-1", "two", "1,1", ",", "0,x"):
        with pytest.raises(UsageError):
            parse_devices(bad)


def test_rank_env_from_the_launchers_variables():
    env = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
           "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}
    assert rank_env(env) == RankEnv(1, 1, 2, 2)
    assert rank_env({k: v for k, v in env.items() if k != "MASTER_PORT"}) is None
    assert rank_env({}) is None
    with pytest.raises(UsageError, match="several nodes"):
        rank_env(dict(env, WORLD_SIZE="4"))


def test_rank_device():
    env = RankEnv(1, 1, 2, 2)
    assert rank_device("auto", env, None, cuda_available=False) == "cpu"
    assert rank_device("auto", env, None, cuda_available=True) == "cuda:1"
    assert rank_device("cuda", env, DeviceSpec(2, (0, 3)), cuda_available=True) == "cuda:3"
    assert rank_device("cpu", env, DeviceSpec(2), cuda_available=True) == "cpu"
    with pytest.raises(UsageError, match="asks for 3"):
        rank_device("auto", env, DeviceSpec(3), cuda_available=True)
    with pytest.raises(UsageError, match="names one GPU"):
        rank_device("cuda:1", env, None, cuda_available=True)
    with pytest.raises(UsageError):
        rank_device("cuda", env, None, cuda_available=False)


def test_cpu_share():
    assert cpu_share([0, 1], 0, 2) == [0]
    assert cpu_share([0, 1], 1, 2) == [1]
    assert cpu_share([4, 5, 6, 7, 8], 1, 2) == [6, 7]  # 5 cores, 2 ranks: 2 each
    assert cpu_share([0, 1], 2, 3) == [0]  # more ranks than cores: round robin
    assert describe_devices(["cpu", "cpu"]) == "cpu x2"
    assert describe_devices(["cuda:0", "cuda:2"]) == "cuda:0,cuda:2"


def _timing(ips, latencies_ms, device="cpu"):
    return TimingResult({"model": "m", "device": device}, len(latencies_ms), 1.0, ips,
                        latency_stats(latencies_ms), 0.0, None, 1, 0.1, tuple(latencies_ms))


def test_aggregate_sums_throughput_and_pools_latencies():
    rows = [RankRow(0, "cuda:0", 10, None, None, _timing(100.0, [1.0, 3.0], "cuda:0"), 0.2, 0.01),
            RankRow(1, "cuda:1", 11, None, None, _timing(50.0, [2.0, 2.0], "cuda:1"), 0.0, 0.03,
                    open_wait_s=0.01)]
    agg = aggregate_timing(rows)
    assert agg.images_per_s == 150.0
    assert agg.iterations == 4
    assert agg.latency_ms.mean_ms == 2.0
    assert agg.workload["device"] == "cuda:0,cuda:1"
    channels = [{"name": "GPU0", "source": "nvml", "mean_w": 40.0, "energy_j": 20.0},
                {"name": "GPU1", "source": "nvml1", "mean_w": 60.0, "energy_j": 30.0},
                {"name": "VDD_IN", "source": "ina3221", "mean_w": 200.0}]
    assert own_channels("cuda:1", channels) == [channels[1]]
    assert own_channels("cpu", channels) == []
    docs = device_docs(rows, channels, window_s=0.5)
    assert docs[0]["efficiency"]["images_per_j"] == 2.5  # 100 img/s / 40 W
    assert docs[1]["sync_s"]["in_window_share"] == pytest.approx(0.08)  # (10 + 30 ms) / 0.5 s
    summed = devices_power_sum(docs)
    assert (summed["mean_w"], summed["energy_j"], summed["name"]) == (100.0, 50.0, "GPU0+GPU1")
    assert scaling_doc(150.0, 2, 100.0, "cuda:0")["efficiency"] == 0.75


def test_nvml_gpus_get_one_source_each_and_their_sum_is_the_basis():
    from types import SimpleNamespace

    from jetbench.distributed.messages import Leader
    from jetbench.hw.meters.nvml import NvmlSource
    from jetbench.run.result import efficiency

    leader = Leader(SimpleNamespace(backend="nccl"), ["cuda:0", "cuda:2"], False, "torchrun")
    rapl = SimpleNamespace(name="rapl")
    assert [s.name for s in leader.node_sources([NvmlSource(), rapl])] == \
        ["rapl", "nvml", "nvml2"]
    assert leader.node_sources([rapl]) == [rapl]  # no NVML asked for: none added
    leader.rows = [RankRow(0, "cuda:0", 10, None, None, _timing(300.0, [1.0], "cuda:0"), 0, 0),
                   RankRow(1, "cuda:2", 11, None, None, _timing(100.0, [1.0], "cuda:2"), 0, 0)]
    channels = [{"name": "GPU0", "source": "nvml", "mean_w": 150.0, "energy_j": 300.0},
                {"name": "GPU2", "source": "nvml2", "mean_w": 50.0, "energy_j": 100.0}]
    doc = {"throughput": {"images_per_s": 400.0},
           "power": {"channels": channels, "window": {"duration_s": 2.0},
                     "total": {"name": "GPU0", "source": "nvml", "mean_w": 150.0}},
           "efficiency": {"images_per_j": 400.0 / 150.0}}
    basis = leader.power_basis(doc["power"])
    assert (basis["mean_w"], basis["name"]) == (200.0, "GPU0+GPU2")
    # img/J is built once, over that basis: 400 img/s over 150 + 50 W, not GPU0's 150 W
    total = SimpleNamespace(name="GPU0", point="gpu_board", channels=("GPU0",))
    res = SimpleNamespace(total=SimpleNamespace(total=total, source="nvml", mean_w=150.0),
                          totals=[], channels=[], duration_s=2.0)
    eff = efficiency(400.0, res, None, None, basis=basis)
    assert eff["images_per_j"] == 2.0
    assert eff["basis"] == "GPU0+GPU2 (gpu_board, sum of the devices' NVML sources)"
    assert efficiency(400.0, res, None, None)["images_per_j"] == pytest.approx(400 / 150)
    leader.annotate(doc)  # the devices and their sum, beside the figures (never rewriting them)
    assert doc["power"]["devices_sum"]["mean_w"] == 200.0
    assert doc["efficiency"]["images_per_j"] == 400.0 / 150.0
    assert [d["efficiency"]["images_per_j"] for d in doc["devices"]] == [2.0, 2.0]
    assert doc["distributed"]["devices"] == ["cuda:0", "cuda:2"]


def test_launcher_exit_status():
    assert _exit_status({0: 2, 1: -15}) == 2  # rank 0 said why; the launcher then stopped 1
    assert _exit_status({0: 130, 1: -2}) == 130
    assert _exit_status({1: 3}) == 3
    with pytest.raises(RankFailed, match="rank 0 was ended by SIGKILL"):
        _exit_status({0: -9, 1: -15})
    with pytest.raises(RankFailed, match="rank 1 was ended by SIGSEGV"):
        _exit_status({1: -11})


def test_a_run_every_rank_finished_is_not_failed_by_a_late_signal(tmp_path):
    # rank 1 reported 0 and then died of SIGABRT; the launcher SIGTERMed rank 0, which had
    # reported 0 too: the run is rank 0's status
    (tmp_path / "0").write_text("0\n")
    (tmp_path / "1").write_text("0\n")
    assert _run_status(str(tmp_path), 2, {0: -15, 1: -6}) == 0
    (tmp_path / "0").write_text("3\n")
    assert _run_status(str(tmp_path), 2, {0: 3, 1: -15}) == 3
    # rank 0 never got to its end: the signal is the news
    (tmp_path / "0").unlink()
    with pytest.raises(RankFailed, match="rank 0 was ended by SIGTERM"):
        _run_status(str(tmp_path), 2, {0: -15, 1: -6})
    (tmp_path / "0").write_text("")  # cut short while it was written: not a report
    with pytest.raises(RankFailed, match="rank 0 was ended by SIGTERM"):
        _run_status(str(tmp_path), 2, {0: -15, 1: -6})


LEAVE = """
import atexit, os, sys, threading
from jetbench.distributed import teardown
atexit.register(lambda: open(sys.argv[2], "w").close())  # would run if Python finalized
teardown.leave(5)  # not a rank yet: returns
teardown.joined()
sys.stdout.write("written before leaving")  # buffered (a pipe): leave must flush it
teardown.leave(int(sys.argv[1]))
open(sys.argv[2], "w").close()
"""


def test_a_rank_leaves_with_its_status_reported_and_without_finalizing(tmp_path):
    done = tmp_path / "done"
    done.mkdir()
    finalized = tmp_path / "finalized"
    proc = subprocess.run([sys.executable, "-c", LEAVE, "3", str(finalized)],
                          capture_output=True, text=True, timeout=60,
                          env=_env(RANK="1", JETBENCH_RANKS_DONE=str(done)))
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "written before leaving"
    assert not finalized.exists()
    assert (done / "1").read_text() == "3\n"
    assert sorted(p.name for p in done.iterdir()) == ["1"]
