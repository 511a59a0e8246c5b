"""ONNX Runtime execution providers: which one runs a model, and with which options.

Pure functions over the list `onnxruntime.get_available_providers()` returns, so they are
tested without a GPU. The best provider present wins (TensorRT, CUDA, CPU: the order below);
`--provider` picks one by its short name (`tensorrt`, `cuda`, `cpu`, ...) or ORT's full name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

from ....errors import Unavailable, UsageError
from ...precision import PrecisionUnavailable

TENSORRT_EP, CUDA_EP, CPU_EP = ("TensorrtExecutionProvider", "CUDAExecutionProvider",
                                "CPUExecutionProvider")
PREFERENCE = (TENSORRT_EP, CUDA_EP, CPU_EP)
_GPU = (TENSORRT_EP, CUDA_EP)
# Providers ONNX Runtime's own builds name (short names; its docs' execution provider list):
# one that this build lacks is `unavailable`, any other word is not a provider at all.
KNOWN_PROVIDERS = ("tensorrt", "cuda", "cpu", "rocm", "migraphx", "openvino", "dnnl", "coreml",
                   "azure", "qnn", "xnnpack", "nnapi", "acl", "armnn", "tvm", "vitisai", "cann",
                   "dml", "webgpu", "nvtensorrtrtx")
_SUFFIX = "ExecutionProvider"

FP16_HINT = ("use --provider tensorrt, or measure a model exported in fp16 with --precision "
             "fp16; jetbench never falls back to another precision")


# ONNX Runtime versions that added the options below (its release notes; unverified on a GPU).
TRT_TIMING_CACHE_SINCE = (1, 15)  # trt_timing_cache_enable
TRT_TIMING_CACHE_PATH_SINCE = (1, 17)  # trt_timing_cache_path (before: the engine cache's)
# Options jetbench passes only for speed: an ORT that refuses one ("Invalid TensorRT EP option",
# onnxruntime#21484: a vendor build whose version says otherwise) is asked again without them.
OPTIONAL_OPTIONS = ("trt_timing_cache_enable", "trt_timing_cache_path")
CUDA_USE_TF32_SINCE = (1, 18)  # CUDA EP use_tf32


ProviderOptions = Dict[str, Union[str, int, bool]]  # a provider's options, as ORT takes them


@dataclass(frozen=True)
class ProviderChoice:
    """The provider that runs the model, its options, the providers after it (with their
    options) that take what it cannot run (ORT's own fallback), the device it computes on, and
    what the result must say about it (TF32 that cannot be turned off, caches)."""

    name: str
    options: ProviderOptions
    fallbacks: Tuple[Tuple[str, ProviderOptions], ...]
    device: str
    notes: Tuple[str, ...] = ()
    # fp32 that may run in TF32 (no option forbids it: TensorRT's provider, CUDA before 1.18):
    # its outputs are judged with tf32's tolerance, and the result says so
    tf32_possible: bool = False

    def session_providers(self) -> List[Tuple[str, ProviderOptions]]:
        return [(self.name, self.options), *self.fallbacks]

    def without_optional(self) -> ProviderChoice:
        """The same choice without the options only speed needs (OPTIONAL_OPTIONS)."""
        options = {k: v for k, v in self.options.items() if k not in OPTIONAL_OPTIONS}
        return ProviderChoice(self.name, options, self.fallbacks, self.device, self.notes,
                              self.tf32_possible)


def ort_version(text: Optional[str]) -> Tuple[int, int]:
    """'1.18.1' -> (1, 18); unknown -> (0, 0) (no optional option is passed)."""
    parts = (text or "").split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


def provider_options(name: str, index: int, precision: str, version: Tuple[int, int],
                     cache: Optional[str]) -> Tuple[ProviderOptions, List[str]]:
    """One provider's options and the notes they imply. GPU providers get `device_id` (the
    CUDA fallback too: without it ORT runs on GPU 0 whatever `cuda:N` says). TensorRT keeps
    its engines and timing cache under `cache` (built once, in warm-up; without it ORT builds
    an engine at every run and clock point). fp32 on CUDA is IEEE fp32 (use_tf32 off)."""
    notes: List[str] = []
    if name == CPU_EP and precision in ("fp16", "bf16"):
        # ORT's CPU provider has few 16-bit kernels: its graph transformer casts the others'
        # inputs to float (InsertCastTransformer), so the arithmetic is fp32's
        notes.append(f"{precision} on ONNX Runtime's CPU provider: it computes operators "
                     f"without {precision} kernels in fp32 (casting around them), so this row "
                     f"is the {precision} model's speed, not {precision} arithmetic")
    if name not in _GPU:
        return {}, notes
    options: ProviderOptions = {"device_id": index}
    if name == TENSORRT_EP:
        if precision == "fp16":
            options["trt_fp16_enable"] = True
        if cache is not None:
            options["trt_engine_cache_enable"] = True
            options["trt_engine_cache_path"] = cache
            if version >= TRT_TIMING_CACHE_SINCE:
                options["trt_timing_cache_enable"] = True
            if version >= TRT_TIMING_CACHE_PATH_SINCE:
                options["trt_timing_cache_path"] = cache
        if tf32_unforbidden(name, precision, version):
            notes.append("fp32 on ONNX Runtime's TensorRT provider: TensorRT may run fp32 "
                         "layers in TF32 on Ampere and newer (ORT has no option to forbid it); "
                         "for IEEE fp32 use --provider cuda")
    elif precision == "fp32":
        if not tf32_unforbidden(name, precision, version):
            options["use_tf32"] = 0
        else:
            notes.append("fp32 on ONNX Runtime's CUDA provider before 1.18 (no use_tf32 "
                         "option): cuDNN may use TF32 on Ampere and newer")
    elif precision == "tf32" and version >= CUDA_USE_TF32_SINCE:
        options["use_tf32"] = 1
    return options, notes


def short_name(provider: str) -> str:
    """'CUDAExecutionProvider' -> 'cuda'."""
    return provider[: -len(_SUFFIX)].lower() if provider.endswith(_SUFFIX) else provider.lower()


def pick_provider(available: Sequence[str], requested: Optional[str], device: str) -> str:
    """The provider to use: `requested` (short or full name) if present, else the best present
    for `device` ('auto', 'cpu', 'cuda', 'cuda:N'). Unavailable (a provider this ONNX Runtime
    lacks) lists what is available; a provider for another device is a UsageError."""
    listed = ", ".join(short_name(p) for p in available) or "none"
    if requested:
        word = requested.strip().lower()
        match = [p for p in available if word in (p.lower(), short_name(p))]
        if not match:
            # A provider ORT has, but not this build: an `unavailable` row (the other runtimes
            # still run); a name no ORT knows: the user's typo.
            known = word.lower().replace(_SUFFIX.lower(), "") in KNOWN_PROVIDERS
            raise (Unavailable if known else UsageError)(
                f"--provider {requested}: not available in this ONNX Runtime "
                f"(available: {listed})",
                hint="a GPU provider needs onnxruntime-gpu (on a Jetson, NVIDIA's wheel for "
                "your JetPack)")
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
    raise Unavailable(f"--device {device}: no ONNX Runtime provider for it (available: {listed})",
                     hint="install onnxruntime-gpu for cuda/tensorrt, or use --device cpu")


def tf32_unforbidden(name: str, precision: str, version: Tuple[int, int]) -> bool:
    """fp32 that this provider may run in TF32 on Ampere and newer, with no option to forbid
    it: TensorRT's provider always, the CUDA provider before `use_tf32` (1.18)."""
    return precision == "fp32" and (name == TENSORRT_EP or (
        name == CUDA_EP and version < CUDA_USE_TF32_SINCE))


