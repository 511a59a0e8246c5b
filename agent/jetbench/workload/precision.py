"""Precisions: putting a float32 network into fp16, bf16 or int8 on a device, or saying clearly
why that combination is not available (never a silent fallback to another precision)."""

from __future__ import annotations

import contextlib
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

from ..errors import OutOfMemory, Unavailable, UsageError, first_line
from .device_facts import bf16_unavailable_reason, is_cuda, tf32_unavailable_reason

if TYPE_CHECKING:  # torch is optional at run time; its types are the dev venv's
    import torch
    from torch import Tensor
    from torch.fx import GraphModule
    from torch.nn import Module

# fp32 is IEEE fp32 (TF32 off); tf32 is fp32 tensors with TF32 tensor-core math (Ampere+).
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8")


class PrecisionUnavailable(Unavailable):
    """This precision cannot run on this device with what is installed."""


def parse_precisions(text: str) -> List[str]:
    """'fp16,fp32' -> ['fp16', 'fp32'] (also accepts float16/half/bfloat16/float32)."""
    aliases = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16",
               "bfloat16": "bf16", "qint8": "int8"}
    out: List[str] = []
    for word in text.split(","):
        key = aliases.get(word.strip().lower(), word.strip().lower())
        if not key:
            continue
        if key not in PRECISIONS:
            raise UsageError(f"unknown precision: {word!r}",
                             hint="use fp32, tf32, fp16, bf16, int8")
        if key not in out:
            out.append(key)
    if not out:
        raise UsageError("no precision given", hint="use e.g. --precision fp16,fp32")
    return out


def input_dtype(precision: str) -> torch.dtype:
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)


def apply_precision(model: Module, precision: str, device: str, example: Tensor
                    ) -> Tuple[Module, Tensor]:
    """(model, example input) converted to `precision` on `device`. `example` is the float32
    input on `device`; int8 uses it to calibrate. The model must be in eval mode for int8."""
    import torch

    if precision == "fp32":
        return model, example
    if precision == "tf32":
        reason = tf32_unavailable_reason(torch, device)
        if reason is not None:
            raise PrecisionUnavailable(reason, hint="use fp32 (IEEE) here; tf32 on Ampere or "
                                                    "newer (Orin, Thor)")
        return model, example  # fp32 tensors; TF32 math is backend_settings' to switch on
    if precision in ("fp16", "bf16"):
        dtype = input_dtype(precision)
        if precision == "bf16" and is_cuda(device):
            reason = bf16_unavailable_reason(torch, device)
            if reason is not None:
                raise PrecisionUnavailable(reason, hint="Ampere (Orin) or newer has bf16")
        return model.to(dtype), example.to(dtype)
    if precision == "int8":
        if not is_cuda(device):
            return quantize_cpu(model, example), example
        return tensorrt_int8(model, example), example
    raise UsageError(f"unknown precision: {precision!r}")


def quantize_cpu(model: Module, example: Tensor) -> Module:
    """PyTorch's own static INT8 quantization (FX graph mode, x86/fbgemm or qnnpack on Arm),
    calibrated on the synthetic input. Layers with no quantized kernel (LRN) run in float
    between dequantize/quantize pairs, which is what PyTorch INT8 on that network costs."""
    import torch

    engines = torch.backends.quantized.supported_engines
    engine = next((e for e in ("x86", "fbgemm", "qnnpack") if e in engines), None)
    if engine is None:
        raise PrecisionUnavailable("this PyTorch build has no quantized CPU engine")
    torch.backends.quantized.engine = engine
    with warnings.catch_warnings():
        # torch.ao.quantization is deprecated in favour of torchao; it is still PyTorch's own.
        warnings.simplefilter("ignore")
        try:
            from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
        except ImportError:  # torch 1.10: still torch.quantization
            from torch.quantization.quantize_fx import convert_fx, prepare_fx

        from .models.common import CaffeLRN

        try:
            prepared = _prepare_fx(prepare_fx, model.eval(), engine, example, CaffeLRN)
            with torch.no_grad():
                prepared(example)
            return convert_fx(prepared)
        except Exception as err:  # noqa: BLE001 - tracing failures of user models
            raise PrecisionUnavailable(
                f"int8: PyTorch quantization failed for this model: {err}",
                hint="built-in networks quantize; a user model must be FX-traceable",
            ) from err


def _prepare_fx(prepare_fx: Callable[..., GraphModule], model: Module, engine: str,
                example: Tensor, float_leaf: type) -> GraphModule:
    """prepare_fx with LRN (which branches on dtype, no quantized kernel) kept a float leaf:
    the QConfigMapping API of torch 1.13+, else the dict API of torch 1.10-1.12."""
    try:
        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.fx.custom_config import PrepareCustomConfig
    except ImportError:  # torch < 1.13 (NVIDIA's JetPack 4/5 wheels 1.10-1.12)
        try:
            from torch.ao.quantization import get_default_qconfig
        except ImportError:  # torch 1.10
            from torch.quantization import get_default_qconfig

        return prepare_fx(model, {"": get_default_qconfig(engine)},
                          prepare_custom_config_dict={"non_traceable_module_class": [float_leaf]})
    custom = PrepareCustomConfig().set_non_traceable_module_classes([float_leaf])
    return prepare_fx(model, get_default_qconfig_mapping(engine), (example,),
                      prepare_custom_config=custom)


