"""A serialized TensorRT engine (`.engine`, `.plan`, as trtexec --saveEngine writes) as a
`Workload`: TensorRT's Python package runs it (named-tensor API, TensorRT 8.5+: JetPack 5.1
and newer), PyTorch holds the device buffers and the CUDA stream, and the runner times each
enqueue with CUDA events on that stream.

Why PyTorch for the buffers rather than cuda-python: it is already jetbench's workload
dependency on a Jetson (NVIDIA's wheel), its tensors free themselves, and its CUDA events are
what the runner's GPU loop already uses; cuda-python would add a package and manual frees.

UNVERIFIED on a GPU: tested against a stand-in `tensorrt` module only
(tests/test_tensorrt_engine.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Protocol, Tuple

from ....errors import HardwareError, OutOfMemory, UsageError
from ....interrupts import held_sigint
from ..._torch import import_torch
from ...base import RunOptions, Workload
from ...model_arg import InputShape, resolve_shapes
from ...pytorch import CONSTANT_INPUT, device_context, is_cuda, resolve_device

if TYPE_CHECKING:
    from torch import Tensor

INSTALL_HINT = ("TensorRT engines need TensorRT's Python package and a CUDA build of PyTorch: "
                "on a Jetson both come with JetPack (`sudo apt install python3-libnvinfer` and "
                "NVIDIA's torch wheel; a venv made with --system-site-packages sees them); on a "
                "PC `pip install tensorrt` at the version that built the engine")
# TensorRT's Python bindings ship no types (and do not load here): its engine, execution
# context and DataType objects are Any.
TrtObject = Any

# TensorRT's DataType names -> torch dtype names
_DTYPES = {"FLOAT": "float32", "HALF": "float16", "BF16": "bfloat16", "INT8": "int8",
           "INT32": "int32", "INT64": "int64", "UINT8": "uint8", "BOOL": "bool"}


class Buffers(Protocol):
    """Device memory and a stream (PyTorch's here; a stand-in in tests)."""

    def alloc(self, shape: Tuple[int, ...], dtype: str, fill: Optional[float]) -> Tensor:
        """A device tensor of `dtype` (torch name); `fill` None = zeros, nan = Gaussian."""

    def address(self, tensor: Tensor) -> int: ...

    def stream_handle(self) -> int: ...


@dataclass
class EngineRun:
    """A deserialized engine with its execution context, shapes set and every I/O tensor bound;
    `enqueue()` queues one inference on the stream. `notes`: what the result must say (an
    Ultralytics header, the optimization profile used, padded vectorised formats)."""

    engine: TrtObject
    context: TrtObject
    inputs: Dict[str, Tuple[int, ...]]
    outputs: Dict[str, Tuple[int, ...]]
    dtypes: Dict[str, str]
    tensors: Dict[str, Tensor]
    stream: int
    notes: Tuple[str, ...] = ()

    def enqueue(self) -> None:
        if not self.context.execute_async_v3(self.stream):
            raise RuntimeError("TensorRT execute_async_v3 failed (see TensorRT's log above)")


def import_tensorrt() -> ModuleType:
    try:
        with held_sigint():
            import tensorrt
    except Exception as err:  # noqa: BLE001 - a missing libnvinfer is OSError, not ImportError
        raise HardwareError(f"TensorRT's Python package does not load here "
                            f"({type(err).__name__}: {err})", hint=INSTALL_HINT) from err
    return tensorrt


def load_engine(trt: ModuleType, path: str, batch: int, input_shape: Optional[InputShape],
                input_mode: str, buffers: Buffers) -> EngineRun:
    """Deserialize `path`, set the inputs' shapes (batch from `batch`, open dimensions from
    `input_shape`), allocate and bind every I/O tensor. UsageError for a file that is not an
    engine for this TensorRT, or shapes that do not fit."""
    logger = trt.Logger(trt.Logger.WARNING)
    notes: List[str] = []
    # The standard plugins (EfficientNMS_TRT, ...), registered as trtexec always does.
    plugins = hasattr(trt, "init_libnvinfer_plugins")
    if plugins:
        trt.init_libnvinfer_plugins(logger, "")
    runtime = trt.Runtime(logger)
    if hasattr(runtime, "engine_host_code_allowed"):
        # A version-compatible engine carries its lean runtime as host code (TensorRT 8.6+).
        runtime.engine_host_code_allowed = True
    with open(path, "rb") as f:
        data, metadata = split_ultralytics(f.read())
    if metadata is not None:
        notes.append("an Ultralytics engine: its metadata header was skipped ("
                     + ", ".join(f"{k} {metadata[k]}" for k in ("description", "imgsz", "batch")
                                 if k in metadata) + ")")
    engine = runtime.deserialize_cuda_engine(data)
    if engine is None:
        version = getattr(trt, "__version__", "?")
        raise UsageError(
            f"{path}: TensorRT {version} could not deserialize it. Likely: it was built by "
            "another TensorRT version or for another GPU (engines are specific to both), it "
            "needs a plugin library that is not loaded, or it is not an engine file (TensorRT's "
            "log above says which). Tried: " + ", ".join(
                (["standard plugins registered"] if plugins else [])
                + ["host code allowed (version-compatible engines)"
                   if hasattr(runtime, "engine_host_code_allowed") else
                   "no host code (this TensorRT predates version-compatible engines)"]
                + (["an Ultralytics header skipped"] if metadata is not None else [])),
            hint="rebuild it here: trtexec --onnx=model.onnx --saveEngine=...; a custom plugin: "
                 "load its library first (trtexec --staticPlugins)")
    if not hasattr(engine, "num_io_tensors"):
        raise HardwareError(f"TensorRT {getattr(trt, '__version__', '?')} lacks the named-tensor "
                            "API (8.5+) jetbench uses", hint="JetPack 5.1 or newer")
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    is_input = {n: engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT for n in names}
    _refuse_shape_tensors(engine, names, is_input, path)
    declared = {n: list(engine.get_tensor_shape(n)) for n in names if is_input[n]}
    shapes = resolve_shapes(declared, input_shape, batch, path)
    context = engine.create_execution_context()
    stream = buffers.stream_handle()
    profiles = int(getattr(engine, "num_optimization_profiles", 1) or 1)
    if profiles > 1:
        chosen = covering_profile(engine, profiles, shapes, path)
        context.set_optimization_profile_async(chosen, stream)
        notes.append(f"the engine has {profiles} optimization profiles: profile {chosen}, the "
                     "first whose ranges hold these input shapes, is used")
    for name, shape in shapes.items():
        if not context.set_input_shape(name, shape):
            raise UsageError(f"{path}: input {name!r} shape {'x'.join(map(str, shape))} is "
                             "outside the engine's optimization profile",
                             hint="use a --batch/--input-shape the engine was built for")
    dtypes = {n: _dtype(engine.get_tensor_dtype(n), n) for n in names}
    outputs = {n: tuple(context.get_tensor_shape(n)) for n in names if not is_input[n]}
    for name, shape in outputs.items():
        if any(d < 0 for d in shape):
            raise UsageError(f"{path}: output {name!r} has a data-dependent shape "
                             f"({'x'.join(map(str, shape))} once the inputs are set): it needs "
                             "an output allocator, which jetbench does not provide",
                             hint="time it with trtexec (measure --cmd 'trtexec "
                                  "--loadEngine=...' --throughput-from trtexec)")
    fill = CONSTANT_INPUT if input_mode == "constant" else float("nan")
    tensors = {}
    for name in names:
        shape = shapes[name] if is_input[name] else outputs[name]
        padded = vectorized_shape(engine, name, shape)
        if padded != tuple(shape):
            notes.append(f"{name}: a vectorised format, its buffer padded to "
                         f"{'x'.join(map(str, padded))} (from {'x'.join(map(str, shape))})")
        floating = dtypes[name].startswith(("float", "bfloat"))
        tensors[name] = buffers.alloc(padded, dtypes[name],
                                      fill if is_input[name] and floating else None)
        context.set_tensor_address(name, buffers.address(tensors[name]))
    return EngineRun(engine, context, shapes, outputs, dtypes, tensors, stream, tuple(notes))


def covering_profile(engine: TrtObject, profiles: int, shapes: Dict[str, Tuple[int, ...]],
                     path: str) -> int:
    """The first optimization profile whose (min, max) ranges hold every input shape
    (`get_tensor_profile_shape(name, k)` gives min, opt, max); profile 0 where the engine does
    not say (its ranges are then checked by set_input_shape). None holds them: a UsageError
    listing each profile's batch range."""
    ranges = getattr(engine, "get_tensor_profile_shape", None)
    if ranges is None:
        return 0

    def holds(k: int) -> bool:
        for name, shape in shapes.items():
            lo, _opt, hi = (tuple(d) for d in ranges(name, k))
            if len(lo) != len(shape) or not all(a <= d <= b for a, d, b in zip(lo, shape, hi)):
                return False
        return True

    for k in range(profiles):
        if holds(k):
            return k
    first = next(iter(shapes))
    listed = ", ".join(f"profile {k}: batch {ranges(first, k)[0][0]}..{ranges(first, k)[2][0]}"
                       for k in range(profiles))
    raise UsageError(f"{path}: no optimization profile holds input {first!r} shape "
                     f"{'x'.join(map(str, shapes[first]))} ({listed})",
                     hint="use a --batch/--input-shape one of the engine's profiles covers")


def split_ultralytics(data: bytes) -> Tuple[bytes, Optional[Dict[str, object]]]:
    """(engine bytes, metadata): Ultralytics writes a 4-byte little-endian length, that many
    bytes of JSON metadata, then the serialized engine; a plain engine is returned whole."""
    import json

    if len(data) < 8:
        return data, None
    size = int.from_bytes(data[:4], "little")
    if not 2 <= size <= min(len(data) - 4, 1 << 20) or data[4:5] != b"{":
        return data, None
    try:
        meta = json.loads(data[4:4 + size].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return data, None
    return (data[4 + size:], meta) if isinstance(meta, dict) else (data, None)


def vectorized_shape(engine: TrtObject, name: str, shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """A vectorised format (int8 CHW32, fp16 CHW16, DLA HWC4) packs its vectorised dimension in
    groups of `components` elements: the buffer rounds that dimension up, as TensorRT's samples
    size theirs (get_tensor_vectorized_dim, get_tensor_components_per_element)."""
    dim_of = getattr(engine, "get_tensor_vectorized_dim", None)
    per_of = getattr(engine, "get_tensor_components_per_element", None)
    if dim_of is None or per_of is None:
        return tuple(shape)
    dim, per = int(dim_of(name)), int(per_of(name))
    if dim < 0 or per <= 1 or dim >= len(shape):
        return tuple(shape)
    out = list(shape)
    out[dim] = -(-out[dim] // per) * per
    return tuple(out)


def _refuse_shape_tensors(engine: TrtObject, names: List[str], is_input: Dict[str, bool],
                          path: str) -> None:
    """A shape tensor (its values set shapes) lives in host memory and is set with
    set_tensor_address on host data; jetbench binds device buffers only."""
    check = getattr(engine, "is_shape_inference_io", None)
    if check is None:
        return
    shaped = [n for n in names if is_input[n] and check(n)]
    if shaped:
        raise UsageError(f"{path}: input(s) {', '.join(shaped)} are shape tensors (their values "
                         "set the shapes), which jetbench cannot feed",
                         hint="time it with trtexec --loadEngine=... --shapes=..., through "
                              "measure --cmd ... --throughput-from trtexec")

def _dtype(trt_dtype: TrtObject, name: str) -> str:
    key = getattr(trt_dtype, "name", str(trt_dtype)).rsplit(".", 1)[-1]
    if key not in _DTYPES:
        raise UsageError(f"tensor {name!r} is {key}, which jetbench cannot feed")
    return _DTYPES[key]


class TorchBuffers:
    """Device tensors and one stream from PyTorch on `device` ('cuda' or 'cuda:N')."""

    def __init__(self, torch: ModuleType, device: str, seed: int = 0):
        self.torch, self.device = torch, device
        self.stream = torch.cuda.Stream(device=device)
        self.generator = torch.Generator(device=device).manual_seed(seed + 1)

    def alloc(self, shape: Tuple[int, ...], dtype: str, fill: Optional[float]) -> Tensor:
        """Allocated and filled on the engine's own stream: filled on the legacy default
        stream, the engine (on a stream of its own) could read them before they are written."""
        kind = getattr(self.torch, dtype)
        with self.torch.cuda.stream(self.stream):
            if fill is None:
                return self.torch.zeros(shape, dtype=kind, device=self.device)
            if fill != fill:  # nan: Gaussian
                return self.torch.randn(shape, generator=self.generator,
                                        device=self.device).to(kind)
            return self.torch.full(shape, fill, dtype=kind, device=self.device)

    def address(self, tensor: Tensor) -> int:
        return int(tensor.data_ptr())

    def stream_handle(self) -> int:
        return int(self.stream.cuda_stream)


def build_engine_workload(model: str, precision: str, batch: int, device: str, input_mode: str,
                          input_shape: Optional[InputShape]) -> Workload:
    """The engine on a CUDA device, timed with CUDA events on its stream. `precision` labels
    what the engine was built with: an engine runs as built, jetbench cannot convert it."""
    trt = import_tensorrt()
    torch = import_torch()
    dev = resolve_device(device)
    if not is_cuda(dev):
        raise UsageError(f"a TensorRT engine runs on a CUDA GPU, not on {dev}",
                         hint="use --device cuda (or auto on a machine with a GPU)")
    with device_context(torch, dev), engine_errors(model):
        buffers = TorchBuffers(torch, dev)
        run = load_engine(trt, model, batch, input_shape, input_mode, buffers)
        with torch.cuda.stream(buffers.stream):
            run.enqueue()  # the first inference initialises lazily: never in a window
        buffers.stream.synchronize()
    stream = buffers.stream

    @contextlib.contextmanager
    def frame(label: str) -> Iterator[None]:
        with device_context(torch, dev), torch.cuda.stream(stream), engine_errors(label):
            yield

    first = next(iter(run.tensors.values()))
    details = {"tensorrt_version": getattr(trt, "__version__", None), "buffers": "pytorch",
               "inputs": {n: list(s) for n, s in run.inputs.items()},
               "outputs": {n: list(s) for n, s in run.outputs.items()},
               "dtypes": run.dtypes, "timing": "CUDA events on the engine's stream"}
    notes: List[str] = [f"a TensorRT engine runs in the precisions it was built with: "
                        f"'{precision}' is the label given (--precision), not a conversion; an "
                        "engine built without --noTF32 may run fp32 layers in TF32 (Ampere+)",
                        *run.notes]
    footprint = sum(int(t.numel()) * int(t.element_size()) for t in run.tensors.values())
    first_output = next(iter(run.outputs), None)

    def outputs() -> Optional[Tensor]:
        run.enqueue()
        return run.tensors[first_output] if first_output is not None else None

    return Workload(model, precision, batch, dev, input_mode, RunOptions(), run.engine, first,
                    None, footprint, run.enqueue, stream.synchronize, contextlib.nullcontext,
                    tuple(notes), framework="tensorrt", details=details, frame=frame,
                    outputs=outputs)


_OOM_MARKERS = ("out of memory", "outofmemory", "cudaerrormemoryallocation",
                "failed to allocate")


@contextlib.contextmanager
def engine_errors(what: str) -> Iterator[None]:
    """A CUDA/TensorRT allocation failure as OutOfMemory; other runtime failures as a
    HardwareError naming the engine (jetbench's own errors pass through)."""
    try:
        yield
        return
    except (RuntimeError, MemoryError) as err:
        text = " ".join(str(err).split())
    if any(m in text.lower() for m in _OOM_MARKERS):
        raise OutOfMemory(f"{what}: out of memory ({text[:300]})", hint="use a smaller --batch")
    raise HardwareError(f"{what}: TensorRT failed ({text[:300]})")
