"""Precisions: putting a float32 network into fp16, bf16 or int8 on a device, or saying clearly
why that combination is not available (never a silent fallback to another precision)."""

from __future__ import annotations

import warnings
from typing import Any, List, Tuple

from ..errors import HardwareError, UsageError

PRECISIONS = ("fp32", "fp16", "bf16", "int8")


class PrecisionUnavailable(HardwareError):
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
            raise UsageError(f"unknown precision: {word!r}", hint="use fp32, fp16, bf16, int8")
        if key not in out:
            out.append(key)
    if not out:
        raise UsageError("no precision given", hint="use e.g. --precision fp16,fp32")
    return out


def input_dtype(precision: str) -> Any:
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)


def apply_precision(model: Any, precision: str, device: str, example: Any) -> Tuple[Any, Any]:
    """(model, example input) converted to `precision` on `device`. `example` is the float32
    input on `device`; int8 uses it to calibrate. The model must be in eval mode for int8."""
    import torch

    if precision == "fp32":
        return model, example
    if precision in ("fp16", "bf16"):
        dtype = input_dtype(precision)
        if precision == "bf16" and device == "cuda" and not torch.cuda.is_bf16_supported():
            raise PrecisionUnavailable(
                "bf16 is not supported by this GPU", hint="Ampere (Orin) or newer has bf16"
            )
        return model.to(dtype), example.to(dtype)
    if precision == "int8":
        if device == "cpu":
            return quantize_cpu(model, example), example
        return tensorrt_int8(model, example), example
    raise UsageError(f"unknown precision: {precision!r}")


def quantize_cpu(model: Any, example: Any) -> Any:
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
        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.fx.custom_config import PrepareCustomConfig
        from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

        from .models.common import CaffeLRN

        # LRN branches on dtype and has no quantized kernel: keep it a float leaf.
        custom = PrepareCustomConfig().set_non_traceable_module_classes([CaffeLRN])
        qconfig = get_default_qconfig_mapping(engine)
        try:
            prepared = prepare_fx(model.eval(), qconfig, (example,), prepare_custom_config=custom)
            with torch.no_grad():
                prepared(example)
            return convert_fx(prepared)
        except Exception as err:  # noqa: BLE001 - tracing failures of user models
            raise PrecisionUnavailable(
                f"int8: PyTorch quantization failed for this model: {err}",
                hint="built-in networks quantize; a user model must be FX-traceable",
            ) from err


def tensorrt_int8(model: Any, example: Any) -> Any:
    """INT8 on CUDA goes through TensorRT (torch_tensorrt), or is reported as not available."""
    try:
        import torch_tensorrt  # type: ignore[import-not-found]
    except ImportError as err:
        raise PrecisionUnavailable(
            "int8 on cuda needs TensorRT, which is not installed",
            hint="install torch_tensorrt (JetPack ships TensorRT), or measure int8 with "
            "--device cpu; jetbench never falls back to another precision",
        ) from err
    try:
        return torch_tensorrt.compile(
            model.eval(),
            inputs=[torch_tensorrt.Input(tuple(example.shape))],
            enabled_precisions={__import__("torch").int8},
            calibrator=_calibrator(torch_tensorrt, example),
        )
    except Exception as err:  # noqa: BLE001 - TensorRT's errors are many and untyped
        raise PrecisionUnavailable(f"TensorRT int8 build failed: {err}") from err


def _calibrator(torch_tensorrt: Any, example: Any) -> Any:
    """A calibrator fed with the synthetic input (torch_tensorrt's TorchScript PTQ API)."""
    import torch

    ptq = getattr(torch_tensorrt, "ptq", None)
    if ptq is None:
        raise PrecisionUnavailable(
            "this torch_tensorrt has no PTQ calibrator API (int8 needs calibration)",
            hint="use a torch_tensorrt 1.x that provides torch_tensorrt.ptq",
        )
    data = torch.utils.data.TensorDataset(example.cpu(), torch.zeros(example.shape[0]))
    loader = torch.utils.data.DataLoader(data, batch_size=example.shape[0])
    return ptq.DataLoaderCalibrator(
        loader, use_cache=False, algo_type=ptq.CalibrationAlgo.ENTROPY_CALIBRATION_2,
        device=example.device,
    )
