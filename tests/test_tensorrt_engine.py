"""TensorRT engines against a stand-in `tensorrt` module (injected through sys.modules) that
records every call: what jetbench asks of TensorRT's named-tensor API (TensorRT 8.5+, as its
Python API documents it), shapes, buffers, the enqueue; and the message without TensorRT.
Nothing here has run on a GPU: the README lists engines as unverified."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from jetbench.errors import HardwareError, UsageError
from jetbench.workload.tensorrt_engine import import_tensorrt, load_engine

from conftest import run_cli

ENGINE_BYTES = b"serialized engine"


class _Enum:
    def __init__(self, name: str):
        self.name = name


class FakeContext:
    def __init__(self, log: List[Tuple], engine: FakeEngine):
        self.log, self.engine = log, engine
        self.shapes: Dict[str, Tuple[int, ...]] = {}
        self.ok = True

    def set_input_shape(self, name: str, shape: Tuple[int, ...]) -> bool:
        self.log.append(("set_input_shape", name, tuple(shape)))
        lo, hi = self.engine.profile
        if not lo <= shape[0] <= hi:
            return False
        self.shapes[name] = tuple(shape)
        return True

    def get_tensor_shape(self, name: str) -> Tuple[int, ...]:
        batch = self.shapes["images"][0]
        return (batch, 10)  # the output follows the input's batch

    def set_tensor_address(self, name: str, address: int) -> None:
        self.log.append(("set_tensor_address", name, address))

    def execute_async_v3(self, stream: int) -> bool:
        self.log.append(("execute_async_v3", stream))
        return self.ok


class FakeEngine:
    """One input `images` (-1x3x8x8 float), one output `scores` (-1x10 half); an optimization
    profile for batches 1 to 8."""

    tensors = {"images": ("INPUT", (-1, 3, 8, 8), "FLOAT"),
               "scores": ("OUTPUT", (-1, 10), "HALF")}
    profile = (1, 8)

    def __init__(self, log: List[Tuple], trt: Any):
        self.log, self.trt = log, trt
        self.num_io_tensors = len(self.tensors)
        self.contexts: List[FakeContext] = []

    def get_tensor_name(self, index: int) -> str:
        return list(self.tensors)[index]

    def get_tensor_mode(self, name: str) -> Any:
        return getattr(self.trt.TensorIOMode, self.tensors[name][0])

    def get_tensor_shape(self, name: str) -> Tuple[int, ...]:
        return self.tensors[name][1]

    def get_tensor_dtype(self, name: str) -> Any:
        return getattr(self.trt.DataType, self.tensors[name][2])

    def create_execution_context(self) -> FakeContext:
        self.log.append(("create_execution_context",))
        self.contexts.append(FakeContext(self.log, self))
        return self.contexts[-1]


def fake_tensorrt(log: List[Tuple], engine_ok: bool = True, old_api: bool = False) -> Any:
    trt = types.ModuleType("tensorrt")
    trt.__version__ = "10.3.0"
    trt.TensorIOMode = types.SimpleNamespace(INPUT=_Enum("INPUT"), OUTPUT=_Enum("OUTPUT"))
    trt.DataType = types.SimpleNamespace(**{n: _Enum(n) for n in ("FLOAT", "HALF", "INT8",
                                                                   "INT32", "BOOL")})
    trt.engines = []

    class Logger:
        WARNING = 2

        def __init__(self, severity: int):
            log.append(("Logger", severity))

    class Runtime:
        def __init__(self, logger: Any):
            log.append(("Runtime",))

        def deserialize_cuda_engine(self, data: bytes) -> Any:
            log.append(("deserialize_cuda_engine", data))
            if not engine_ok:
                return None
            engine = FakeEngine(log, trt)
            if old_api:
                del engine.num_io_tensors
            trt.engines.append(engine)
            return engine

    trt.Logger, trt.Runtime = Logger, Runtime
    return trt


class FakeBuffers:
    """Device memory as recorded allocations at made-up addresses."""

    def __init__(self) -> None:
        self.allocs: List[Tuple[Tuple[int, ...], str, Optional[float]]] = []

    def alloc(self, shape: Tuple[int, ...], dtype: str, fill: Optional[float]) -> int:
        self.allocs.append((tuple(shape), dtype, fill))
        return len(self.allocs)

    def address(self, tensor: int) -> int:
        return 0x1000 * tensor

    def stream_handle(self) -> int:
        return 0xABC


@pytest.fixture
def engine_file(tmp_path: Path) -> Path:
    path = tmp_path / "net.engine"
    path.write_bytes(ENGINE_BYTES)
    return path


def test_engine_is_loaded_shaped_bound_and_enqueued_on_the_stream(engine_file: Path,
                                                                  monkeypatch) -> None:
    log: List[Tuple] = []
    trt = fake_tensorrt(log)
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    assert import_tensorrt() is trt
    buffers = FakeBuffers()
    run = load_engine(trt, str(engine_file), 4, None, "constant", buffers)
    assert ("deserialize_cuda_engine", ENGINE_BYTES) in log
    assert run.inputs == {"images": (4, 3, 8, 8)} and run.outputs == {"scores": (4, 10)}
    assert run.dtypes == {"images": "float32", "scores": "float16"}
    # The input gets the constant 0.5, the output only room; each bound at its address.
    assert buffers.allocs == [((4, 3, 8, 8), "float32", 0.5), ((4, 10), "float16", None)]
    binds = [e for e in log if e[0] in ("set_input_shape", "set_tensor_address")]
    assert binds == [("set_input_shape", "images", (4, 3, 8, 8)),
                     ("set_tensor_address", "images", 0x1000),
                     ("set_tensor_address", "scores", 0x2000)]
    run.enqueue()
    run.enqueue()
    assert [e for e in log if e[0] == "execute_async_v3"] == [("execute_async_v3", 0xABC)] * 2
    trt.engines[0].contexts[0].ok = False
    with pytest.raises(RuntimeError, match="execute_async_v3 failed"):
        run.enqueue()


def test_random_input_and_open_dims_from_the_input_shape(engine_file: Path,
                                                         monkeypatch) -> None:
    log: List[Tuple] = []
    trt = fake_tensorrt(log)
    monkeypatch.setattr(FakeEngine, "tensors", {
        "images": ("INPUT", (-1, 3, -1, -1), "FLOAT"), "scores": ("OUTPUT", (-1, 10), "HALF")})
    buffers = FakeBuffers()
    run = load_engine(trt, str(engine_file), 2, (("images", (1, 3, 32, 16)),), "random", buffers)
    assert run.inputs == {"images": (2, 3, 32, 16)}
    shape, dtype, fill = buffers.allocs[0]
    assert shape == (2, 3, 32, 16) and fill != fill  # nan: Gaussian
    with pytest.raises(UsageError, match="open dimensions"):
        load_engine(trt, str(engine_file), 2, None, "constant", FakeBuffers())


def test_batch_outside_the_profile_is_a_usage_error(engine_file: Path) -> None:
    trt = fake_tensorrt([])
    with pytest.raises(UsageError, match="optimization profile"):
        load_engine(trt, str(engine_file), 16, None, "constant", FakeBuffers())


def test_not_an_engine_for_this_tensorrt(engine_file: Path) -> None:
    trt = fake_tensorrt([], engine_ok=False)
    with pytest.raises(UsageError, match="could not deserialize.*TensorRT 10.3.0"):
        load_engine(trt, str(engine_file), 1, None, "constant", FakeBuffers())
    old = fake_tensorrt([], old_api=True)
    with pytest.raises(HardwareError, match=r"named-tensor API \(8.5\+\)"):
        load_engine(old, str(engine_file), 1, None, "constant", FakeBuffers())


def test_engine_needs_a_cuda_device(engine_file: Path, monkeypatch) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    from jetbench.workload.workload import build_workload

    monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt([]))
    with pytest.raises(UsageError, match="runs on a CUDA GPU, not on cpu"):
        build_workload(str(engine_file), "fp16", 1, "auto")
    with pytest.raises(UsageError, match="--provider applies to ONNX models"):
        from jetbench.workload.workload import RunOptions

        build_workload(str(engine_file), "fp16", 1, "auto", options=RunOptions(provider="cpu"))


def test_without_tensorrt_the_cli_says_what_to_install(engine_file: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['tensorrt'] = None  # as if TensorRT were not installed\n"
        "from jetbench.cli.main import main\n"
        f"sys.argv = ['jetbench', 'time', '--model', {str(engine_file)!r}]\n"
        "main()\n"
    )
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "python3-libnvinfer" in proc.stderr and "pip install tensorrt" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_engine_file_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("time", "--model", str(tmp_path / "nope.plan"))
    assert proc.returncode == 1 and "no such file" in proc.stderr
    assert "Traceback" not in proc.stderr
