"""The `jetbench models` listing: name, input shape, parameters, GMACs per image."""

from __future__ import annotations

from typing import Any, Dict, List

from .macs import builtin_cost
from .registry import list_specs


def describe_models() -> List[Dict[str, Any]]:
    """One dict per built-in network; counts come from the module graph (meta device)."""
    rows = []
    for spec in list_specs():
        cost = builtin_cost(spec.name)
        rows.append({"name": spec.name, "description": spec.description,
                     "input_shape": list(spec.input_shape), "params": cost.params,
                     "gmacs_per_image": round(cost.gmacs_per_image, 4),
                     "macs_per_image": cost.macs_per_image})
    return rows
