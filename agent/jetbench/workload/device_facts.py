"""The facts of building a workload that the child runner (child/runner.py, under JetPack 4's
Python 3.6 with torch >= 1.10) needs as much as the in-process path: the input, which devices
are CUDA, whether bf16 is native, and how an allocation failure reads.

Python 3.6 and the standard library only (torch is passed in): tests/test_workload_child.py
checks it with vermin.
"""

import inspect
from types import ModuleType
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

if TYPE_CHECKING:  # torch is passed in (optional at run time)
    from torch import Tensor

CONSTANT_INPUT = 0.5  # non-zero, as the whitepaper's constant input: every MAC really switches
INPUT_MODES = ("constant", "random")

# How an allocation failure reads: CUDA's ("CUDA out of memory"), the CPU allocator's
# ("DefaultCPUAllocator: can't allocate memory: ... Error code 12 (Cannot allocate memory)",
# torch 1.10 to 2.13), and on a Jetson (Tegra, unified memory) the NVML assert the CUDA caching
# allocator hits when the allocation fails (pytorch#185240), and the driver's NvMap failure.
OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory",
               "nvml_success == r internal assert failed", "nvmapmemallocinternaltagged")


# How a missing kernel for a dtype reads ('"unfolded2d_copy" not implemented for 'Half'': fp16
# convolution on the CPU in torch 1.10): that precision is unavailable on that device.
_NO_KERNEL = ("not implemented for 'half'", "not implemented for 'bfloat16'")


def is_missing_kernel(err: BaseException) -> bool:
    text = str(err).lower()
    return isinstance(err, RuntimeError) and any(marker in text for marker in _NO_KERNEL)


def is_cuda(device: str) -> bool:
    """'cuda' or 'cuda:N'."""
    return device == "cuda" or device.startswith("cuda:")


class DeviceProblem(ValueError):
    """A --device this torch cannot run on (the caller turns it into its usage error)."""

    def __init__(self, message: str, hint: str):
        ValueError.__init__(self, message)
        self.message = message
        self.hint = hint


def resolve_device(torch: ModuleType, device: str) -> str:
    """'auto' -> 'cuda' when present, else 'cpu'; 'cuda:N' is kept (and checked against the GPUs
    PyTorch sees). 'cuda' without a GPU raises DeviceProblem."""
    word = (device or "auto").lower()
    if word == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if word == "cuda" or word.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise DeviceProblem(f"--device {word}: no CUDA device is visible to PyTorch",
                                "use --device cpu, or a CUDA build of torch")
        if word == "cuda":
            return "cuda"
        index = word.split(":", 1)[1]
        count = torch.cuda.device_count()
        if not index.isdigit() or int(index) >= count:
            raise DeviceProblem(f"--device {word}: PyTorch sees {count} CUDA device(s) "
                                f"(cuda:0 to cuda:{count - 1})",
                                "CUDA_VISIBLE_DEVICES renumbers them from 0")
        return f"cuda:{int(index)}"
    if word == "cpu":
        return "cpu"
    raise DeviceProblem(f"unknown device: {device!r}", "use auto, cuda, cuda:N or cpu")


def cuda_index(torch: ModuleType, device: str) -> int:
    """The CUDA ordinal of 'cuda' (the current device) or 'cuda:N'."""
    index = torch.device(device).index
    return torch.cuda.current_device() if index is None else index


