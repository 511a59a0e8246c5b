"""jetbench against the real onnxruntime-gpu wheel on a machine without CUDA (`ort_gpu` tests).

`make test` builds a second venv, .venv-ort-gpu (tools/ort_gpu_env.sh): onnxruntime-gpu 1.31.1
there, torch and the rest from .venv. Its TensorRT and CUDA providers are listed by
`get_available_providers()` and fail to load as they do on a board missing CUDA's libraries:
ORT logs why on stderr and prints its "EP Error ... Falling back" banner on stdout
(onnxruntime/capi/onnxruntime_inference_collection.py, InferenceSession.__init__). Where the
venv is absent these tests skip, and the run's last lines say so."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, bound_s

ORT_PYTHON = REPO / ".venv-ort-gpu/bin/python"

pytestmark = pytest.mark.ort_gpu


def _ort_gpu() -> str:
    """Why these tests cannot run here ('' when they can)."""
    if not ORT_PYTHON.exists():
        return ".venv-ort-gpu is absent (make test builds it: tools/ort_gpu_env.sh)"
    res = subprocess.run([str(ORT_PYTHON), "-c", "import onnxruntime as o; "
                          "print(o.get_available_providers())"],
                         capture_output=True, text=True, timeout=bound_s(120))
    if "CUDAExecutionProvider" not in res.stdout:
        return f"onnxruntime-gpu does not import there: {res.stderr.strip()[-300:]}"
    return ""


# Whether ORT's CUDA provider really starts here (a session that keeps it).
_CUDA_LOADS = ("import sys, onnxruntime as o\n"
               "s = o.InferenceSession(sys.argv[1], providers=['CUDAExecutionProvider', "
               "'CPUExecutionProvider'])\n"
               "print('CUDA-LOADS' if 'CUDAExecutionProvider' in s.get_providers() else 'no')\n")


@pytest.fixture(scope="module")
def ort_gpu(tmp_path_factory):
    """These tests are about a machine whose CUDA libraries are missing (issue 60, 7: on one
    with CUDA and cuDNN installed the providers load and the premise fails, so `make test`
    failed there): they skip, saying so, where ORT's CUDA provider starts."""
    reason = _ort_gpu()
    if reason:
        pytest.skip(reason)
    model = _relu_model(tmp_path_factory.mktemp("ort") / "relu.onnx")
    res = subprocess.run([str(ORT_PYTHON), "-c", _CUDA_LOADS, str(model)], capture_output=True,
                         text=True, timeout=bound_s(120))
    if "CUDA-LOADS" in res.stdout:
        pytest.skip("ONNX Runtime's CUDA provider starts on this machine: these tests are about "
                    "one without CUDA's libraries (make gpu-check covers a GPU machine)")


def _jetbench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"),
               JETBENCH_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([str(ORT_PYTHON), "-m", "jetbench.cli.main", *args],
                          capture_output=True, text=True, timeout=bound_s(600), env=env,
                          cwd=tmp_path)


def _relu_model(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_the_providers_that_do_not_load_are_notes_quoting_orts_reason(tmp_path, ort_gpu):
    """An ONNX model under `--device auto`: TensorRT, then CUDA, are tried and do not load;
    the row runs on the CPU provider, each note says which library was missing, and ORT's
    banner on stdout does not break --json (N3: it did)."""
    model = _relu_model(tmp_path / "relu.onnx")
    res = _jetbench(tmp_path, "time", "--model", str(model), "--input-shape", "4", "--batch",
                    "2", "--iterations", "2", "--duration", "0", "--warmup", "0", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)  # one document: the banner went into the notes
    (row,) = doc["results"]
    assert row["status"] == "ok"
    assert row["workload"]["providers"] == ["CPUExecutionProvider"]
    notes = " ".join(row["warnings"])
    for provider in ("tensorrt", "cuda"):
        assert f"ONNX Runtime's {provider} provider did not load (" in notes
    assert "cannot open shared object file" in notes  # ORT's own words: the missing library
    assert "logged no reason" not in notes and "EP Error" not in res.stdout
    assert "\x1b[" not in notes  # ORT's colours are not carried into the result


def test_every_runtime_and_precision_is_a_row_with_the_real_library(tmp_path, ort_gpu):
    """The issue's command with the real onnxruntime-gpu: every row is written, bf16 under
    ONNX Runtime `unavailable` with its reason, and --json parses."""
    res = _jetbench(tmp_path, "time", "--model", "resnet18", "--input-shape", "3,32,32",
                    "--runtime", "torch,torchscript,onnxruntime", "--precision", "fp32,bf16",
                    "--iterations", "2", "--duration", "0", "--warmup", "0", "--json")
    assert res.returncode == 0, res.stderr
    rows = {(r["workload"]["runtime"], r["workload"]["precision"]): r
            for r in json.loads(res.stdout)["results"]}
    assert sorted(rows) == sorted((rt, p) for rt in ("torch", "torchscript", "onnxruntime")
                                  for p in ("fp32", "bf16"))
    assert rows[("onnxruntime", "fp32")]["status"] == "ok"
    assert rows[("onnxruntime", "bf16")]["status"] == "unavailable"
    assert "bfloat16 Conv" in rows[("onnxruntime", "bf16")]["message"]
    assert all(rows[(rt, "fp32")]["status"] == "ok" for rt in ("torch", "torchscript"))


def test_device_cuda_asks_for_a_provider_that_does_not_load_and_says_why(tmp_path, ort_gpu):
    """`--provider cuda` names a provider this ORT lists but cannot start here: an
    `unavailable` row with ORT's reason (what is installed, not a failure), never a traceback."""
    model = _relu_model(tmp_path / "relu.onnx")
    res = _jetbench(tmp_path, "time", "--model", str(model), "--input-shape", "4",
                    "--provider", "cuda", "--iterations", "2", "--duration", "0", "--warmup",
                    "0", "--json")
    assert res.returncode == 0, res.stderr
    (row,) = json.loads(res.stdout)["results"]
    assert "Traceback" not in res.stderr
    assert row["status"] == "unavailable", row
    assert "could not start its cuda provider" in row["message"]
    assert "cannot open shared object file" in row["message"]
