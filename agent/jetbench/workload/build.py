"""Building any workload from a `--model`: a PyTorch network (pytorch.py), an ONNX model (ONNX
Runtime, runtimes/onnx/model.py) or a TensorRT engine (runtimes/tensorrt/engine.py); a built-in
network under another `--runtime` (runtimes/build.py).

Each comes back as a `Workload` whose `frame` and `host_timed` tell the runner how to time it,
so `run_timed` (warm-up, timed loop, the power window's hooks) is the same for every kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..errors import UsageError
from .base import RunOptions, Workload
from .model_arg import ONNX, PYTORCH, SIM, TENSORRT, InputShape, check_model_file, model_kind
from .pytorch import INPUT_MODES, build_torch_workload
from .runtimes import TORCH
from .runtimes.build import build_for_runtime
from .runtimes.onnx.model import build_onnx_workload
from .runtimes.tensorrt.engine import build_engine_workload

if TYPE_CHECKING:  # torch is optional at run time
    from torch.nn import Module

# RunOptions that only mean something to PyTorch, with what they are called on the command line
_TORCH_ONLY = (("mode", "inference", "--mode train"), ("cudnn", True, "--no-cudnn"),
               ("cudnn_benchmark", False, "--cudnn-benchmark"),
               ("channels_last", False, "--channels-last"), ("cuda_graph", False, "--cuda-graph"),
               ("compile", False, "--compile"), ("memory_limit_bytes", None, "--memory-limit"),
               ("runtime", TORCH, "--runtime"))


def build_workload(model: str, precision: str = "fp32", batch: int = 1, device: str = "auto",
                   input_mode: str = "constant", options: Optional[RunOptions] = None,
                   input_shape: Optional[InputShape] = None,
                   module: Optional[Module] = None) -> Workload:
    """`model` ready to time: see workload.build_torch_workload for a PyTorch network (`module`
    passes an already-built nn.Module); an ONNX model (`*.onnx`) or a TensorRT engine
    (`*.engine`, `*.plan`) is built by its own framework, and `input_shape` may then name
    inputs (workload/model_arg.py)."""
    options = options or RunOptions()
    if batch < 1:
        raise UsageError(f"batch must be at least 1, not {batch}")
    if input_mode not in INPUT_MODES:
        raise UsageError(f"unknown input: {input_mode!r}", hint="use constant or random")
    kind = model_kind(model)
    if options.runtime != TORCH and module is None and kind == PYTORCH:
        return build_for_runtime(model, precision, batch, device, input_mode, options,
                                 input_shape)
    if kind == PYTORCH or module is not None:
        return build_torch_workload(model, precision, batch, device, input_mode, options,
                                    input_shape, module)
    return _build_other(model, kind, precision, batch, device, input_mode, options, input_shape)


def _build_other(model: str, kind: str, precision: str, batch: int, device: str,
                 input_mode: str, options: RunOptions, input_shape: Optional[InputShape]
                 ) -> Workload:
    if kind == SIM:
        raise UsageError(f"{model}: a simulated network runs on a simulated board",
                         hint="use it with measure, sweep or demo and --root on a board from "
                         "`jetbench sim create`")
    check_model_file(model)
    for attr, default, flag in _TORCH_ONLY:
        if getattr(options, attr) != default:
            raise UsageError(f"{flag} applies to PyTorch networks, not to {model}",
                             hint=f"drop {flag}")
    if kind == ONNX:
        return build_onnx_workload(model, precision, batch, device, input_mode, options,
                                   input_shape)
    if kind == TENSORRT:
        if options.provider:
            raise UsageError("--provider applies to ONNX models (a TensorRT engine runs on "
                             "TensorRT)", hint="drop --provider")
        return build_engine_workload(model, precision, batch, device, input_mode, input_shape)
    raise UsageError(f"{model}: not an ONNX model or a TensorRT engine")
