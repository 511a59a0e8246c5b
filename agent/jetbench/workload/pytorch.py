"""A PyTorch workload: a network on a device in a precision, its input, and one step; and the
`Workload` every kind (ONNX Runtime, TensorRT too) is built into.

`build.build_workload()` is the library entry point; `runner.run_timed()` times what it returns.
"""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import (
    TYPE_CHECKING,
    Callable,
    ContextManager,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
)

from ..errors import OutOfMemory, UsageError, first_line
from . import device_facts as portable
from ._torch import import_torch
from .base import MODES, RunOptions, Workload
from .custom import load_custom, looks_custom
from .device_facts import (  # noqa: F401
    CONSTANT_INPUT,
    INPUT_MODES,
    cuda_index,
    fp32_math_knobs,
    is_cuda,
    set_fp32_math,
)
from .device_facts import make_input as _make_input
from .macs import ModelCost, builtin_cost, macs_or_none
from .model_arg import InputShape, torch_shape
from .precision import PRECISIONS, PrecisionUnavailable, apply_precision
from .registry import get_spec, is_builtin
from .runtimes import COMPILE, TORCHSCRIPT, RuntimeUnavailable

if TYPE_CHECKING:  # torch is optional at run time; its types are the dev venv's
    from torch import Tensor
    from torch.nn import Module

Step = Callable[[], object]  # one iteration; returns the outputs the output check reads


class TorchWorkload(Workload):
    """A PyTorch network: timed inside PyTorch's settings (cuDNN, TF32, threads), its device
    made current and its out-of-memory errors turned into jetbench's."""

    def running(self, label: str) -> ContextManager[object]:
        if self.frame is not None:
            return self.frame(label)
        return _torch_frame(self, label)


@contextlib.contextmanager
def _torch_frame(workload: Workload, label: str) -> Iterator[None]:
    with backend_settings(workload.options, workload.precision), oom_guard(label), \
            device_context(import_torch(), workload.device), workload.context():
        yield


