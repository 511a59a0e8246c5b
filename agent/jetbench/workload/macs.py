"""Parameters, multiply-accumulates and activation sizes of a network, from its module graph.

What is counted: the multiply-accumulates of convolutions (grouped/depthwise included) and
fully-connected layers, per image, at the model's input shape. BatchNorm, LRN, pooling,
activations, residual additions and concatenations are not counted (they are <1% of the
arithmetic of these networks, and it is what the published "GMACs" figures count).
A large network's pass runs on torch's meta device: shapes only, no memory, no arithmetic. A small
one's runs on a CPU copy with a batch of 1 zeros: on meta, most operators run through torch's
Python references, whose first call imports torch._dynamo (about 1 s of CPU here, several on a
Jetson's CPU), more than a small network's pass costs on the CPU.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Dict, Optional, Sequence, Tuple, Union

from ._torch import import_torch
from .registry import get_spec

if TYPE_CHECKING:  # torch is optional at run time; its types are the dev venv's
    from torch.nn import Module


# A network whose params x input positions is at most this is counted on the CPU (its
# multiply-accumulates per image are at most that where no layer upsamples: each weight used at
# most once per position). Measured on the development machine's x86 core: a 1.5e8 convolution
# 2.7 ms, against about 1 s for meta's first call.
CPU_PASS_MACS = 200_000_000


@dataclass(frozen=True)
class ModelCost:
    """Per-image cost of a network. `activation_elems` is the sum of every leaf layer's output
    (what training keeps for backward); `peak_layer_elems` the largest input+output of one layer
    (what inference needs at once)."""

    params: int
    macs_per_image: int
    activation_elems_per_image: int
    peak_layer_elems_per_image: int

    @property
    def gmacs_per_image(self) -> float:
        return self.macs_per_image / 1e9


def count_params(model: Module) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def model_cost(model: Module, input_shape: Sequence[int]) -> ModelCost:
    """Counts on a copy of `model` moved to the meta device, or for a small network
    (`counting_device`) to the CPU (the model itself is used if it already lives on meta); on
    torch 1.x (no meta convolutions) with a batch of 1 zeros through the model itself, where it
    is."""
    torch = import_torch()
    from torch import nn

    device = next(iter(model.parameters()), torch.empty(0, device="meta")).device.type
    if device != "meta" and meta_kernels(torch):
        device = counting_device(model, input_shape)
        model = _copy_to(model, device)
    counts = {"macs": 0, "acts": 0, "peak": 0}

    def hook(module: Module, inputs: Tuple[object, ...], output: object) -> None:
        if not isinstance(output, torch.Tensor):
            return
        out_elems = output.numel()
        in_elems = sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))
        counts["acts"] += out_elems
        counts["peak"] = max(counts["peak"], in_elems + out_elems)
        if isinstance(module, nn.modules.conv._ConvNd) and not isinstance(
            module, nn.modules.conv._ConvTransposeNd
        ):
            per_output = (module.in_channels // module.groups) * _prod(module.kernel_size)
            counts["macs"] += out_elems * per_output
        elif isinstance(module, nn.Linear):
            counts["macs"] += out_elems * module.in_features

    handles = [m.register_forward_hook(hook) for m in model.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            model.eval()(torch.zeros((1, *input_shape), device=device))
    finally:
        for handle in handles:
            handle.remove()
    return ModelCost(count_params(model), counts["macs"], counts["acts"], counts["peak"])


@functools.lru_cache(maxsize=None)
def builtin_cost(name: str) -> ModelCost:
    """Cost of a built-in network, built directly on the meta device (fast: no weights)."""
    torch = import_torch()
    spec = get_spec(name)
    if not meta_kernels(torch):
        return model_cost(spec.build(), spec.input_shape)  # counted on the CPU, batch 1
    with torch.device("meta"):
        model = spec.build()
    return model_cost(model, spec.input_shape)


def meta_kernels(torch: ModuleType) -> bool:
    """torch 2.0+: `with torch.device("meta")` builds without weights, and convolutions run on
    meta tensors. torch 1.x has neither (1.10: "convolution_overrideable not implemented"):
    there the counting pass runs a real batch of 1 on the CPU."""
    return hasattr(torch.device("cpu"), "__enter__")


def counting_device(model: Module, input_shape: Sequence[int]) -> str:
    """"cpu" for a network small enough that its pass costs less there than meta's first call
    in a process (CPU_PASS_MACS), else "meta"."""
    positions = _prod(tuple(input_shape[1:]))  # 1 for a shape of one dimension
    return "cpu" if count_params(model) * positions <= CPU_PASS_MACS else "meta"


def _copy_to(model: Module, device: str) -> Module:
    """A copy of `model` on `device`. To meta, its weights are not copied first (a deep copy of
    ResNet-18's 47 MB took 0.5 s): each parameter and buffer is given to the copy as an empty
    meta tensor of its shape."""
    import copy

    memo: Dict[int, object] = {}
    if device == "meta":
        torch = import_torch()
        for p in model.parameters():
            memo[id(p)] = torch.nn.Parameter(torch.empty_like(p, device="meta"),
                                             requires_grad=p.requires_grad)
        for b in model.buffers():
            memo[id(b)] = torch.empty_like(b, device="meta")
    return copy.deepcopy(model, memo).to(device)


def _prod(values: Union[int, Sequence[int]]) -> int:
    out = 1
    for v in values if isinstance(values, (tuple, list)) else (values,):
        out *= int(v)
    return out


def macs_or_none(model: Module, input_shape: Sequence[int]) -> Optional[ModelCost]:
    """Cost of a user model, or None when its graph cannot be traced (TorchScript, custom ops)."""
    try:
        return model_cost(model, input_shape)
    except Exception:  # noqa: BLE001 - any failure only means "no GFLOP/s figure"
        return None
