"""What kind of workload a `--model` names, and input shapes for models that declare their own.

Kinds: a PyTorch network (built-in name, TorchScript file, module:callable), an ONNX model
(`*.onnx`, run by ONNX Runtime), a serialized TensorRT engine (`*.engine`, `*.plan`) or a
simulated network (`sim:NAME`, a built-in network timed by the simulated board's latency
model: workload/sim_run.py). Nothing here imports a framework.

`--input-shape` for an ONNX model or an engine: `1x3x224x224` (its only input) or
`NAME:1x3x224x224,OTHER:1x128` (several inputs); a shape one shorter than the input's rank is
one sample's. The first dimension is the batch and always comes from `--batch`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

from ..errors import UsageError

PYTORCH, ONNX, TENSORRT, SIM = "pytorch", "onnxruntime", "tensorrt", "sim"
SIM_PREFIX = "sim:"
_SUFFIXES = {".onnx": ONNX, ".engine": TENSORRT, ".plan": TENSORRT}

# A declared dimension: a number, or a name / None / -1 where the model leaves it open.
DeclaredDim = Union[int, str, None]
# One unnamed shape (its only input) or (name, shape) pairs.
NamedShapes = Tuple[Tuple[str, Tuple[int, ...]], ...]
InputShape = Union[Tuple[int, ...], NamedShapes]

_SHAPE_HINT = "use e.g. 3x224x224 (one input) or NAME:1x3x224x224,OTHER:1x128"


def model_kind(name: str) -> str:
    """The framework that runs `name`: 'pytorch', 'onnxruntime', 'tensorrt' or 'sim'."""
    if is_sim(name):
        return SIM
    return _SUFFIXES.get(Path(name.strip()).suffix.lower(), PYTORCH)


def is_sim(name: str) -> bool:
    """`sim:NAME`: a built-in network on the simulated board's latency model."""
    return name.strip().lower().startswith(SIM_PREFIX)


def check_model_file(name: str) -> None:
    """An ONNX model or an engine must be a readable file: said at once, before any import."""
    path = Path(name)
    if not path.exists():
        raise UsageError(f"{name}: no such file", hint="give the path of your .onnx model or "
                         "TensorRT .engine/.plan file")
    if not path.is_file():
        raise UsageError(f"{name}: not a file")


def parse_shape_option(text: str) -> InputShape:
    """'3,224,224' / '3x224x224' -> (3, 224, 224); 'x:1x3x8x8,m:1x4' -> (('x', (1, 3, 8, 8)),
    ('m', (1, 4)))."""
    text = text.strip()
    if ":" not in text:
        return _dims(text, text)
    named = []
    for part in text.replace(";", ",").split(","):
        name, sep, dims = part.strip().rpartition(":")
        if not sep or not name.strip():
            raise UsageError(f"not an input shape: {text!r} (each input as NAME:DIMS, dims "
                             "joined by x)", hint=_SHAPE_HINT)
        named.append((name.strip(), _dims(dims, text)))
    if len({n for n, _ in named}) != len(named):
        raise UsageError(f"not an input shape: {text!r} (an input named twice)", hint=_SHAPE_HINT)
    return tuple(named)


def _dims(text: str, whole: str) -> Tuple[int, ...]:
    try:
        shape = tuple(int(p) for p in text.replace("x", ",").split(",") if p.strip())
    except ValueError as err:
        raise UsageError(f"not an input shape: {whole!r}", hint=_SHAPE_HINT) from err
    if not shape or any(d <= 0 for d in shape):
        raise UsageError(f"not an input shape: {whole!r}", hint=_SHAPE_HINT)
    return shape


def is_named(shape: Optional[InputShape]) -> bool:
    return bool(shape) and isinstance(shape[0], tuple)  # type: ignore[index]


def torch_shape(shape: Optional[InputShape]) -> Optional[Tuple[int, ...]]:
    """A PyTorch network's --input-shape (one sample, no names)."""
    if shape is not None and is_named(shape):
        raise UsageError("input names in --input-shape apply to ONNX models and TensorRT "
                         "engines", hint="give a PyTorch network one sample's shape: 3,224,224")
    return shape  # type: ignore[return-value]


def is_open(dim: DeclaredDim) -> bool:
    return not isinstance(dim, int) or dim < 0


def resolve_shapes(declared: Mapping[str, Sequence[DeclaredDim]], given: Optional[InputShape],
                   batch: int, what: str) -> Dict[str, Tuple[int, ...]]:
    """Each input's concrete shape: the declared one, with the batch (dimension 0) from `batch`
    and open dimensions from `given`. A given shape must agree with every fixed dimension.
    Raises UsageError saying which input and which dimension is wrong or still open."""
    names = list(declared)
    by_name: Dict[str, Tuple[int, ...]] = {}
    if given is not None and is_named(given):
        by_name = dict(given)  # type: ignore[arg-type]
        unknown = sorted(set(by_name) - set(names))
        if unknown:
            raise UsageError(f"{what}: no input named {', '.join(map(repr, unknown))} (its "
                             f"inputs: {', '.join(names)})", hint=_SHAPE_HINT)
    elif given is not None:
        if len(names) != 1:
            raise UsageError(f"{what} has {len(names)} inputs ({', '.join(names)}): name the one "
                             "each shape is for", hint=_SHAPE_HINT)
        by_name = {names[0]: given}  # type: ignore[dict-item]
    return {name: _one_shape(name, tuple(declared[name]), by_name.get(name), batch, what)
            for name in names}


def _one_shape(name: str, declared: Tuple[DeclaredDim, ...], given: Optional[Tuple[int, ...]],
               batch: int, what: str) -> Tuple[int, ...]:
    shown = "x".join("?" if is_open(d) else str(d) for d in declared) or "a scalar"
    if not declared:
        return ()
    if given is not None:
        if len(given) == len(declared) - 1:
            given = (batch, *given)  # one sample's shape
        elif len(given) != len(declared):
            raise UsageError(f"{what}: input {name!r} has {len(declared)} dimensions ({shown}); "
                             f"--input-shape gave {len(given)}", hint=_SHAPE_HINT)
        elif given[0] not in (1, batch):
            raise UsageError(f"{what}: input {name!r}: the first dimension is the batch, set by "
                             f"--batch (give 1 or {batch} there, not {given[0]})")
    out = []
    for k, dim in enumerate(declared):
        if k == 0:
            if not is_open(dim) and dim != batch:
                raise UsageError(f"{what}: input {name!r} has a fixed batch of {dim} ({shown}), "
                                 f"not {batch}", hint=f"use --batch {dim}, or export the model "
                                 "with a dynamic batch axis")
            out.append(batch)
            continue
        want = None if given is None else given[k]
        if is_open(dim):
            if want is None:
                raise UsageError(f"{what}: input {name!r} has open dimensions ({shown})",
                                 hint=f"give them: --input-shape {name}:1x...")
            out.append(want)
        else:
            if want is not None and want != dim:
                raise UsageError(f"{what}: input {name!r} is {shown}; --input-shape gave "
                                 f"{want} for dimension {k}")
            out.append(int(dim))  # type: ignore[arg-type]
    return tuple(out)
