"""ONNX models through ONNX Runtime: models built at test time with the onnx helper API,
timed (`jetbench time`) and measured (`jetbench measure` on a simulated TX1) on the CPU
provider; dynamic batch; fp16 on the CPU provider reported unavailable; provider choice and
shapes as pure functions; bad paths, files and shapes as clean errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Union

import pytest

from jetbench.errors import UsageError
from jetbench.hw.fs import Root
from jetbench.report.schema import check as check_result
from jetbench.run.measure import measure
from jetbench.run.request import MeasureRequest
from jetbench.workload.model_arg import parse_shape_option, resolve_shapes
from jetbench.workload.precision import PrecisionUnavailable
from jetbench.workload.runtimes.onnx.providers import (
    CPU_EP,
    CUDA_EP,
    TENSORRT_EP,
    check_precision,
    choose,
    model_precision,
    pick_provider,
)

from conftest import make_board, run_cli

onnx = pytest.importorskip("onnx", reason="pip install -e '.[dev]' (onnx builds the test models)")
pytest.importorskip("onnxruntime", reason="pip install -e '.[onnx]'")

FAST = ["--iterations", "3", "--duration", "0.2", "--warmup", "0"]
Dim = Union[int, str]


def write_model(path: Path, dims: List[Dim], elem: Optional[int] = None) -> Path:
    """A 3x3 convolution (3 -> 4 channels) and a ReLU, input `x` of shape `dims` (NCHW; a
    string is an open dimension), output `y`."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    elem = TensorProto.FLOAT if elem is None else elem
    np_type = np.float16 if elem == TensorProto.FLOAT16 else np.float32
    weight = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np_type)
    x = helper.make_tensor_value_info("x", elem, dims)
    y = helper.make_tensor_value_info("y", elem, [dims[0], 4, "oh", "ow"])
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        "tiny", [x], [y], [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # what every supported onnxruntime reads
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


@pytest.fixture
def dynamic(tmp_path: Path) -> Path:
    return write_model(tmp_path / "tiny.onnx", ["N", 3, 16, 16])


def _time_json(*args: str) -> dict:
    proc = run_cli("time", *args, *FAST, "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


# -- provider choice and shapes (pure) ---------------------------------------------------------
def test_best_provider_present_wins_in_order_tensorrt_cuda_cpu() -> None:
    everything = [CPU_EP, CUDA_EP, TENSORRT_EP, "AzureExecutionProvider"]
    assert pick_provider(everything, None, "auto") == TENSORRT_EP
    assert pick_provider([CPU_EP, CUDA_EP], None, "auto") == CUDA_EP
    assert pick_provider(["AzureExecutionProvider", CPU_EP], None, "auto") == CPU_EP
    assert pick_provider(everything, None, "cpu") == CPU_EP
    assert pick_provider(everything, "cuda", "auto") == CUDA_EP
    assert pick_provider(everything, "TensorrtExecutionProvider", "auto") == TENSORRT_EP


def test_absent_provider_is_unavailable_listing_those_available() -> None:
    """What this ONNX Runtime lacks is an `unavailable` row (the other runtimes still run);
    a provider for another device than --device is the user's contradiction."""
    from jetbench.errors import Unavailable

    with pytest.raises(Unavailable) as err:
        pick_provider(["AzureExecutionProvider", CPU_EP], "tensorrt", "auto")
    assert "available: azure, cpu" in str(err.value)
    with pytest.raises(Unavailable, match="available: cpu"):
        pick_provider([CPU_EP], None, "cuda")
    with pytest.raises(UsageError, match="available: azure, cpu") as typo:
        pick_provider(["AzureExecutionProvider", CPU_EP], "tensorrtt", "auto")
    assert not isinstance(typo.value, Unavailable)  # a name no ORT knows: the user's typo
    with pytest.raises(UsageError, match="not --device cpu"):
        pick_provider([CPU_EP, CUDA_EP], "cuda", "cpu")


def test_fp16_only_through_tensorrt_and_never_silently_fp32() -> None:
    trt = choose([CPU_EP, CUDA_EP, TENSORRT_EP], None, "cuda:1", "fp16")
    assert trt.name == TENSORRT_EP
    assert trt.options == {"device_id": 1, "trt_fp16_enable": True}
    # the CUDA fallback on the same GPU (without device_id ORT runs it on GPU 0)
    assert trt.fallbacks == ((CUDA_EP, {"device_id": 1}), (CPU_EP, {})) and trt.device == "cuda:1"
    check_precision("fp16", "fp32", TENSORRT_EP)  # converted by TensorRT: allowed
    for provider in (CUDA_EP, CPU_EP):
        with pytest.raises(PrecisionUnavailable, match="trt_fp16_enable"):
            check_precision("fp16", "fp32", provider)
    # A model exported in fp16 is fp16 as it is, and not fp32.
    assert model_precision(["tensor(float16)", "tensor(int64)"]) == "fp16"
    check_precision("fp16", "fp16", CPU_EP)
    with pytest.raises(PrecisionUnavailable, match="it is fp16"):
        check_precision("fp32", "fp16", CPU_EP)
    with pytest.raises(PrecisionUnavailable):
        check_precision("int8", "fp32", TENSORRT_EP)


def test_input_shapes_batch_from_batch_open_dims_from_the_option() -> None:
    declared = {"x": ["N", 3, "H", "W"]}
    assert parse_shape_option("1x3x224x224") == (1, 3, 224, 224)
    assert parse_shape_option("3,8,8") == (3, 8, 8)
    named = parse_shape_option("x:1x3x8x8,mask:1x4")
    assert named == (("x", (1, 3, 8, 8)), ("mask", (1, 4)))
    assert resolve_shapes(declared, (1, 3, 8, 8), 5, "m") == {"x": (5, 3, 8, 8)}
    assert resolve_shapes(declared, (3, 8, 6), 2, "m") == {"x": (2, 3, 8, 6)}  # one sample
    assert resolve_shapes({"x": [None, 3, 4]}, None, 7, "m") == {"x": (7, 3, 4)}
    with pytest.raises(UsageError, match="open dimensions"):
        resolve_shapes(declared, None, 1, "m")
    with pytest.raises(UsageError, match="fixed batch of 1"):
        resolve_shapes({"x": [1, 3, 4]}, None, 2, "m")
    with pytest.raises(UsageError, match="gave 4 for dimension 1"):
        resolve_shapes(declared, (1, 4, 8, 8), 1, "m")
    with pytest.raises(UsageError, match="no input named 'y'"):
        resolve_shapes(declared, (("y", (1, 3, 8, 8)),), 1, "m")
    for bad in ("abc", "x:", "1x0x3", "x:1x3,x:1x3", "x:1x3,4"):
        with pytest.raises(UsageError):
            parse_shape_option(bad)


# -- jetbench time --------------------------------------------------------------------------
def test_time_on_the_cpu_provider_with_a_dynamic_batch(dynamic: Path) -> None:
    doc = _time_json("--model", str(dynamic), "--batch", "1,3", "--provider", "cpu")
    rows = doc["results"]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for row, batch in zip(rows, (1, 3)):
        work, thr = row["workload"], row["throughput"]
        assert work["framework"] == "onnxruntime" and work["provider"] == "CPUExecutionProvider"
        assert work["device"] == "cpu" and work["batch"] == batch
        assert work["inputs"] == {"x": [batch, 3, 16, 16]}  # the model's N is --batch
        assert thr["iterations"] >= 3
        assert thr["images_per_s"] == pytest.approx(batch * thr["iterations"] / thr["wall_s"])


def test_time_fp16_on_the_cpu_provider_is_unavailable_with_the_reason(dynamic: Path) -> None:
    doc = _time_json("--model", str(dynamic), "--precision", "fp32,fp16")
    by = {r["workload"]["precision"]: r for r in doc["results"]}
    assert by["fp32"]["status"] == "ok"
    assert by["fp16"]["status"] == "unavailable" and by["fp16"]["throughput"] is None
    assert "cpu provider" in by["fp16"]["message"]
    assert "trt_fp16_enable" in by["fp16"]["message"]


def test_open_dimensions_from_a_named_input_shape(tmp_path: Path) -> None:
    model = write_model(tmp_path / "open.onnx", ["N", 3, "H", "W"])
    proc = run_cli("time", "--model", str(model), *FAST)
    assert proc.returncode == 1 and "open dimensions" in proc.stderr
    assert "Traceback" not in proc.stderr
    doc = _time_json("--model", str(model), "--batch", "2", "--input-shape", "x:1x3x8x8")
    assert doc["results"][0]["workload"]["inputs"] == {"x": [2, 3, 8, 8]}


def test_onnx_path_never_imports_torch(dynamic: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # as if torch were not installed\n"
        "from jetbench.run.timing import TimeRequest, time_models\n"
        f"report = time_models(TimeRequest(models=({str(dynamic)!r},), iterations=2, "
        "duration_s=0.0, warmup_s=0.0))\n"
        "print('STATUS', [r.status for r in report.rows])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert "STATUS ['ok']" in proc.stdout, proc.stderr


def test_without_onnxruntime_the_message_says_what_to_install(dynamic: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['onnxruntime'] = None  # as if it were not installed\n"
        "from jetbench.cli.main import main\n"
        f"sys.argv = ['jetbench', 'time', '--model', {str(dynamic)!r}]\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "jetbench[onnx]" in proc.stderr and "onnxruntime-gpu" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("case", ["missing", "not-onnx", "bad-shape", "fixed-batch",
                                  "absent-provider", "torch-option"])
def test_bad_input_is_a_clean_usage_error(tmp_path: Path, dynamic: Path, case: str) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_text("not a protobuf\n")
    fixed = write_model(tmp_path / "fixed.onnx", [1, 3, 16, 16])
    args, expect = {
        "missing": (["--model", str(tmp_path / "nope.onnx")], "no such file"),
        "not-onnx": (["--model", str(junk)], "cannot load it as an ONNX model"),
        "bad-shape": (["--model", str(dynamic), "--input-shape", "3xAx16"],
                      "not an input shape"),
        "fixed-batch": (["--model", str(fixed), "--batch", "2"], "fixed batch of 1"),
        "absent-provider": (["--model", str(dynamic), "--provider", "nosuch"],
                            "available: "),
        "torch-option": (["--model", str(dynamic), "--cuda-graph"], "--cuda-graph applies"),
    }[case]
    proc = run_cli("time", *args, *FAST, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert expect in proc.stderr
    assert "Traceback" not in proc.stderr


# -- jetbench measure on a simulated board ----------------------------------------------------
def test_measure_on_a_simulated_board(tmp_path: Path, dynamic: Path) -> None:
    base = make_board(tmp_path, "tx1")
    out = tmp_path / "out"
    request = MeasureRequest(models=(str(dynamic),), precisions=("fp32", "fp16"), batches=(2,),
                             gpu_freqs=(690_000_000,), provider="cpu", iterations=3,
                             duration_s=0.5, warmup_s=0.0, out_dir=out)
    report = measure(Root(base), request)
    assert report.restored == "restored"
    ok, fp16 = report.results
    assert ok["status"] == "ok" and ok["simulated"] is True
    assert ok["validity"]["valid"] is True, ok["validity"]
    work = ok["workload"]
    assert work["framework"] == "onnxruntime" and work["provider"] == "CPUExecutionProvider"
    assert work["inputs"] == {"x": [2, 3, 16, 16]}
    assert ok["settings"]["applied"]["gpu_hz"] == 691_200_000  # docs/hardware.md: TX1 table entry
    # img/s/W against the raw trace: VDD_IN's mean over the window, from the CSV.
    path = out / "tiny.onnx-fp32-b2-gpu691mhz.json"
    window = ok["power"]["window"]
    start, end = window["start_s"], window["start_s"] + window["duration_s"]
    rows = [line.split(",") for line in path.with_suffix(".csv").read_text().splitlines()[2:]]
    vdd_in = [float(r[1]) for r in rows if start <= float(r[0]) <= end and r[1]]
    assert len(vdd_in) >= 4
    trace_w = sum(vdd_in) / len(vdd_in)
    assert ok["efficiency"]["images_per_j"] == pytest.approx(
        ok["throughput"]["images_per_s"] / trace_w, rel=0.05)
    assert fp16["status"] == "unavailable" and "trt_fp16_enable" in fp16["message"]
    assert fp16["workload"]["framework"] == "onnxruntime"
    for doc in report.results:
        check_result(json.loads(json.dumps(doc)))  # the schema accepts both, as written


def test_measure_cli_exits_0_and_report_reads_the_results(tmp_path: Path, dynamic: Path) -> None:
    base = make_board(tmp_path, "tx1")
    out = tmp_path / "out"
    proc = run_cli("--root", str(base), "measure", "--model", str(dynamic), "--freq", "690MHz",
                   "--out", str(out), *FAST, "--duration", "1", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "clocks: restored" in proc.stdout
    shown = run_cli("report", str(out), "--json")
    assert shown.returncode == 0, shown.stderr
    columns = json.loads(shown.stdout)["columns"]
    assert any("tiny.onnx FP32 b1 (onnxruntime CPU)" in c for c in columns), columns


def test_schema_rejects_an_onnx_result_without_its_provider() -> None:
    doc = {"schema": "jetbench.result/1", "simulated": True, "board": {}, "settings": {},
           "status": "ok", "workload": {"model": "m.onnx", "framework": "onnxruntime"}}
    with pytest.raises(UsageError, match="without workload.provider"):
        check_result(doc)
    doc["workload"]["provider"] = "CPUExecutionProvider"
    assert check_result(doc) is doc
    doc["workload"]["framework"] = "tensorflow"
    with pytest.raises(UsageError, match="workload.framework"):
        check_result(doc)


def test_provider_with_a_pytorch_network_is_a_usage_error() -> None:
    pytest.importorskip("torch")
    from jetbench.workload.base import RunOptions
    from jetbench.workload.build import build_workload

    with pytest.raises(UsageError, match="--provider applies to ONNX models"):
        build_workload("alexnet", options=RunOptions(provider="cpu"))
    with pytest.raises(UsageError, match="input names in --input-shape"):
        build_workload("alexnet", input_shape=(("x", (1, 3, 227, 227)),))


def test_a_model_that_fails_on_its_input_is_a_usage_error_before_any_window(
        tmp_path: Path) -> None:
    """A Reshape to a fixed 1x768 works for batch 1 only: at batch 2 ONNX Runtime fails while
    running, which jetbench meets in the build's first inference, as a clean usage error."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 768])
    shape = numpy_helper.from_array(np.array([1, 768], dtype=np.int64), "shape")
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "fixed",
                              [x], [y], [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "fixed-reshape.onnx"
    onnx.save(model, str(path))
    assert _time_json("--model", str(path))["results"][0]["status"] == "ok"
    proc = run_cli("time", "--model", str(path), "--batch", "2", *FAST, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the model failed on its input" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_fp16_on_the_cpu_provider_says_its_arithmetic_is_fp32() -> None:
    """N18: ORT's CPU provider ran an fp16 model with casts to float around the operators it
    has no fp16 kernels for, and the row said nothing (it read as fp16 arithmetic)."""
    cpu = choose([CPU_EP], None, "cpu", "fp16")
    assert any("computes operators without fp16 kernels in fp32" in n for n in cpu.notes)
    assert not any("kernels in fp32" in n for n in choose([CPU_EP], None, "cpu", "fp32").notes)
