"""Per-layer forward (and backward) times, like `caffe time`: every leaf module timed with the
device synchronised before and after it. Slower than a plain run (one sync per layer), so it is
a separate pass after the timed run, never mixed into the throughput figure."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

from .base import Workload
from .pytorch import backend_settings, oom_guard, torch_parts

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle


@dataclass(frozen=True)
class LayerTime:
    """Mean time of one layer per iteration, in milliseconds (backward None in inference)."""

    name: str
    kind: str
    forward_ms: float
    backward_ms: Optional[float]


@dataclass(frozen=True)
class LayerTimes:
    layers: Tuple[LayerTime, ...]
    iterations: int
    forward_ms: float  # mean whole forward pass (including what no layer accounts for)
    backward_ms: Optional[float]

    def to_dict(self) -> Dict[str, object]:  # `time --layers --json`
        return {
            "iterations": self.iterations,
            "forward_ms": self.forward_ms,
            "backward_ms": self.backward_ms,
            "layers": [
                {"name": lt.name, "type": lt.kind, "forward_ms": lt.forward_ms,
                 "backward_ms": lt.backward_ms}
                for lt in self.layers
            ],
        }


def time_layers(workload: Workload, iterations: int = 10) -> LayerTimes:
    """Runs `iterations` steps of an already warmed-up workload with hooks on every leaf module.
    A TorchScript model has no Python modules to hook: it yields no layers, totals only."""
    import torch

    sync, clock = workload.sync, time.perf_counter
    train = workload.mode == "train"
    net, batch = torch_parts(workload)
    leaves = [(n or type(m).__name__, m) for n, m in net.named_modules()
              if not list(m.children()) and not isinstance(m, torch.jit.ScriptModule)]
    fwd: Dict[str, float] = {n: 0.0 for n, _ in leaves}
    bwd: Dict[str, float] = {n: 0.0 for n, _ in leaves}
    started: Dict[Tuple[str, str], float] = {}
    handles: List[RemovableHandle] = []

    def begin(name: str, kind: str) -> Callable[..., None]:
        def hook(*_: object) -> None:
            sync()
            started[(name, kind)] = clock()
        return hook

    def finish(name: str, kind: str, into: Dict[str, float]) -> Callable[..., None]:
        def hook(*_: object) -> None:
            sync()
            into[name] += clock() - started.pop((name, kind), clock())
        return hook

    for name, module in leaves:
        handles.append(module.register_forward_pre_hook(begin(name, "f")))
        handles.append(module.register_forward_hook(finish(name, "f", fwd)))
        if train:
            handles.append(module.register_full_backward_pre_hook(begin(name, "b")))
            handles.append(module.register_full_backward_hook(finish(name, "b", bwd)))
    total_f = total_b = 0.0
    # In training the input needs a gradient, or the first layer's backward hook fires before
    # its weight gradient is computed (costs one extra input-gradient for that layer).
    example = batch.detach().requires_grad_(train) if train else batch
    try:
        with backend_settings(workload.options, workload.precision), \
                oom_guard("per-layer timing"), workload.context():
            for _ in range(iterations):
                sync()
                t0 = clock()
                out = net(example)
                sync()
                t1 = clock()
                total_f += t1 - t0
                if train:
                    for p in net.parameters():
                        p.grad = None
                    out.float().sum().backward()
                    sync()
                    total_b += clock() - t1
    finally:
        for handle in handles:
            handle.remove()
    scale = 1e3 / iterations
    layers = tuple(
        LayerTime(name, type(module).__name__, fwd[name] * scale,
                  bwd[name] * scale if train else None)
        for name, module in leaves
    )
    return LayerTimes(layers, iterations, total_f * scale, total_b * scale if train else None)