def torch_parts(workload: Workload) -> Tuple[Module, Tensor]:
    """A PyTorch workload's network and input batch (Workload holds any framework's); a
    UsageError for any other kind."""
    from torch import Tensor
    from torch.nn import Module

    net, batch = workload.module, workload.input
    if not isinstance(net, Module) or not isinstance(batch, Tensor):
        raise UsageError(f"{workload.model}: not a PyTorch network (it runs under "
                         f"{workload.framework})")
    return net, batch


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when present, else 'cpu'; 'cuda:N' is kept (and checked against the GPUs
    PyTorch sees). 'cuda' without a GPU is a usage error."""
    try:
        return portable.resolve_device(import_torch(), device)
    except portable.DeviceProblem as problem:
        raise UsageError(problem.message, hint=problem.hint) from None


def device_context(torch: ModuleType, device: str) -> ContextManager[object]:
    """Makes `device` the current CUDA device for the duration (events, streams, graphs and
    synchronisation then go to it); nothing for the CPU."""
    if is_cuda(device):
        return torch.cuda.device(cuda_index(torch, device))
    return contextlib.nullcontext()


@contextlib.contextmanager
def backend_settings(options: RunOptions, precision: str = "fp32") -> Iterator[None]:
    """Applies threads, cuDNN flags and fp32 math (IEEE for fp32, TF32 for tf32: PyTorch's own
    default lets cuDNN use TF32 for "fp32") for the duration, then puts the previous ones back."""
    torch = import_torch()
    saved = (torch.get_num_threads(), torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark,
             _fp32_math_state(torch))
    try:
        if options.threads:
            torch.set_num_threads(options.threads)
        torch.backends.cudnn.enabled = options.cudnn
        torch.backends.cudnn.benchmark = options.cudnn_benchmark
        set_fp32_math(torch, precision == "tf32")
        yield
    finally:
        torch.set_num_threads(saved[0])
        torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark = saved[1], saved[2]
        _put_fp32_math(torch, saved[3])


def _fp32_math_state(torch: ModuleType) -> List[Tuple[object, str, object]]:
    return [(obj, name, getattr(obj, name)) for obj, name in fp32_math_knobs(torch)]


def _put_fp32_math(torch: ModuleType, state: List[Tuple[object, str, object]]) -> None:
    for obj, name, value in state:
        setattr(obj, name, value)


@contextlib.contextmanager
def oom_guard(what: str) -> Iterator[None]:
    """Turns an allocator's out-of-memory (CUDA's OutOfMemoryError, CPU's RuntimeError or
    MemoryError) into jetbench's OutOfMemory, after releasing what the failed attempt held;
    any other failure of the network on its input (a user model given the wrong
    --input-shape, BatchNorm training on one value per channel) into a UsageError; a dtype
    with no kernel on the device (fp16 convolution on the CPU in torch 1.10) into
    PrecisionUnavailable."""
    unavailable: Optional[PrecisionUnavailable] = None
    try:
        yield
        return
    except (RuntimeError, MemoryError, ValueError) as err:
        if portable.is_missing_kernel(err):
            unavailable = PrecisionUnavailable(
                f"no kernel for this precision on this device in torch "
                f"{import_torch().__version__} ({first_line(err)})")
        oom = is_out_of_memory(err)
        message = f"{what}: {'out of memory' if oom else 'the network failed'} " \
                  f"({first_line(err)})"
    # Raised outside the except block: the failed attempt's frames (and tensors) are freed.
    _release_memory()
    if unavailable is not None:
        raise unavailable
    if oom:
        raise OutOfMemory(message, hint="use a smaller --batch")
    raise UsageError(message, hint="check --input-shape and --batch for this network")


def is_out_of_memory(err: BaseException) -> bool:
    return portable.is_out_of_memory(import_torch(), err)


def build_torch_workload(
    model: str,
    precision: str = "fp32",
    batch: int = 1,
    device: str = "auto",
    input_mode: str = "constant",
    options: Optional[RunOptions] = None,
    input_shape: Optional[InputShape] = None,
    module: Optional[Module] = None,
) -> Workload:
    """A network (`model`: a built-in name from `jetbench models`, a TorchScript file, or
    `module:callable`) with Gaussian weights (seed `options.seed`), in `precision` (fp32, fp16,
    bf16, int8) on `device` (auto, cpu, cuda), fed `batch` images of the constant (default) or
    random Gaussian input. `input_shape` (CHW) overrides the network's own, and is required for a
    user model. `module` passes an already-built float32 nn.Module instead of building one.

    Raises UsageError (bad arguments), PrecisionUnavailable (e.g. int8 on CUDA without
    TensorRT), OutOfMemory (did not fit, or over `options.memory_limit_bytes`).

    An ONNX model (`*.onnx`) or a TensorRT engine (`*.engine`, `*.plan`) is built by its own
    framework (workload/model_arg.py); `input_shape` may then name inputs."""
    options = options or RunOptions()
    input_shape = torch_shape(input_shape)
    torch = import_torch()
    _validate(precision, batch, input_mode, options)
    dev = resolve_device(device)
    net, shape, cost = _load(model, module, input_shape, options.seed)
    footprint = estimate_footprint_bytes(cost, net, precision, batch, shape, options.mode)
    label = f"{model} {precision} batch {batch}"
    with backend_settings(options, precision), oom_guard(label), device_context(torch, dev):
        _check_memory_limit(footprint, options.memory_limit_bytes, dev, label)
        net = net.train() if options.mode == "train" else net.eval()
        example = _make_input(torch, input_mode, batch, shape, options.seed).to(dev)
        net = net.to(dev)
        if options.channels_last and example.dim() == 4:
            # torch's stubs leave out Module.to's memory_format (its documentation has it)
            net = net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
            example = example.contiguous(memory_format=torch.channels_last)
        net, example = apply_precision(net, precision, dev, example)
        if options.runtime == TORCHSCRIPT:
            net = _torchscript(torch, net, example, options.mode, label)
        if options.compile or options.runtime == COMPILE:
            if not hasattr(torch, "compile"):
                if options.runtime == COMPILE:  # one row of several: the others still run
                    raise RuntimeUnavailable(f"torch.compile needs torch 2.0 or newer (this "
                                             f"is {torch.__version__})", hint="drop compile "
                                             "from --runtime; the other runtimes still run")
                raise UsageError(f"--compile needs torch 2.0 or newer (this is "
                                 f"{torch.__version__})", hint="drop --compile")
            why = compile_unavailable_reason(torch, dev)
            if why is not None:  # said before Inductor's own TritonMissing/GPUTooOldForTriton
                raise RuntimeUnavailable(why, hint="drop compile (or --compile); the other "
                                         "runtimes still run")
            net = torch.compile(net)
        step, context = _make_step(torch, net, example, options.mode)
        sync = _cuda_sync(torch, dev) if is_cuda(dev) else _no_sync
        if options.compile:  # compiles at its first call: here, never in the warm-up, whose
            with context():  # cap would pass while it compiles (--runtime compile's output
                step()  # check makes that first call at build already)
            sync()
        if options.cuda_graph:
            step = _capture_graph(torch, step, context, dev)
    notes = ("no MAC count for this model (graph not traceable)",) if cost is None else ()
    return TorchWorkload(model, precision, batch, dev, input_mode, options, net, example, cost,
                    footprint, step, sync, context, notes)


def compile_unavailable_reason(torch: ModuleType, device: str) -> Optional[str]:
    """None where torch.compile's default backend (Inductor) can generate code for `device`;
    else why not. On CUDA it generates Triton kernels: Triton must import and the GPU must be
    compute capability 7.0 or newer (Inductor raises TritonMissing / GPUTooOldForTriton at the
    first call otherwise: torch/_inductor/scheduler.py); on the CPU it generates C++."""
    if not is_cuda(device):
        return None
    # the GPU first: torch's has_triton() is also False for a GPU too old for Triton, with
    # Triton installed (it checks the device's capability), which is not "not installed"
    major, minor = torch.cuda.get_device_capability(torch.device(device))
    if (major, minor) < (7, 0):
        return (f"torch.compile's Triton kernels need compute capability 7.0 or newer; this "
                f"GPU is {major}.{minor} (Nano, TX1, TX2)")
    triton = getattr(getattr(torch, "utils", None), "_triton", None)
    has_package = getattr(triton, "has_triton_package", None)
    if has_package is not None and not has_package():
        return ("torch.compile on CUDA generates Triton kernels, and Triton is not installed "
                "for this torch (torch.utils._triton.has_triton_package() is False)")
    has_triton = getattr(triton, "has_triton", None)
    if has_triton is not None and not has_triton():
        return ("torch.compile on CUDA generates Triton kernels, and Triton is not installed "
                "for this torch (torch.utils._triton.has_triton() is False)")
    return None


def _validate(precision: str, batch: int, input_mode: str, options: RunOptions) -> None:
    if precision not in PRECISIONS:
        raise UsageError(f"unknown precision: {precision!r}",
                         hint="use fp32, tf32, fp16, bf16, int8")
    if options.mode not in MODES:
        raise UsageError(f"unknown mode: {options.mode!r}", hint="use inference or train")
    if options.mode == "train" and precision == "int8":
        raise PrecisionUnavailable("int8 is inference-only", hint="use --mode inference")
    if options.provider:
        raise UsageError("--provider applies to ONNX models (.onnx)", hint="drop --provider")
    if options.cuda_graph and options.mode == "train":
        raise UsageError("--cuda-graph captures inference only", hint="drop --cuda-graph")


def _load(name: str, module: Optional[Module], input_shape: Optional[Sequence[int]], seed: int
          ) -> Tuple[Module, Tuple[int, ...], Optional[ModelCost]]:
    if module is not None:
        if input_shape is None:
            raise UsageError(f"{name}: a module passed in needs its input_shape")
        shape = tuple(input_shape)
        return module, shape, macs_or_none(module, shape)
    if is_builtin(name):
        spec = get_spec(name)
        shape = tuple(input_shape) if input_shape else spec.input_shape
        net = spec.build(seed)
        cost = builtin_cost(spec.name) if shape == spec.input_shape else macs_or_none(net, shape)
        return net, shape, cost
    if not looks_custom(name):
        get_spec(name)  # raises the "unknown model" error with its hint
    net = load_custom(name, input_shape)
    shape = tuple(input_shape or ())
    return net, shape, macs_or_none(net, shape)


def estimate_footprint_bytes(cost: Optional[ModelCost], net: Module, precision: str, batch: int,
                             shape: Sequence[int], mode: str) -> int:
    """Weights + input + activations: all of them in training (kept for backward, plus
    gradients), the largest layer's input+output in inference. An estimate, for the
    memory limit; the allocator has the last word on a real device."""
    elem = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "int8": 1}[precision]
    params = cost.params if cost else sum(p.numel() for p in net.parameters())
    sample = 1
    for dim in shape:
        sample *= int(dim)
    if cost is None:
        acts = 0
    elif mode == "train":
        acts = cost.activation_elems_per_image * 2
    else:
        acts = cost.peak_layer_elems_per_image
    weights = params * elem * (2 if mode == "train" else 1)
    return int(weights + batch * (sample + acts) * max(elem, 1))


def _check_memory_limit(footprint: int, limit: Optional[int], device: str, label: str) -> None:
    if limit is None:
        return
    torch = import_torch()
    if is_cuda(device):
        index = cuda_index(torch, device)
        total = torch.cuda.get_device_properties(index).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), index)
    if footprint > limit:
        # Same handling as a real allocator failure (torch.OutOfMemoryError is torch 1.13+;
        # before it, CUDA's OOM was a RuntimeError saying "out of memory", as this one does).
        error = getattr(torch, "OutOfMemoryError", RuntimeError)
        raise error(
            f"out of memory: needs about {footprint / 2**20:.0f} MiB, memory limit is "
            f"{limit / 2**20:.0f} MiB"
        )


def _torchscript(torch: ModuleType, net: Module, example: Tensor, mode: str, label: str) -> Module:
    """torch.jit.trace of the network on its input; frozen for inference (weights folded in as
    constants, as torch.jit.optimize_for_inference does)."""
    try:
        if mode == "inference":
            with torch.no_grad():
                return torch.jit.freeze(torch.jit.trace(net.eval(), example))
        return torch.jit.trace(net, example)
    except Exception as err:  # noqa: BLE001 - a network TorchScript cannot trace
        raise RuntimeUnavailable(f"{label}: TorchScript could not trace it "
                                 f"({first_line(err)})", hint="use --runtime torch") from err


def _make_step(torch: ModuleType, net: Module, example: Tensor, mode: str
               ) -> Tuple[Step, Callable[[], ContextManager[object]]]:
    if mode == "inference":
        def forward() -> object:
            return net(example)

        return forward, torch.inference_mode

    params = [p for p in net.parameters() if p.requires_grad]

    def forward_backward() -> object:
        for p in params:
            p.grad = None
        out = net(example)
        out.float().sum().backward()
        return out

    return forward_backward, contextlib.nullcontext


def _capture_graph(torch: ModuleType, step: Step, context: Callable[[], ContextManager[object]],
                   device: str) -> Step:
    """Replays the whole forward as one CUDA graph (static input, captured after 3 warm-up runs
    on a side stream as PyTorch requires). Only for a workload on CUDA: on the CPU a graph
    would capture nothing and its replay time nothing."""
    if not is_cuda(device):
        raise UsageError(f"--cuda-graph needs the workload on a CUDA device (it is on {device})",
                         hint="use --device cuda, or drop --cuda-graph")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with context(), torch.cuda.stream(stream):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with context(), torch.cuda.graph(graph):
        static_out = step()  # the graph's output tensor: each replay writes into it

    def replay() -> object:  # graph.replay() returns None; the output check reads the outputs
        graph.replay()
        return static_out

    return replay


def _cuda_sync(torch: ModuleType, device: str) -> Callable[[], None]:
    index = cuda_index(torch, device)

    def sync() -> None:
        torch.cuda.synchronize(index)

    return sync


def _no_sync() -> None:
    return None


def _release_memory() -> None:
    import gc

    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass
