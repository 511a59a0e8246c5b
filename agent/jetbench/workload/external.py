"""Workloads another framework runs: an ONNX model (ONNX Runtime) or a TensorRT engine.

Both come back as a `Workload` whose `frame` and `host_timed` tell the runner how to time them,
so `run_timed` (warm-up, timed loop, the power window's hooks) is the same for every kind.
"""

from __future__ import annotations

from typing import Optional

from ..errors import UsageError
from .model_arg import ONNX, TENSORRT, InputShape, check_model_file, model_kind
from .workload import INPUT_MODES, RunOptions, Workload

# RunOptions that only mean something to PyTorch, with what they are called on the command line
_TORCH_ONLY = (("mode", "inference", "--mode train"), ("cudnn", True, "--no-cudnn"),
               ("cudnn_benchmark", False, "--cudnn-benchmark"),
               ("channels_last", False, "--channels-last"), ("cuda_graph", False, "--cuda-graph"),
               ("compile", False, "--compile"), ("memory_limit_bytes", None, "--memory-limit"))


def build_external(model: str, precision: str, batch: int, device: str, input_mode: str,
                   options: RunOptions, input_shape: Optional[InputShape]) -> Workload:
    """`model` (a .onnx, .engine or .plan file) ready to time; see build_workload."""
    kind = model_kind(model)
    check_model_file(model)
    if batch < 1:
        raise UsageError(f"batch must be at least 1, not {batch}")
    if input_mode not in INPUT_MODES:
        raise UsageError(f"unknown input: {input_mode!r}", hint="use constant or random")
    for attr, default, flag in _TORCH_ONLY:
        if getattr(options, attr) != default:
            raise UsageError(f"{flag} applies to PyTorch networks, not to {model}",
                             hint=f"drop {flag}")
    if kind == ONNX:
        from .onnx_model import build_onnx_workload

        return build_onnx_workload(model, precision, batch, device, input_mode, options,
                                   input_shape)
    if kind == TENSORRT:
        if options.provider:
            raise UsageError("--provider applies to ONNX models (a TensorRT engine runs on "
                             "TensorRT)", hint="drop --provider")
        from .tensorrt_engine import build_engine_workload

        return build_engine_workload(model, precision, batch, device, input_mode, input_shape)
    raise UsageError(f"{model}: not an ONNX model or a TensorRT engine")
