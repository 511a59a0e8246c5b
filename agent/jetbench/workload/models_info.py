"""The `jetbench models` listing: name, input shape, parameters, GMACs per image."""

from __future__ import annotations

from typing import List, Optional, TypedDict

from .registry import list_specs


class ModelDoc(TypedDict):
    """A built-in network as `models --json` lists it."""
    name: str
    description: str
    input_shape: List[int]
    params: Optional[int]
    gmacs_per_image: float
    macs_per_image: int


def describe_models() -> List[ModelDoc]:
    """One dict per built-in network, from the registry's static facts (no network is built,
    torch is not imported; tests/test_models_listing.py checks the facts against the built
    networks)."""
    return [{"name": spec.name, "description": spec.description,
             "input_shape": list(spec.input_shape), "params": spec.params,
             "gmacs_per_image": round(spec.macs_per_image / 1e9, 4),
             "macs_per_image": spec.macs_per_image} for spec in list_specs()]
