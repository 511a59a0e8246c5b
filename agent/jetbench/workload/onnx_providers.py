"""ONNX Runtime execution providers: which one runs a model, and with which options.

Pure functions over the list `onnxruntime.get_available_providers()` returns, so they are
tested without a GPU. The best provider present wins (TensorRT, CUDA, CPU: the order below);
`--provider` picks one by its short name (`tensorrt`, `cuda`, `cpu`, ...) or ORT's full name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import UsageError
from .precision import PrecisionUnavailable

TENSORRT_EP, CUDA_EP, CPU_EP = ("TensorrtExecutionProvider", "CUDAExecutionProvider",
                                "CPUExecutionProvider")
PREFERENCE = (TENSORRT_EP, CUDA_EP, CPU_EP)
_GPU = (TENSORRT_EP, CUDA_EP)
_SUFFIX = "ExecutionProvider"

FP16_HINT = ("use --provider tensorrt, or measure a model exported in fp16 with --precision "
             "fp16; jetbench never falls back to another precision")


@dataclass(frozen=True)
class ProviderChoice:
    """The provider that runs the model, its options, the providers after it that take what
    it cannot run (ORT's own fallback), and the device it computes on."""

    name: str
    options: Dict[str, Any]
    fallbacks: Tuple[str, ...]
    device: str

    def session_providers(self) -> List[Any]:
        return [(self.name, self.options), *self.fallbacks]


def short_name(provider: str) -> str:
    """'CUDAExecutionProvider' -> 'cuda'."""
    return provider[: -len(_SUFFIX)].lower() if provider.endswith(_SUFFIX) else provider.lower()


def pick_provider(available: Sequence[str], requested: Optional[str], device: str) -> str:
    """The provider to use: `requested` (short or full name) if present, else the best present
    for `device` ('auto', 'cpu', 'cuda', 'cuda:N'). A UsageError lists what is available."""
    listed = ", ".join(short_name(p) for p in available) or "none"
    if requested:
        word = requested.strip().lower()
        match = [p for p in available if word in (p.lower(), short_name(p))]
        if not match:
            raise UsageError(f"--provider {requested}: not available in this ONNX Runtime "
                             f"(available: {listed})",
                             hint="a GPU provider needs onnxruntime-gpu (on a Jetson, NVIDIA's "
                                  "wheel for your JetPack)")
        chosen = match[0]
        if device == "cpu" and chosen in _GPU or device.startswith("cuda") and chosen == CPU_EP:
            raise UsageError(f"--provider {requested} runs on "
                             f"{'cpu' if chosen == CPU_EP else 'cuda'}, not --device {device}",
                             hint="drop --device, or pick a provider for that device")
        return chosen
    wanted = {"cpu": (CPU_EP,)}.get(device, _GPU if device.startswith("cuda") else PREFERENCE)
    for provider in wanted:
        if provider in available:
            return provider
    raise UsageError(f"--device {device}: no ONNX Runtime provider for it (available: {listed})",
                     hint="install onnxruntime-gpu for cuda/tensorrt, or use --device cpu")


def choose(available: Sequence[str], requested: Optional[str], device: str,
           precision: str) -> ProviderChoice:
    """The provider and its options; fp16 asks TensorRT for fp16 kernels (trt_fp16_enable).
    Whether the precision holds for the model is `check_precision`'s to say."""
    name = pick_provider(available, requested, device)
    index = _device_index(device)
    options: Dict[str, Any] = {"device_id": index} if name in _GPU else {}
    if precision == "fp16" and name == TENSORRT_EP:
        options["trt_fp16_enable"] = True
    fallbacks = tuple(p for p in PREFERENCE[PREFERENCE.index(name) + 1:] if p in available) \
        if name in PREFERENCE else ()
    if name in _GPU:
        device_word = f"cuda:{index}" if device.startswith("cuda:") else "cuda"
    else:
        device_word = "cpu" if name == CPU_EP else short_name(name)
    return ProviderChoice(name, options, fallbacks, device_word)


def model_precision(input_types: Sequence[str]) -> str:
    """A model's own precision from its inputs' ORT types ('tensor(float16)' -> fp16): fp32
    unless its floating-point inputs are fp16 or bf16."""
    floats = [t for t in input_types if "float" in t or "double" in t]
    if floats and all(t == "tensor(float16)" for t in floats):
        return "fp16"
    if floats and all(t == "tensor(bfloat16)" for t in floats):
        return "bf16"
    return "fp32"


def check_precision(precision: str, own: str, provider: str) -> None:
    """The model as it is (`precision` == its own), or fp32 -> fp16 through TensorRT; anything
    else is PrecisionUnavailable with the reason."""
    if precision == own or (precision == "fp16" and own == "fp32" and provider == TENSORRT_EP):
        return
    if precision == "fp16" and own == "fp32":
        raise PrecisionUnavailable(
            f"fp16 is not available on ONNX Runtime's {short_name(provider)} provider for an "
            "fp32 model (only its TensorRT provider converts, with trt_fp16_enable)",
            hint=FP16_HINT)
    raise PrecisionUnavailable(
        f"{precision} is not available for this ONNX model (it is {own}; jetbench runs a model "
        "as it is, or an fp32 one in fp16 through the TensorRT provider)",
        hint=f"use --precision {own}")


def _device_index(device: str) -> int:
    if device.startswith("cuda:"):
        index = device.split(":", 1)[1]
        if not index.isdigit():
            raise UsageError(f"unknown device: {device!r}", hint="use auto, cuda, cuda:N or cpu")
        return int(index)
    if device not in ("auto", "cpu", "cuda"):
        raise UsageError(f"unknown device: {device!r}", hint="use auto, cuda, cuda:N or cpu")
    return 0
