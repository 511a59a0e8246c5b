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
from jetbench.workload.runtimes.tensorrt.engine import import_tensorrt, load_engine

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
    with pytest.raises(UsageError, match="TensorRT 10.3.0 could not deserialize"):
        load_engine(trt, str(engine_file), 1, None, "constant", FakeBuffers())
    old = fake_tensorrt([], old_api=True)
    with pytest.raises(HardwareError, match=r"named-tensor API \(8.5\+\)"):
        load_engine(old, str(engine_file), 1, None, "constant", FakeBuffers())


def test_engine_needs_a_cuda_device(engine_file: Path, monkeypatch) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    from jetbench.workload.build import build_workload

    monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt([]))
    with pytest.raises(UsageError, match="runs on a CUDA GPU, not on cpu"):
        build_workload(str(engine_file), "fp16", 1, "auto")
    with pytest.raises(UsageError, match="--provider applies to ONNX models"):
        from jetbench.workload.base import RunOptions

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


# -- engines people have (issue 24, items 2, 7, 11) ----------------------------------------------
def _trt_with(log, engine_class=None, host_code=True, plugins=True):
    """The stand-in with TensorRT 10's extras: init_libnvinfer_plugins, a Runtime with
    engine_host_code_allowed, and an engine class of the test's."""
    trt = fake_tensorrt(log)
    base_runtime = trt.Runtime
    if plugins:
        trt.init_libnvinfer_plugins = lambda logger, namespace: log.append(
            ("init_libnvinfer_plugins", namespace)) or True

    class Runtime(base_runtime):
        def __init__(self, logger):
            super().__init__(logger)
            if host_code:
                self.engine_host_code_allowed = False

        def deserialize_cuda_engine(self, data):
            log.append(("host_code", getattr(self, "engine_host_code_allowed", None)))
            engine = super().deserialize_cuda_engine(data)
            if engine_class is not None and engine is not None:
                engine.__class__ = engine_class
            return engine

    trt.Runtime = Runtime
    return trt


def test_an_ultralytics_engine_loads_past_its_metadata(tmp_path: Path) -> None:
    import json

    meta = json.dumps({"description": "Ultralytics YOLO11n", "imgsz": [640, 640],
                       "batch": 1}).encode()
    path = tmp_path / "yolo11n.engine"
    path.write_bytes(len(meta).to_bytes(4, "little") + meta + ENGINE_BYTES)
    log: List[Tuple] = []
    run = load_engine(_trt_with(log), str(path), 1, None, "constant", FakeBuffers())
    assert ("deserialize_cuda_engine", ENGINE_BYTES) in log  # the engine, not the header
    assert any("Ultralytics" in n and "YOLO11n" in n for n in run.notes)


def test_plugins_are_registered_and_host_code_allowed_before_deserializing(
        engine_file: Path) -> None:
    log: List[Tuple] = []
    load_engine(_trt_with(log), str(engine_file), 1, None, "constant", FakeBuffers())
    names = [entry[0] for entry in log]
    assert names.index("init_libnvinfer_plugins") < names.index("deserialize_cuda_engine")
    assert ("host_code", True) in log


def test_a_failed_deserialization_names_the_likely_causes(engine_file: Path) -> None:
    trt = _trt_with([])
    trt.Runtime.deserialize_cuda_engine = lambda self, data: None
    with pytest.raises(UsageError) as err:
        load_engine(trt, str(engine_file), 1, None, "constant", FakeBuffers())
    text = str(err.value)
    assert "another TensorRT version" in text and "plugin" in text
    assert "standard plugins registered" in text and "host code allowed" in text


class VectorisedEngine(FakeEngine):
    """`images` in an int8-style CHW32 layout: vectorised along dimension 1, 32 per element."""

    def get_tensor_vectorized_dim(self, name: str) -> int:
        return 1 if name == "images" else -1

    def get_tensor_components_per_element(self, name: str) -> int:
        return 32 if name == "images" else 1


def test_a_vectorised_format_gets_a_padded_buffer(engine_file: Path) -> None:
    buffers = FakeBuffers()
    run = load_engine(_trt_with([], VectorisedEngine), str(engine_file), 2, None, "constant",
                      buffers)
    assert buffers.allocs[0][0] == (2, 32, 8, 8)  # 3 channels padded to one group of 32
    assert buffers.allocs[1][0] == (2, 10)
    assert run.inputs["images"] == (2, 3, 8, 8)  # the shape set is the logical one
    assert any("vectorised" in n for n in run.notes)


