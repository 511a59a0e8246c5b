"""The timing loop: warm up until stable, then time iterations until both a minimum count and
a minimum duration are met (trtexec's rule), synchronising the device for every timing.

`run_timed()` is what the measure orchestrator calls: its callbacks open and close a power
window exactly around the timed iterations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from ...documents import ResultDoc, ThroughputDoc, WorkloadDoc
from .._torch import import_torch
from ..base import Workload
from ..pytorch import is_cuda
from .loop import Done, Progress, cuda_loop, host_loop, warm_then_time
from .plan import TimingPlan
from .stats import CV_WARN, LOCK_ADVICE, LatencyStats, coefficient_of_variation, images_per_s
from .stats import latency_stats as _latency_stats


@dataclass(frozen=True)
class TimingResult:
    """One timed run. Latencies are per iteration (one batch), in milliseconds;
    `images_per_s` = batch x iterations / wall_s, over the timed iterations only."""

    workload: WorkloadDoc
    iterations: int
    wall_s: float
    images_per_s: float
    latency_ms: LatencyStats
    cv: float
    gflops: Optional[float]
    warmup_iterations: int
    warmup_s: float
    latencies_ms: Tuple[float, ...] = field(repr=False)
    warnings: Tuple[str, ...] = ()

    def to_dict(self, per_iteration: bool = False) -> ResultDoc:
        """The result schema's `workload`, `throughput` and `warnings`."""
        throughput: ThroughputDoc = {
            "images_per_s": self.images_per_s,
            "latency_ms": self.latency_ms.to_dict(),
            "latency_stdev_ms": self.latency_ms.stdev_ms,
            "cv": self.cv,
            "gflops": self.gflops,
            "iterations": self.iterations,
            "wall_s": self.wall_s,
            "warmup_iterations": self.warmup_iterations,
            "warmup_s": self.warmup_s,
        }
        if per_iteration:
            throughput["per_iteration_ms"] = list(self.latencies_ms)
        workload = dict(self.workload, iterations=self.iterations)
        return {"workload": workload, "throughput": throughput, "warnings": list(self.warnings)}


def run_timed(workload: Workload, plan: TimingPlan = TimingPlan()) -> TimingResult:
    """Warm `workload` up, then time it as `plan` says; each iteration synchronised (CUDA events
    on a GPU). Raises OutOfMemory if the device runs out of memory."""
    plan.check()
    # CUDA events for a CUDA workload PyTorch times; the host clock otherwise (ONNX, engines)
    torch = import_torch() if is_cuda(workload.device) and not workload.host_timed else None
    label = f"{workload.model} {workload.precision} batch {workload.batch}"
    with workload.running(label):

        def loop(done: Done, phase: str, report: Optional[Progress]) -> Tuple[List[float], float]:
            if torch is not None:
                return cuda_loop(torch, workload.step, workload.sync, done, phase, report)
            return host_loop(workload.step, workload.sync, done, phase, report)

        warm, timed, wall_s, warnings = warm_then_time(
            loop, plan.iterations, plan.duration_s, plan.warmup_s, plan.warmup_iterations,
            plan.warmup_cap_s, plan.on_timed_start, plan.on_timed_end, plan.progress)
    return timing_result(workload.describe(), workload.batch, workload.flops_per_iteration,
                         timed, wall_s, warm, list(workload.notes) + warnings)


def timing_result(workload: WorkloadDoc, batch: int, flops_per_iteration: Optional[float],
                  timed: List[float], wall_s: float, warm: List[float],
                  warnings: List[str]) -> TimingResult:
    """The TimingResult of timed latencies (s): the in-process runner's and the child's."""
    latencies_ms = tuple(t * 1e3 for t in timed)
    stats = _latency_stats(latencies_ms)
    cv = coefficient_of_variation(latencies_ms)
    warnings = list(warnings)
    if cv > CV_WARN and len(latencies_ms) >= 3:
        warnings.append(f"latency varies {cv:.1%} between iterations (over {CV_WARN:.1%}): "
                        + LOCK_ADVICE)
    ips = images_per_s(batch, len(timed), wall_s)
    gflops = None if flops_per_iteration is None else \
        flops_per_iteration * len(timed) / wall_s / 1e9
    return TimingResult(workload, len(timed), wall_s, ips, stats, cv, gflops,
                        len(warm), sum(warm), latencies_ms, tuple(warnings))