TRT_INSTALL_HINT = ("install torch_tensorrt matching this torch (JetPack ships TensorRT), or "
                    "measure int8 with --device cpu; jetbench never falls back to another "
                    "precision")
# TensorRT's ways of saying "the GPU ran out of memory" while building or running an engine.
TRT_OOM_MARKERS = ("out of memory", "outofmemory", "could not be allocated",
                   "failed to allocate", "cudaerrormemoryallocation")


def tensorrt_int8(model: Module, example: Tensor) -> Module:
    """INT8 on CUDA through TensorRT (torch_tensorrt), by whichever calibrated path the installed
    version offers, or reported as not available with the reason; a TensorRT OOM is OutOfMemory.

    Paths: TorchScript PTQ (`ir="ts"` with a DataLoaderCalibrator: torch_tensorrt.ptq in 1.x,
    torch_tensorrt.ts.ptq in 2.x while it lasted), else the dynamo path on a network quantized
    by NVIDIA ModelOpt (nvidia-modelopt), which current torch_tensorrt documents for INT8."""
    try:
        import torch_tensorrt
    except Exception as err:  # noqa: BLE001 - a missing libnvinfer is OSError, not ImportError
        raise PrecisionUnavailable(
            f"int8 on cuda needs TensorRT, which does not load here ({type(err).__name__}: "
            f"{first_line(err)})", hint=TRT_INSTALL_HINT) from err
    path = tensorrt_int8_path(torch_tensorrt)
    version = getattr(torch_tensorrt, "__version__", "?")
    if path is None:
        raise PrecisionUnavailable(
            f"torch_tensorrt {version} offers no INT8 calibration path here (no ts.ptq "
            "calibrator, and NVIDIA ModelOpt for the dynamo path is not installed)",
            hint="pip install nvidia-modelopt, or use a torch_tensorrt with ts.ptq")
    try:
        if path == "dynamo-modelopt":
            return _int8_dynamo_modelopt(torch_tensorrt, model, example)
        return _int8_ts_ptq(torch_tensorrt, path, model, example)
    except PrecisionUnavailable:
        raise
    except Exception as err:  # noqa: BLE001 - TensorRT's errors are many and untyped
        text = str(err).lower()
        if isinstance(err, MemoryError) or any(m in text for m in TRT_OOM_MARKERS):
            raise OutOfMemory(f"TensorRT int8 build: out of memory ({first_line(err)})",
                              hint="use a smaller --batch") from err
        raise PrecisionUnavailable(
            f"TensorRT int8 build failed (torch_tensorrt {version}, {path}): "
            f"{first_line(err)}") from err


def tensorrt_int8_path(torch_tensorrt: ModuleType) -> Optional[str]:
    """Which INT8 path this torch_tensorrt offers: 'ts-ptq' (2.x ts.ptq), 'ptq' (1.x),
    'dynamo-modelopt', or None."""
    ts = getattr(torch_tensorrt, "ts", None)
    if ts is not None and getattr(ts, "ptq", None) is not None:
        return "ts-ptq"
    if getattr(torch_tensorrt, "ptq", None) is not None:
        return "ptq"
    if getattr(torch_tensorrt, "dynamo", None) is not None and _modelopt() is not None:
        return "dynamo-modelopt"
    return None


def _modelopt() -> Optional[ModuleType]:
    try:
        import modelopt.torch.quantization as mtq
    except Exception:  # noqa: BLE001 - not installed, or broken: no dynamo INT8
        return None
    return mtq


def _int8_ts_ptq(torch_tensorrt: ModuleType, path: str, model: Module, example: Tensor
                 ) -> Module:
    import torch

    ptq = torch_tensorrt.ts.ptq if path == "ts-ptq" else torch_tensorrt.ptq
    data = torch.utils.data.TensorDataset(example.cpu(), torch.zeros(example.shape[0]))
    loader = torch.utils.data.DataLoader(data, batch_size=example.shape[0])
    calibrator = ptq.DataLoaderCalibrator(
        loader, use_cache=False, algo_type=ptq.CalibrationAlgo.ENTROPY_CALIBRATION_2,
        device=example.device)
    return torch_tensorrt.compile(
        torch.jit.trace(model.eval(), example), ir="ts",
        inputs=[torch_tensorrt.Input(tuple(example.shape))],
        enabled_precisions={torch.float, torch.int8}, calibrator=calibrator)


def _int8_dynamo_modelopt(torch_tensorrt: ModuleType, model: Module, example: Tensor
                          ) -> Module:
    import torch

    mtq = _modelopt()
    if mtq is None:  # tensorrt_int8_path chose this path only with ModelOpt there
        raise PrecisionUnavailable("NVIDIA ModelOpt is not installed")
    model = model.eval()

    def calibrate(net: Module) -> None:
        with torch.no_grad():
            net(example)

    model = mtq.quantize(model, mtq.INT8_DEFAULT_CFG, forward_loop=calibrate)
    try:
        from modelopt.torch.quantization.utils import (
            export_torch_mode,
        )
    except Exception:  # noqa: BLE001 - older ModelOpt: plain export
        export_torch_mode = contextlib.nullcontext
    with torch.no_grad(), export_torch_mode():
        program = torch.export.export(model, (example,))
        return torch_tensorrt.dynamo.compile(
            program, inputs=[example], enabled_precisions={torch.float, torch.int8},
            min_block_size=1)
