"""A TensorRT engine built by jetbench from a network's exported ONNX file (`--runtime
tensorrt`), cached by everything an engine is specific to: the ONNX file (network, shape,
batch, precision, seed, opset, torch), the TensorRT version and the GPU (name and compute
capability). Built once, outside every timed window; written under a temporary name and
renamed, so a killed build leaves no half engine.

Precision: TensorRT 8.x-10.x build "weakly typed": the ONNX file is fp32 and the FP16 (BF16)
flag lets them pick 16-bit kernels (so the export never traces the network in fp16 on the CPU,
which torch builds without CPU half convolutions cannot); a TensorRT without the BF16 flag
cannot build bf16 (it would compute fp32): unavailable. fp32 clears the TF32 flag (IEEE fp32,
as `--precision fp32` promises), tf32 leaves it. TensorRT 11 builds strongly typed (the
file's types are the engine's: the file then holds fp16/bf16) and has no such flags to set.

UNVERIFIED on a GPU: tested against a stand-in `tensorrt` module (tests/test_runtimes.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import List, Optional

from ....errors import HardwareError
from ...precision import PrecisionUnavailable
from ..cache_dir import cache_dir, write_cached
from .engine import TrtObject


def engine_name(onnx_path: Path, precision: str, trt_version: str, gpu: str) -> str:
    """'<onnx stem>-fp16-trt10.3.0-Orin_sm87.engine'. The precision is in the name because one
    ONNX file (float32) builds two engines: fp32 with TF32 cleared and tf32 with it set."""
    tail = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{precision}-trt{trt_version}-{gpu}")
    return f"{onnx_path.stem}-{tail}.engine"


def built_engine(trt: ModuleType, onnx_path: Path, precision: str, gpu: str,
                 directory: Optional[Path] = None) -> Path:
    """The cached engine for `onnx_path` on this TensorRT and `gpu` (built now if missing)."""
    folder = directory or cache_dir("tensorrt")
    path = folder / engine_name(onnx_path, precision, str(getattr(trt, "__version__", "unknown")),
                                gpu)
    if path.is_file():
        return path
    data = build_serialized(trt, onnx_path, precision)

    def write(tmp: str) -> None:
        Path(tmp).write_bytes(data)

    return write_cached(path, write)


def build_serialized(trt: ModuleType, onnx_path: Path, precision: str) -> bytes:
    """Parse the ONNX file and build a serialized engine: HardwareError with the parser's own
    errors, PrecisionUnavailable where this TensorRT cannot build that precision."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(_network_flags(trt))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_path.read_bytes()):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise HardwareError(f"TensorRT {getattr(trt, '__version__', '?')} could not parse "
                            f"{onnx_path.name}: {'; '.join(errors) or 'no reason given'}")
    config = builder.create_builder_config()
    notes = _set_precision(trt, builder, config, precision)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise HardwareError(f"TensorRT could not build an engine from {onnx_path.name} "
                            f"({'; '.join(notes) or 'see its log above'})")
    return bytes(serialized)


def _network_flags(trt: ModuleType) -> int:
    """Explicit batch, which TensorRT 8.x needs for ONNX (10.0 ignores it, 11 may lack it)."""
    flag = getattr(getattr(trt, "NetworkDefinitionCreationFlag", None), "EXPLICIT_BATCH", None)
    major = _major(getattr(trt, "__version__", "0"))
    return 1 << int(flag) if flag is not None and major < 10 else 0


def strongly_typed(trt: ModuleType) -> bool:
    """TensorRT 11 and newer: the network's types are the engine's (no precision flags)."""
    return _major(getattr(trt, "__version__", "0")) >= 11


def _set_precision(trt: ModuleType, builder: TrtObject, config: TrtObject, precision: str
                   ) -> List[str]:
    flags = getattr(trt, "BuilderFlag", None)
    notes: List[str] = []
    if precision == "bf16" and not strongly_typed(trt):
        if flags is None or not hasattr(flags, "BF16"):
            raise PrecisionUnavailable(f"TensorRT {getattr(trt, '__version__', '?')} has no "
                                       "BF16 builder flag: a bf16 engine would compute fp32",
                                       hint="use fp16, or TensorRT 9 or newer")
        config.set_flag(flags.BF16)
        notes.append("BF16 flag set")
    elif precision == "fp16" and flags is not None and hasattr(flags, "FP16"):
        if getattr(builder, "platform_has_fast_fp16", True) is False:
            raise PrecisionUnavailable("this GPU has no fast fp16 (TensorRT's "
                                       "platform_has_fast_fp16 is false)", hint="use fp32")
        config.set_flag(flags.FP16)
        notes.append("FP16 flag set")
    elif precision == "fp32" and flags is not None and hasattr(flags, "TF32"):
        config.clear_flag(flags.TF32)  # IEEE fp32: TensorRT allows TF32 by default
        notes.append("TF32 flag cleared")
    elif precision == "tf32" and flags is not None and hasattr(flags, "TF32"):
        config.set_flag(flags.TF32)  # TensorRT's default, said rather than assumed
        notes.append("TF32 flag set")
    elif precision not in ("fp32", "tf32", "fp16", "bf16"):
        raise PrecisionUnavailable(f"{precision}: jetbench builds TensorRT engines in fp32, "
                                   "tf32, fp16 or bf16 (int8 needs calibration)",
                                   hint="use fp16")
    return notes


def _major(version: str) -> int:
    head = str(version).split(".", 1)[0]
    return int(head) if head.isdigit() else 0
