"""--workload-python: the workload child (workload/child/runner.py) under a real interpreter
through its pipe protocol, in `time` and `measure` on a simulated board; its errors as jetbench
errors; the child dying with its parent. (tests/test_child_python36.py: vermin, Python 3.6.)"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jetbench.errors import HardwareError, OutOfMemory, UsageError
from jetbench.hw.fs import Root
from jetbench.run.measure import measure
from jetbench.run.request import MeasureRequest
from jetbench.workload.child import parent as child
from jetbench.workload.child.parent import ChildWorkload, run_in_child
from jetbench.workload.precision import PrecisionUnavailable
from jetbench.workload.timing.plan import TimingPlan

from conftest import bound_s, make_board, run_cli, sigint_as_on_a_terminal

pytest.importorskip("torch")

SMALL = ("--model", "resnet18", "--input-shape", "3,32,32", "--device", "cpu")


def no_torch_python(tmp_path: Path) -> str:
    """This interpreter without site-packages (-S): no torch, as on a JetPack 4 board before
    NVIDIA's wheel is installed."""
    script = tmp_path / "python-no-torch"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    script.chmod(0o755)
    return str(script)


def test_time_runs_in_the_child_under_the_given_interpreter():
    proc = run_cli("time", *SMALL, "--workload-python", sys.executable, "-n", "3",
                   "--duration", "0.2s", "--warmup", "0.1s", "--json", timeout=180)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    row = doc["results"][0]
    assert row["status"] == "ok" and doc["device"] == "cpu"
    work, tput = row["workload"], row["throughput"]
    assert work["child"]["python"] == sys.executable
    assert work["child"]["python_version"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert work["device"] == "cpu" and work["model"] == "resnet18" and work["batch"] == 1
    assert work["params"] == 11_689_512  # ResNet-18's published count
    assert work["gmacs_per_image"] is None  # 32x32 is not the network's own input
    assert tput["iterations"] >= 3 and tput["wall_s"] >= 0.2
    assert tput["images_per_s"] == pytest.approx(1 * tput["iterations"] / tput["wall_s"])


def test_measure_window_is_the_childs_timed_phase(tmp_path):
    base = make_board(tmp_path, "tx1")
    request = MeasureRequest(models=("resnet18",), input_shape=(3, 32, 32), device="cpu",
                             iterations=2, duration_s=0.5, warmup_s=1.0,
                             gpu_freqs=(690_000_000,), out_dir=tmp_path / "out",
                             workload_python=sys.executable)
    report = measure(Root(base), request)
    assert report.restored == "restored"
    doc = report.results[0]
    assert doc["status"] == "ok" and doc["simulated"] is True
    assert doc["workload"]["child"]["python"] == sys.executable
    assert doc["settings"]["applied"]["gpu_hz"] == 691_200_000
    window, wall_s = doc["power"]["window"], doc["throughput"]["wall_s"]
    # Opened before the child's first timed iteration, closed after its last: never shorter
    # than the timed loop, and nowhere near the 1 s warm-up longer.
    assert wall_s >= 0.5
    assert wall_s <= window["duration_s"] < wall_s + 0.5
    assert doc["power"]["total"]["name"] == "VDD_IN"
    ipj = doc["efficiency"]["images_per_j"]
    assert ipj == pytest.approx(doc["throughput"]["images_per_s"]
                                / doc["power"]["total"]["mean_w"])


def test_unavailable_precision_is_a_row_with_the_childs_reason(tmp_path):
    base = make_board(tmp_path, "tx1")
    request = MeasureRequest(models=("resnet18",), precisions=("int8",),
                             input_shape=(3, 32, 32), device="cpu", iterations=1,
                             duration_s=0.1, warmup_s=0.0, out_dir=tmp_path / "out",
                             workload_python=sys.executable)
    doc = measure(Root(base), request).results[0]
    assert doc["status"] == "unavailable"
    assert "int8 is not offered through --workload-python" in doc["message"]


def test_torch_missing_in_the_child_is_a_clean_error(tmp_path):
    python = no_torch_python(tmp_path)
    proc = run_cli("time", *SMALL, "--workload-python", python, "-n", "1", "--duration", "0s",
                   "--warmup", "0s", timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "PyTorch does not import under" in proc.stderr
    assert "No module named 'torch'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, message", [
    (("--device", "cuda"), "no CUDA device is visible to PyTorch"),
    (("--input-shape", "3,4,4"), "the network failed in the child"),
])
def test_child_errors_come_back_with_the_childs_message(args, message):
    import torch

    if args[0] == "--device" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = run_cli("time", "--model", "vgg16", "--input-shape", "3,32,32", *args,
                   "--workload-python", sys.executable, "-n", "1", "--duration", "0s",
                   "--warmup", "0s", timeout=180)
    assert proc.returncode == 1, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_an_interpreter_that_does_not_start_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot start it"):
        run_in_child(ChildWorkload(str(tmp_path / "nope"), "resnet18"), TimingPlan(iterations=1))


def test_a_child_that_ends_without_a_word_is_a_hardware_error(tmp_path):
    script = tmp_path / "python-dies"
    script.write_text("#!/bin/sh\necho 'Segmentation fault' >&2\nexit 139\n")
    script.chmod(0o755)
    with pytest.raises(HardwareError, match="exit status 139.*Segmentation fault"):
        run_in_child(ChildWorkload(str(script), "resnet18"), TimingPlan(iterations=1))


def test_what_the_child_cannot_do_is_refused_before_it_starts(tmp_path):
    from jetbench.workload.base import RunOptions

    never = str(tmp_path / "never-started")
    with pytest.raises(UsageError, match="built-in networks only"):
        run_in_child(ChildWorkload(never, "my_module:build"), TimingPlan(iterations=1))
    with pytest.raises(UsageError, match="not with --cuda-graph, --compile"):
        run_in_child(ChildWorkload(never, "alexnet", options=RunOptions(cuda_graph=True,
                                                                         compile=True)))


@pytest.mark.parametrize("kind, error", [("oom", OutOfMemory),
                                         ("unavailable", PrecisionUnavailable),
                                         ("usage", UsageError), ("torch", HardwareError)])
def test_error_kinds_map_to_jetbench_errors(kind, error):
    work = ChildWorkload("python3", "alexnet")
    failure = child._failure(work, {"kind": kind, "message": "said by the child"}, 1, "")
    assert type(failure) is error and "said by the child" in str(failure)


def _children(pid: int) -> list:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _start_long_time_run() -> tuple:
    """`jetbench time` of 120 s through the child: (the parent, the child's pid)."""
    parent = subprocess.Popen(
        [sys.executable, "-m", "jetbench.cli.main", "time", *SMALL, "--workload-python",
         sys.executable, "--duration", "120s", "--warmup", "0s"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=sigint_as_on_a_terminal)
    deadline = time.monotonic() + bound_s(60)
    kids: list = []
    while not kids and time.monotonic() < deadline and parent.poll() is None:
        kids = [k for k in _children(parent.pid)
                if b"workload/child/runner.py" in Path(f"/proc/{k}/cmdline").read_bytes()]
        time.sleep(0.05)
    if not kids:
        parent.kill()
        raise AssertionError(f"the workload child never started: {parent.communicate()[1]}")
    return parent, kids[0]


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.parametrize("sig, exit_code", [(signal.SIGKILL, -signal.SIGKILL),
                                            (signal.SIGINT, 130)])
def test_the_child_ends_with_its_parent(sig, exit_code):
    parent, kid = _start_long_time_run()
    try:
        os.kill(parent.pid, sig)
        _, stderr = parent.communicate(timeout=30)
        assert parent.returncode == exit_code, stderr
        assert _gone_within(kid, 10)
        if sig == signal.SIGINT:
            assert "interrupted" in stderr and "Traceback" not in stderr
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_a_child_that_does_not_speak_the_protocol_is_a_hardware_error(tmp_path):
    script = tmp_path / "python-chatty"
    # called as `python child/runner.py PROTOCOL_FD PARENT_PID`
    speak = "import os, sys; os.write(int(sys.argv[2]), b'hello\\n')"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -c "{speak}" "$@"\n')
    script.chmod(0o755)
    with pytest.raises(HardwareError, match="not the protocol: 'hello'"):
        run_in_child(ChildWorkload(str(script), "resnet18"), TimingPlan(iterations=1))


def test_out_of_memory_in_the_child_is_an_oom_row():
    # 36 TB of input: the CPU allocator refuses it at once ("can't allocate memory")
    proc = run_cli("time", "--model", "mobilenet_v2", "--input-shape", "3,100000,100000",
                   "--batch", "300", "--device", "cpu", "--workload-python", sys.executable,
                   "-n", "1", "--duration", "0s", "--warmup", "0s", "--json", timeout=180)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["results"][0]
    assert row["status"] == "oom"
    assert "can't allocate memory" in row["message"]


def test_options_the_child_cannot_honour_are_refused(tmp_path):
    layers = run_cli("time", *SMALL, "--workload-python", sys.executable, "--layers")
    assert layers.returncode == 1 and "not with --layers or --check" in layers.stderr
    base = make_board(tmp_path, "tx1")
    cmd = run_cli("--root", str(base), "measure", "--cmd", "true", "--throughput-from",
                  "items:1", "--workload-python", sys.executable, "--out", str(tmp_path / "out"))
    assert cmd.returncode == 1 and "not with --cmd" in cmd.stderr
    assert list((tmp_path / "out").glob("*.json")) == []