def make_input(torch: ModuleType, mode: str, batch: int, shape: Sequence[int], seed: int
               ) -> "Tensor":
    """The float32 input batch: CONSTANT_INPUT everywhere, or Gaussian (seeded with seed + 1)."""
    size = (batch,) + tuple(int(d) for d in shape)
    if mode == "constant":
        return torch.full(size, CONSTANT_INPUT, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randn(size, generator=gen, dtype=torch.float32)


def is_out_of_memory(torch: ModuleType, err: BaseException) -> bool:
    """An allocator's failure: MemoryError, torch's OutOfMemoryError (1.13+), or a message
    that reads like one (OOM_MARKERS; CUDA's OOM was a plain RuntimeError before 1.13)."""
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if isinstance(err, MemoryError) or (oom_type is not None and isinstance(err, oom_type)):
        return True
    text = str(err).lower()
    return any(marker in text for marker in OOM_MARKERS)


def bf16_unavailable_reason(torch: ModuleType, device: str) -> Optional[str]:
    """None when the GPU computes bf16 natively (compute capability 8.0+: Ampere, Orin); else
    why not. torch.cuda.is_bf16_supported() alone says True for emulated bf16 (torch 2.3+),
    which would time an emulation, so the capability decides, and the stricter
    is_bf16_supported(including_emulation=False) too where this torch has it."""
    major, minor = torch.cuda.get_device_capability(torch.device(device))
    if (major, minor) < (8, 0):
        return (f"bf16 is not native on this GPU (compute capability {major}.{minor}; bf16 needs "
                "8.0 or newer), and an emulated bf16 is not measured")
    check = getattr(torch.cuda, "is_bf16_supported", None)  # torch 1.10+
    if check is None:
        return "this PyTorch has no bf16 support check (torch.cuda.is_bf16_supported)"
    try:
        strict = "including_emulation" in inspect.signature(check).parameters
    except (TypeError, ValueError):
        strict = False
    supported = check(including_emulation=False) if strict else check()
    if not supported:
        return "bf16 is not supported by this GPU with this CUDA/PyTorch build"
    return None


def fp32_math_knobs(torch: ModuleType) -> List[Tuple[object, str]]:
    """(object, attribute) pairs that decide whether fp32 convolutions and matmuls may use TF32,
    in the API this torch has: `fp32_precision` ("ieee"/"tf32") on torch 2.9+, where cuDNN
    convolutions default to tf32; `allow_tf32` on 1.7-2.8, where cudnn.allow_tf32 defaults to
    True. Empty: no TF32 in this torch."""
    backends = torch.backends
    cudnn = getattr(backends, "cudnn", None)
    conv = getattr(cudnn, "conv", None)
    if conv is not None and hasattr(conv, "fp32_precision"):
        knobs = (conv, getattr(cudnn, "rnn", None),
                 getattr(getattr(backends, "cuda", None), "matmul", None))
        return [(k, "fp32_precision") for k in knobs
                if k is not None and hasattr(k, "fp32_precision")]
    if hasattr(cudnn, "allow_tf32"):
        return [(cudnn, "allow_tf32"), (backends.cuda.matmul, "allow_tf32")]
    return []


def set_fp32_math(torch: ModuleType, tf32: bool) -> Optional[str]:
    """fp32 as IEEE fp32 (tf32 False) or with TF32 tensor-core math allowed (True), for
    convolutions and matmuls. Returns what was set (None: no TF32 in this torch)."""
    knobs = fp32_math_knobs(torch)
    if not knobs:
        return None
    name = knobs[0][1]
    value = ("tf32" if tf32 else "ieee") if name == "fp32_precision" else tf32
    for obj, attr in knobs:
        setattr(obj, attr, value)
    return f"{name}={value}"


def ampere_precision_reason(precision: str, capability: Tuple[int, int],
                            runtime: str) -> Optional[str]:
    """Why `runtime` cannot run tf32 or bf16 on a GPU of `capability` (both need compute
    capability 8.0+: Ampere, Orin, Thor), else None. A TensorRT builder flag or an ONNX Runtime
    option only permits them: on an older GPU the engine computes fp32 under the label."""
    if precision not in ("tf32", "bf16") or tuple(capability) >= (8, 0):
        return None
    major, minor = capability
    return (f"{precision} needs compute capability 8.0 or newer (Ampere, Orin); this GPU is "
            f"{major}.{minor}: {runtime} would compute fp32 under the {precision} label")


def tf32_unavailable_reason(torch: ModuleType, device: str) -> Optional[str]:
    """None where TF32 runs (a CUDA GPU of compute capability 8.0+: Ampere, Orin, Thor, with a
    torch that has the switch); else why not."""
    if not is_cuda(device):
        return "tf32 is a CUDA tensor-core mode (Ampere and newer); this runs on the CPU"
    major, minor = torch.cuda.get_device_capability(torch.device(device))
    if (major, minor) < (8, 0):
        return ("tf32 needs compute capability 8.0 or newer (Ampere, Orin); this GPU is "
                f"{major}.{minor}: its fp32 is IEEE fp32 already")
    # fp32_math_knobs asks for the new API first: on torch 2.9+ the legacy getters raise
    # once conv and RNN flags differ (hasattr would call them)
    if not fp32_math_knobs(torch):
        return "this PyTorch has no TF32 switch (torch 1.7 or newer has)"
    return None
