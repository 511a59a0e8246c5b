"""A built-in network exported to ONNX by jetbench itself (for `--runtime onnxruntime` and
`--runtime tensorrt`), cached so that the export happens once and never inside a timed window.

The file is the network with the same Gaussian weights PyTorch runs (same seed), a fixed batch
and input shape, in the precision asked for: fp16/bf16 weights and inputs for those, fp32 for
fp32 and tf32 (TensorRT 11 builds strongly typed: the file's types are the engine's).

The cache key is everything the file depends on: network, input shape, batch, precision,
seed, opset and the torch version (its initialisers decide the weights). A file is written
under a temporary name and renamed: a killed export leaves no half file a later run would take.

PyTorch's TorchScript-based exporter is used (`dynamo=False` where the argument exists): it is
in every torch a Jetson has (NVIDIA's wheels since 1.x) and needs no `onnxscript`.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import warnings
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Dict, Optional, Sequence

from ....errors import HardwareError, first_line
from ..._torch import import_torch
from ...precision import PrecisionUnavailable
from ...registry import get_spec
from ..cache_dir import cache_dir, write_cached

if TYPE_CHECKING:
    from torch import Tensor
    from torch.nn import Module

OPSET = 17  # ONNX Runtime 1.14+ and TensorRT 8.6+ read it (JetPack 5.1.2 and newer)
_DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def export_dtype(precision: str) -> str:
    """The element type the exported file holds for `precision`; int8 has no export (it would
    need calibration)."""
    if precision not in _DTYPES:
        raise PrecisionUnavailable(f"{precision} has no ONNX export in jetbench (int8 needs a "
                                   "calibrated model)", hint="use fp32 or fp16")
    return _DTYPES[precision]


def cache_name(model: str, shape: Sequence[int], batch: int, dtype: str, seed: int,
               torch_version: str, opset: int = OPSET) -> str:
    """'resnet18-3x224x224-b8-float16-seed0-opset17-torch2.13.0_cpu.onnx'."""
    words = [model, "x".join(str(int(d)) for d in shape), f"b{batch}", dtype, f"seed{seed}",
             f"opset{opset}", f"torch{torch_version}"]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(words)) + ".onnx"


def exported_onnx(model: str, precision: str, batch: int, seed: int = 0,
                  input_shape: Optional[Sequence[int]] = None,
                  dtype: Optional[str] = None) -> Path:
    """The cached ONNX file of built-in `model` (exported now if missing), in `precision`'s
    element type or `dtype` (float32 for a weakly typed TensorRT that makes fp16 itself)."""
    torch = import_torch()
    spec = get_spec(model)
    shape = tuple(input_shape or spec.input_shape)
    dtype = dtype or export_dtype(precision)
    path = cache_dir("onnx") / cache_name(spec.name, shape, batch, dtype, seed, torch.__version__)
    if path.is_file():
        return path
    net = spec.build(seed).eval().to(getattr(torch, dtype))
    example = torch.full((batch, *shape), 0.5, dtype=getattr(torch, dtype))
    # The exporter runs the network once: a 16-bit network on a torch without CPU half
    # kernels (NVIDIA's JetPack 5 wheels) runs on the GPU instead; the file is the same.
    devices = ["cpu"] + (["cuda"] if dtype != "float32" and torch.cuda.is_available() else [])
    failure: Optional[BaseException] = None
    for device in devices:
        try:
            return write_cached(path, functools.partial(_export_on, torch, net, example,
                                                        device=device))
        except Exception as err:  # noqa: BLE001 - any exporter failure is this runtime's problem
            failure = failure or err  # the CPU's reason: the one a user can act on
    raise PrecisionUnavailable(f"{model} {precision}: torch {torch.__version__} could not "
                               f"export it to ONNX ({first_line(failure) if failure else '?'})",
                               hint="try fp32, or another runtime") from failure


def _export_on(torch: ModuleType, net: Module, example: Tensor, path: str, device: str) -> None:
    _export(torch, net.to(device), example.to(device), path)


def _export(torch: ModuleType, net: Module, example: Tensor, path: str) -> None:
    kwargs: Dict[str, object] = {"opset_version": OPSET, "input_names": ["input"],
                                 "output_names": ["output"], "do_constant_folding": True}
    if "dynamo" in _parameters(torch.onnx.export):
        kwargs["dynamo"] = False  # the TorchScript exporter: no onnxscript needed
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice
        torch.onnx.export(net, (example,), path, **kwargs)
    if not os.path.getsize(path):
        raise HardwareError("the exporter wrote an empty file")


def _parameters(func: Callable[..., object]) -> Sequence[str]:
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return []
