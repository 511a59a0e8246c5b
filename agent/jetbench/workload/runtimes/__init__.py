"""`--runtime`: the same built-in network, input, batch, precision and clocks under several
runtimes (the Addfor benchmark's "which framework runs which network fastest", for today's
Jetson runtimes).

    torch        PyTorch eager (the reference every other runtime is checked against)
    torchscript  torch.jit.trace (frozen for inference)
    compile      torch.compile (inductor)
    onnxruntime  ONNX Runtime on its best provider (or --provider), from jetbench's own export
    tensorrt     a TensorRT engine jetbench builds from that export (CUDA GPUs only)

This module holds the names, what each needs installed, which train, and every rule on which
options go with which runtimes (one place, for `time`, `measure` and `sweep`). Building is
`build.build_workload` with `RunOptions.runtime`; the export, the engine and the output check
are onnx/export.py, tensorrt/build.py and output_check.py here.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import Iterable, Optional, Sequence, Tuple

from ...errors import Unavailable, UsageError
from ..registry import is_builtin

TORCH, TORCHSCRIPT, COMPILE, ONNXRUNTIME, TENSORRT = (
    "torch", "torchscript", "compile", "onnxruntime", "tensorrt")
RUNTIMES = (TORCH, TORCHSCRIPT, COMPILE, ONNXRUNTIME, TENSORRT)
EXPORTED = (ONNXRUNTIME, TENSORRT)  # run from jetbench's ONNX export: inference only
DEFAULT: Tuple[str, ...] = (TORCH,)


class RuntimeUnavailable(Unavailable):
    """A runtime that cannot run this network here: not installed, no GPU for it, no training
    in it, or the network cannot be traced for it. Recorded as `unavailable`. (An ONNX export
    that fails is PrecisionUnavailable: it fails for one precision, fp32 usually exports.)"""


def parse_runtimes(text: Optional[str]) -> Tuple[str, ...]:
    """'torch,onnxruntime' -> ('torch', 'onnxruntime'); None -> ('torch',). Unknown names are a
    UsageError with the list (and the nearest name); 'ort' and 'trt' are accepted."""
    if text is None:
        return DEFAULT
    aliases = {"ort": ONNXRUNTIME, "onnx": ONNXRUNTIME, "trt": TENSORRT, "eager": TORCH,
               "pytorch": TORCH, "jit": TORCHSCRIPT, "torch.compile": COMPILE}
    out = []
    for word in (w.strip().lower() for w in text.split(",")):
        if not word:
            continue
        name = aliases.get(word, word)
        if name not in RUNTIMES:
            near = get_close_matches(name, RUNTIMES + tuple(aliases), n=1)
            raise UsageError(f"--runtime {word}: not a runtime jetbench runs"
                             + (f" (did you mean {aliases.get(near[0], near[0])}?)"
                                if near else ""),
                             hint=f"use one or more of {', '.join(RUNTIMES)}")
        if name not in out:
            out.append(name)
    if not out:
        raise UsageError("--runtime is empty", hint=f"use one or more of {', '.join(RUNTIMES)}")
    return tuple(out)


def check_runtimes(runtimes: Sequence[str], models: Iterable[str], provider: Optional[str],
                   compile_flag: bool = False, workload_python: Optional[str] = None) -> None:
    """Every rule on --runtime with the other options, before anything is built."""
    models = list(models)
    if provider and ONNXRUNTIME not in runtimes and any(is_builtin(m) for m in models):
        raise UsageError("--provider picks ONNX Runtime's execution provider (for an .onnx "
                         "model, or a built-in network under --runtime onnxruntime)",
                         hint="add onnxruntime to --runtime, or drop --provider")
    if tuple(runtimes) == DEFAULT:
        return
    others = [m for m in models if not is_builtin(m)]
    if others:
        raise UsageError(f"--runtime runs jetbench's built-in networks (it exports them "
                         f"itself); {others[0]} is not one",
                         hint="an ONNX model runs on ONNX Runtime and an engine on TensorRT "
                              "as they are: drop --runtime for them")
    if compile_flag:
        raise UsageError("--compile and --runtime: --compile is the runtime `compile`",
                         hint="use --runtime ...,compile")
    if workload_python:
        raise UsageError("--workload-python runs PyTorch eager in a child: not with --runtime",
                         hint="drop --workload-python to compare runtimes")


def provider_for(runtime: str, model: str, provider: Optional[str]) -> Optional[str]:
    """--provider belongs to the ONNX Runtime row (or to an ONNX model file)."""
    return provider if runtime == ONNXRUNTIME or not is_builtin(model) else None