def choose(available: Sequence[str], requested: Optional[str], device: str,
           precision: str, version: Tuple[int, int] = (0, 0),
           cache: Optional[str] = None) -> ProviderChoice:
    """The provider and its options (provider_options); fp16 asks TensorRT for fp16 kernels
    (trt_fp16_enable). Whether the precision holds for the model is `check_precision`'s."""
    name = pick_provider(available, requested, device)
    index = _device_index(device)
    options, notes = provider_options(name, index, precision, version, cache)
    later = [p for p in PREFERENCE[PREFERENCE.index(name) + 1:] if p in available] \
        if name in PREFERENCE else []
    fallbacks = tuple((p, provider_options(p, index, precision, version, cache)[0])
                      for p in later)
    if name in _GPU:
        device_word = f"cuda:{index}" if device.startswith("cuda:") else "cuda"
    else:
        device_word = "cpu" if name == CPU_EP else short_name(name)
    return ProviderChoice(name, options, fallbacks, device_word, tuple(notes),
                          tf32_unforbidden(name, precision, version))


def model_precision(input_types: Sequence[str], weights: Optional[str] = None) -> str:
    """A model's own precision: its weights' (`weights`, from its initializers, where known:
    a model converted to fp16 with keep_io_types has fp16 weights behind fp32 inputs), else
    its inputs' ORT types ('tensor(float16)' -> fp16): fp32 unless its floating-point inputs
    are fp16 or bf16."""
    if weights is not None:
        return weights
    floats = [t for t in input_types if "float" in t or "double" in t]
    if floats and all(t == "tensor(float16)" for t in floats):
        return "fp16"
    if floats and all(t == "tensor(bfloat16)" for t in floats):
        return "bf16"
    return "fp32"


# onnx.TensorProto data types of floating-point initializers
_WEIGHT_TYPES = {1: "fp32", 10: "fp16", 16: "bf16", 11: "fp64"}


def weights_precision(data_types: Sequence[int]) -> Optional[str]:
    """The precision most of a model's floating-point weights are stored in (by count of
    initializers), or None when it has none."""
    floats = [_WEIGHT_TYPES[t] for t in data_types if t in _WEIGHT_TYPES]
    if not floats:
        return None
    top = max(set(floats), key=floats.count)
    return "fp32" if top == "fp64" else top


def check_precision(precision: str, own: str, provider: str) -> None:
    """The model as it is (`precision` == its own), or fp32 -> fp16 through TensorRT; anything
    else is PrecisionUnavailable with the reason."""
    if precision == own or (precision == "fp16" and own == "fp32" and provider == TENSORRT_EP):
        return
    if precision == "tf32" and own == "fp32" and provider in _GPU:
        return  # an fp32 model with TF32 math allowed (CUDA's use_tf32; TensorRT's default)
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
