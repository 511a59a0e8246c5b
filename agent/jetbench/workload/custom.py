"""A user's own network: a TorchScript file, or `module:callable` returning an nn.Module."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Optional, Sequence, Tuple

from ..errors import UsageError
from ._torch import import_torch

if TYPE_CHECKING:  # torch is optional at run time
    from torch.nn import Module


def parse_input_shape(text: str) -> Tuple[int, ...]:
    """'3,224,224' or '3x224x224' -> (3, 224, 224): one sample, without the batch dimension."""
    try:
        shape = tuple(int(p) for p in text.replace("x", ",").split(",") if p.strip())
    except ValueError as err:
        raise UsageError(f"not an input shape: {text!r}", hint="use e.g. 3,224,224") from err
    if not shape or any(d <= 0 for d in shape):
        raise UsageError(f"not an input shape: {text!r}", hint="use e.g. 3,224,224")
    return shape


def looks_custom(name: str) -> bool:
    return ":" in name or name.endswith((".pt", ".pth", ".ts", ".torchscript")) or os.sep in name


def load_custom(name: str, input_shape: Optional[Sequence[int]]) -> Module:
    """The module named by `name` (on the CPU, float32). An input shape is required: a user's
    network does not say what it eats."""
    if input_shape is None:
        raise UsageError(
            f"{name}: a user model needs its input shape", hint="add --input-shape 3,224,224"
        )

    torch = import_torch()  # Ctrl-C held while torch loads
    from torch.nn import Module

    path = Path(name)
    if path.is_file():
        try:
            loaded: Module = torch.jit.load(str(path), map_location="cpu")
            return loaded
        except Exception as err:  # noqa: BLE001 - torch raises many types for a bad archive
            raise UsageError(f"{name}: not a TorchScript file: {err}") from err
    if ":" not in name:
        raise UsageError(f"{name}: no such file", hint="a TorchScript file or module:callable")
    module_name, _, attr = name.partition(":")
    module = _import(module_name)
    factory = getattr(module, attr, None)
    if factory is None or not callable(factory):
        raise UsageError(f"{name}: {module_name} has no callable {attr!r}")
    model = factory()
    if not isinstance(model, Module):
        raise UsageError(f"{name}: returned {type(model).__name__}, not a torch.nn.Module")
    return model


def _import(module_name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        # console scripts do not put the working directory on sys.path; `python -m` does
        if err.name != module_name.split(".")[0] or os.getcwd() in sys.path:
            raise UsageError(f"cannot import {module_name}: {err}") from err
        sys.path.insert(0, os.getcwd())
        try:
            return importlib.import_module(module_name)
        except ImportError as err2:
            raise UsageError(f"cannot import {module_name}: {err2}") from err2