class DataDependentEngine(FakeEngine):
    def create_execution_context(self) -> FakeContext:
        context = super().create_execution_context()
        context.get_tensor_shape = lambda name: (-1, 10)  # e.g. NMS: known only after a run
        return context


class ShapeTensorEngine(FakeEngine):
    def is_shape_inference_io(self, name: str) -> bool:
        return name == "images"


class TwoProfileEngine(FakeEngine):
    """Two profiles, as `trtexec --profile` builds them: batches 1-8 and 9-32."""

    num_optimization_profiles = 2
    profile = (1, 32)  # the context takes what either profile holds

    def get_tensor_profile_shape(self, name, index):
        lo, hi = ((1, 8), (9, 32))[index]
        return [(lo, 3, 8, 8), (lo, 3, 8, 8), (hi, 3, 8, 8)]

    def create_execution_context(self) -> FakeContext:
        context = super().create_execution_context()
        context.set_optimization_profile_async = lambda index, stream: self.log.append(
            ("set_optimization_profile_async", index, stream)) or True
        return context


def test_engines_jetbench_cannot_feed_are_refused_clearly(engine_file: Path) -> None:
    with pytest.raises(UsageError, match="data-dependent shape"):
        load_engine(_trt_with([], DataDependentEngine), str(engine_file), 1, None, "constant",
                    FakeBuffers())
    with pytest.raises(UsageError, match="shape tensors"):
        load_engine(_trt_with([], ShapeTensorEngine), str(engine_file), 1, None, "constant",
                    FakeBuffers())


def test_an_engine_with_several_profiles_runs_profile_0_and_says_so(engine_file: Path) -> None:
    log: List[Tuple] = []
    run = load_engine(_trt_with(log, TwoProfileEngine), str(engine_file), 1, None, "constant",
                      FakeBuffers())
    names = [entry[0] for entry in log]
    assert ("set_optimization_profile_async", 0, 0xABC) in log
    assert names.index("set_optimization_profile_async") < names.index("set_input_shape")
    assert any("profile 0" in n for n in run.notes)


def test_a_batch_only_another_profile_holds_runs_on_that_profile(engine_file: Path) -> None:
    """A batch of 16 is outside profile 0 (1-8) and inside profile 1 (9-32): it ran on profile
    0 and was refused as outside the engine's profile."""
    log: List[Tuple] = []
    run = load_engine(_trt_with(log, TwoProfileEngine), str(engine_file), 16, None, "constant",
                      FakeBuffers())
    assert ("set_optimization_profile_async", 1, 0xABC) in log
    assert any("profile 1" in n for n in run.notes)
    with pytest.raises(UsageError, match=r"profile 0: batch 1\.\.8, profile 1: batch 9\.\.32"):
        load_engine(_trt_with([], TwoProfileEngine), str(engine_file), 64, None, "constant",
                    FakeBuffers())


def test_inputs_are_filled_on_the_engines_own_stream() -> None:
    """Filled on the legacy default stream, a non-blocking engine stream could read them before
    they are written (issue 24, item 11): every fill happens inside torch.cuda.stream(engine's)."""
    import contextlib

    from jetbench.workload.runtimes.tensorrt.engine import TorchBuffers

    events: List[Tuple] = []
    current: List[Any] = [None]

    class Stream:
        def __init__(self, device=None):
            self.cuda_stream = 0x51

    @contextlib.contextmanager
    def stream(s):
        current.append(s)
        try:
            yield
        finally:
            current.pop()

    def op(name):
        return lambda *a, **k: events.append((name, current[-1]))

    class Generator:
        def __init__(self, device=None):
            pass

        def manual_seed(self, seed):
            return self

    torch = types.SimpleNamespace(
        cuda=types.SimpleNamespace(Stream=Stream, stream=stream), Generator=Generator,
        float32="f32", zeros=op("zeros"), full=op("full"),
        randn=lambda *a, **k: types.SimpleNamespace(to=op("randn")))
    buffers = TorchBuffers(torch, "cuda")
    for fill in (None, 0.5, float("nan")):
        buffers.alloc((1, 3), "float32", fill)
    assert [e[0] for e in events] == ["zeros", "full", "randn"]
    assert all(s is buffers.stream for _name, s in events)
