"""`TimedRun`: one point's workload as the measure orchestrator times it, whatever runs it.

    run = InProcessRun(...)          # or ChildRun, command.CommandTimedRun, distributed's RanksRun
    run.prepare()                    # build the network, load the engine: never in a window
    timing = run.run(plan)           # a TimingPlan: the loop's numbers and its hooks
    result = run.window(timing, sampler, result)   # the power window the figures use
    run.annotate(doc); run.finish(doc, timing, duration_s)
    run.close()

The plan's `on_timed_start`/`on_timed_end` open and close the power window exactly around the timed
iterations (or the command's run). A kind overrides only what differs; the defaults are the
in-process network's.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Optional, Protocol, Tuple

from ...work_units import DEFAULT_UNIT
from ..base import RunOptions
from ..build import build_workload
from ..child.parent import ChildWorkload, run_in_child
from ..model_arg import InputShape, model_kind
from ..runtimes import EXPORTED, TORCH
from .plan import TimingPlan
from .runner import TimingResult, run_timed

if TYPE_CHECKING:
    from ...documents import PowerDoc, PowerPoint, ResultDoc
    from ...sampling.sampler import Sampler
    from ...sampling.window import WindowResult
    from ..base import Workload


class Timing(Protocol):
    """What measure reads of a run's timing: a network's TimingResult, a command's
    CommandTiming (workload/command/run.py)."""

    @property
    def images_per_s(self) -> float: ...
    @property
    def latencies_ms(self) -> Tuple[float, ...]: ...
    def to_dict(self) -> ResultDoc: ...


class TimedRun:
    """The protocol, with the defaults every kind shares."""

    framework = "pytorch"  # the result's workload.framework
    warms_up = True  # has a warm-up the result's phases mark (a command has none)
    times_iterations = True  # jetbench times each iteration (a command's are its own business)
    unit = DEFAULT_UNIT  # what one item is (work_units.py): a network's are images

    def prepare(self) -> None:
        """Everything before the warm-up (outside every window)."""

    def run(self, plan: TimingPlan) -> Timing:
        raise NotImplementedError

    def window(self, timing: Timing, sampler: Optional[Sampler],
               whole: Optional[WindowResult]) -> Optional[WindowResult]:
        """The power window the figures use: by default the one the hooks opened and closed."""
        return whole

    def power_basis(self, power: PowerDoc) -> Optional[PowerPoint]:
        """The power img/J divides by, where it is not the window's first total (None: it is):
        a multi-GPU run's devices summed (distributed/messages.py)."""
        return None

    def annotate(self, doc: ResultDoc) -> None:
        """Add what this kind knows to the result (after the power figures)."""

    def finish(self, doc: ResultDoc, timing: Timing, duration_s: float) -> None:
        """The last word on the finished result (its unit, its own verdicts)."""

    def close(self) -> None:
        """Release the device memory (the next point may need it all)."""
        gc.collect()


class InProcessRun(TimedRun):
    """A network built in this process: PyTorch, ONNX Runtime or a TensorRT engine."""

    def __init__(self, model: str, precision: str, batch: int, device: str,
                 input_shape: Optional[InputShape] = None, provider: Optional[str] = None,
                 runtime: str = TORCH):
        self.framework = model_kind(model) if runtime not in EXPORTED else runtime
        self._args = (model, precision, batch, device)
        self._input_shape = input_shape
        self._options = RunOptions(provider=provider).for_runtime(runtime, model)
        self._workload: Optional[Workload] = None

    def prepare(self) -> None:
        """Build (export, build the engine, check the outputs): never in a window."""
        model, precision, batch, device = self._args
        self._workload = build_workload(model, precision, batch, device,
                                        input_shape=self._input_shape, options=self._options)

    def run(self, plan: TimingPlan) -> TimingResult:
        assert self._workload is not None
        return run_timed(self._workload, plan)

    def close(self) -> None:
        self._workload = None
        super().close()


class ChildRun(TimedRun):
    """A built-in network in a child under another interpreter (--workload-python)."""

    def __init__(self, python: str, model: str, precision: str, batch: int, device: str,
                 input_shape: Optional[InputShape] = None):
        self._work = ChildWorkload(python, model, precision, batch, device,
                                   input_shape=input_shape)

    def run(self, plan: TimingPlan) -> TimingResult:
        return run_in_child(self._work, plan)

