"""A built-in network under a runtime other than PyTorch eager (`--runtime`, workload/runtimes/), as
the `Workload` the runner times: TorchScript and torch.compile are built by
`build_torch_workload`; ONNX Runtime runs jetbench's cached export (onnx/export.py), TensorRT
an engine built from it (tensorrt/build.py). Each is checked against PyTorch eager before it is
returned (output_check.py): the result's `workload.output_check` says by how much it agreed.

A runtime that cannot run here (not installed, no CUDA GPU for TensorRT, training in an
inference-only runtime) is `RuntimeUnavailable` with what to install: the row says
`unavailable` and the other runtimes still run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, Optional, Tuple

from ...errors import HardwareError
from .._torch import import_torch
from ..base import RunOptions, Workload
from ..device_facts import ampere_precision_reason, tf32_unavailable_reason
from ..macs import builtin_cost
from ..model_arg import InputShape, torch_shape
from ..precision import PrecisionUnavailable
from ..pytorch import build_torch_workload, cuda_index, is_cuda, resolve_device
from ..registry import get_spec
from . import EXPORTED, ONNXRUNTIME, TENSORRT, RuntimeUnavailable
from .onnx.export import exported_onnx
from .onnx.model import build_onnx_workload, import_onnxruntime
from .output_check import check_outputs
from .tensorrt.build import built_engine, strongly_typed
from .tensorrt.engine import build_engine_workload, import_tensorrt


def build_for_runtime(model: str, precision: str, batch: int, device: str, input_mode: str,
                      options: RunOptions, input_shape: Optional[InputShape]) -> Workload:
    """Built-in `model` under `options.runtime`, checked against PyTorch eager."""
    runtime = options.runtime
    if runtime in EXPORTED and options.mode != "inference":
        raise RuntimeUnavailable(f"{runtime} runs inference only in jetbench (forward+backward "
                                 "needs a framework that trains)",
                                 hint="use torch, torchscript or compile for --mode train")
    if runtime == ONNXRUNTIME:
        workload = _onnxruntime(model, precision, batch, device, input_mode, options,
                                input_shape)
    elif runtime == TENSORRT:
        workload = _tensorrt(model, precision, batch, device, input_mode, options, input_shape)
    else:
        workload = build_torch_workload(model, precision, batch, device, input_mode, options,
                                        input_shape)
    check = check_outputs(workload, runtime, options.seed)
    workload.details = {**workload.details, "output_check": check}
    return workload


def _onnxruntime(model: str, precision: str, batch: int, device: str, input_mode: str,
                 options: RunOptions, input_shape: Optional[InputShape]) -> Workload:
    try:
        import_onnxruntime()
    except HardwareError as err:
        raise RuntimeUnavailable(str(err), hint=err.hint) from err
    if precision == "bf16":  # the file would not load: said as this row's, before exporting
        raise PrecisionUnavailable("bf16 under ONNX Runtime: jetbench's opset-17 export has no "
                                   "bfloat16 Conv, so ONNX Runtime refuses the file",
                                   hint="use fp16 (or bf16 under torch, torchscript, compile)")
    if precision == "tf32":  # ORT's use_tf32 permits TF32 math: only an Ampere+ GPU has it
        torch = import_torch()
        dev = resolve_device(device)
        reason = tf32_unavailable_reason(torch, dev)
        if reason:
            raise PrecisionUnavailable(reason, hint="use fp32")
    shape = torch_shape(input_shape)
    path = exported_onnx(model, precision, batch, options.seed, shape)
    workload = build_onnx_workload(str(path), precision, batch, device, input_mode,
                                   RunOptions(provider=options.provider, seed=options.seed),
                                   None)
    return _as_network(workload, model, shape, {"onnx_file": str(path)})


def _tensorrt(model: str, precision: str, batch: int, device: str, input_mode: str,
              options: RunOptions, input_shape: Optional[InputShape]) -> Workload:
    try:
        trt = import_tensorrt()
    except HardwareError as err:
        raise RuntimeUnavailable(str(err), hint=err.hint) from err
    torch = import_torch()
    dev = resolve_device(device)
    if not is_cuda(dev):
        raise RuntimeUnavailable(f"TensorRT runs on a CUDA GPU; this run is on {dev}",
                                 hint="use --device cuda on a machine with an NVIDIA GPU")
    index = cuda_index(torch, dev)
    major, minor = torch.cuda.get_device_capability(index)
    reason = ampere_precision_reason(precision, (major, minor), "TensorRT")
    if reason:  # as torch's row says it: a flag permits, it does not require
        raise PrecisionUnavailable(reason, hint="use fp32 or fp16")
    gpu = f"{torch.cuda.get_device_name(index)}_sm{major}{minor}"
    shape = torch_shape(input_shape)
    # TensorRT 8-10 build weakly typed: from an fp32 file, its FP16/BF16 flag picks 16-bit
    # kernels, so the export never traces the network in fp16 on the CPU (torch builds without
    # CPU half convolutions cannot); TensorRT 11 is strongly typed: the file's types rule
    dtype = "float32" if not strongly_typed(trt) else None
    onnx_path = exported_onnx(model, precision, batch, options.seed, shape, dtype=dtype)
    with torch.cuda.device(index):  # TensorRT's builder builds on the current CUDA device
        engine = built_engine(trt, onnx_path, precision, gpu)
    workload = build_engine_workload(str(engine), precision, batch, dev, input_mode, None)
    workload.notes = (f"a TensorRT engine jetbench built from its ONNX export in {precision} "
                      "(TensorRT picks its kernels layer by layer within that precision)",)
    return _as_network(workload, model, shape, {"onnx_file": str(onnx_path),
                                                "engine_file": str(engine)})


def _as_network(workload: Workload, model: str, shape: Optional[Tuple[int, ...]],
                files: Dict[str, str]) -> Workload:
    """The workload named for the network it runs (not the cached file), with its MACs."""
    spec = get_spec(model)
    cost = builtin_cost(spec.name) if shape in (None, spec.input_shape) else None
    return replace(workload, model=spec.name, cost=cost,
                   details={**workload.details, **files, "exported_from": "pytorch"})
