"""The `Workload` every kind is built into (a PyTorch network, an ONNX model, a TensorRT engine,
a simulated network) and the options it runs with: what the timing loop and the result need of
it, without any framework (the PyTorch specifics are pytorch.py's)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, ContextManager, Dict, Optional, Protocol, Sequence, Tuple

from .macs import ModelCost
from .runtimes import COMPILE, TORCH, provider_for

MODES = ("inference", "train")


class Batch(Protocol):
    """The input batch as its framework holds it (a torch.Tensor, a NumPy array, a simulated
    network's shape): the result's `workload.input_shape` is its shape less the batch."""

    @property
    def shape(self) -> Sequence[int]: ...


@dataclass(frozen=True)
class RunOptions:
    """How to run (framework settings). `threads` None keeps torch's default.
    `memory_limit_bytes` refuses a workload whose estimated footprint exceeds it, through the
    same path as a real allocator OOM (and caps the CUDA caching allocator to it)."""

    mode: str = "inference"
    cudnn: bool = True
    cudnn_benchmark: bool = False
    channels_last: bool = False
    cuda_graph: bool = False
    compile: bool = False
    threads: Optional[int] = None
    memory_limit_bytes: Optional[int] = None
    seed: int = 0
    provider: Optional[str] = None  # ONNX Runtime's execution provider (None: the best present)
    runtime: str = TORCH  # --runtime (workload/runtimes/): torchscript and compile are built here

    def for_runtime(self, runtime: str, model: str) -> RunOptions:
        """These options for one runtime's row (--provider only where it belongs)."""
        return replace(self, runtime=runtime, provider=provider_for(runtime, model, self.provider))


@dataclass
class Workload:
    """A ready-to-time workload. `step()` runs one iteration (forward, or forward+backward)
    without synchronising; `sync()` waits for the device; `context()` is entered once around
    a loop of steps (inference_mode for inference).

    Another framework (ONNX Runtime, TensorRT) fills `framework`, `details` (more of the
    result's `workload` object), `frame` (its context around a whole timed run, in place of
    PyTorch's settings, device and OOM mapping) and `host_timed` (time with the host clock
    even on a GPU: a call that returns only when the device is done)."""

    model: str
    precision: str
    batch: int
    device: str
    input_mode: str
    options: RunOptions
    module: object  # the framework's network: torch's Module, ORT's session, TensorRT's engine
    input: Batch
    cost: Optional[ModelCost]
    footprint_bytes: int
    step: Callable[[], object]
    sync: Callable[[], None]
    context: Callable[[], ContextManager[object]]
    notes: Tuple[str, ...] = field(default=())
    framework: str = "pytorch"
    details: Dict[str, object] = field(default_factory=dict)
    frame: Optional[Callable[[str], ContextManager[object]]] = None
    host_timed: bool = False
    outputs: Optional[Callable[[], object]] = None  # one step, then its first output (None: step())

    @property
    def mode(self) -> str:
        return self.options.mode

    @property
    def flops_per_iteration(self) -> Optional[float]:
        """2 flops per MAC; training counts backward as twice the forward (grad wrt inputs and
        weights), so 3 x forward."""
        if self.cost is None:
            return None
        passes = 3 if self.mode == "train" else 1
        return 2.0 * self.cost.macs_per_image * self.batch * passes

    def describe(self) -> Dict[str, object]:
        """The result schema's `workload` object."""
        return {"model": self.model, "precision": self.precision, "batch": self.batch,
                "device": self.device, "mode": self.mode, "input": self.input_mode,
                "input_shape": list(self.input.shape[1:]),
                "gmacs_per_image": None if self.cost is None else self.cost.gmacs_per_image,
                "params": None if self.cost is None else self.cost.params,
                "framework": self.framework, "runtime": self.runtime, **self.details}

    @property
    def runtime(self) -> str:
        """The --runtime this is (workload/runtimes/): a PyTorch network's from its options (the
        --compile flag is the runtime `compile`), else its framework's."""
        if self.framework != "pytorch":
            return self.framework
        return COMPILE if self.options.compile else self.options.runtime

    def running(self, label: str) -> ContextManager[object]:
        """What a timed run of this workload happens inside: its framework's `frame` (settings,
        device, errors turned into jetbench's, and `context()`); a PyTorch network's is
        pytorch.TorchWorkload's."""
        if self.frame is not None:
            return self.frame(label)
        return self.context()


class PointSpec(Protocol):
    """What names a point's workload (run/request.Point, a timed row): its network, precision
    and batch."""

    @property
    def model(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def batch(self) -> int: ...
