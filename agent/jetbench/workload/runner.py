"""The timing loop: warm up until stable, then time iterations until both a minimum count and
a minimum duration are met (trtexec's rule), synchronising the device for every timing.

`run_timed()` is what the measure orchestrator calls: its callbacks open and close a power
window exactly around the timed iterations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import UsageError
from .stats import CV_WARN, LatencyStats, coefficient_of_variation, images_per_s, is_stable
from .stats import latency_stats as _latency_stats
from .workload import Workload, is_cuda

Callback = Callable[[], None]
# progress(phase, fraction): phase "warmup" or "timed", fraction 0..1 of the minimum to meet
Progress = Callable[[str, float], None]

_PROGRESS_EVERY_S = 0.1
_STABLE_WINDOW = 3
_STABLE_TOLERANCE = 0.05


@dataclass(frozen=True)
class TimingResult:
    """One timed run. Latencies are per iteration (one batch), in milliseconds;
    `images_per_s` = batch x iterations / wall_s, over the timed iterations only."""

    workload: Dict[str, Any]
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

    def to_dict(self, per_iteration: bool = False) -> Dict[str, Any]:
        """The result schema's `workload`, `throughput` and `warnings`."""
        throughput: Dict[str, Any] = {
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


def run_timed(
    workload: Workload,
    iterations: int = 10,
    duration_s: float = 3.0,
    warmup_s: float = 1.0,
    warmup_iterations: int = 2,
    max_warmup_s: Optional[float] = None,
    on_timed_start: Optional[Callback] = None,
    on_timed_end: Optional[Callback] = None,
    progress: Optional[Progress] = None,
) -> TimingResult:
    """Warm `workload` up, then time it.

    Warm-up runs at least `warmup_iterations` and `warmup_s`, then until the median latency of
    the last 3 iterations is within 5% of the 3 before (stable), or `max_warmup_s` (default
    3 x warmup_s + 2 s) has passed. The timed phase runs until at least `iterations` iterations
    AND `duration_s` seconds are done. Each iteration is synchronised (CUDA events on a GPU).

    `on_timed_start()` fires immediately before the first timed iteration starts, and
    `on_timed_end()` immediately after the last one has been synchronised (both outside the
    timed interval). `progress(phase, fraction)` is called at most every 0.1 s.
    Raises OutOfMemory if the device runs out of memory."""
    if iterations < 1:
        raise UsageError(f"iterations must be at least 1, not {iterations}")
    if duration_s < 0 or warmup_s < 0:
        raise UsageError("durations must not be negative")
    cap = max_warmup_s if max_warmup_s is not None else 3 * warmup_s + 2.0
    loop = _cuda_loop if is_cuda(workload.device) and not workload.host_timed else _host_loop
    warnings: List[str] = list(workload.notes)
    label = f"{workload.model} {workload.precision} batch {workload.batch}"
    with workload.running(label):
        warm: List[float] = []
        if warmup_iterations > 0 or warmup_s > 0:
            warm, _ = loop(workload, _warmup_done(warmup_iterations, warmup_s, cap), "warmup",
                           progress)
            if len(warm) >= 2 * _STABLE_WINDOW and not is_stable(
                warm, _STABLE_WINDOW, _STABLE_TOLERANCE
            ):
                warnings.append(f"latency was still changing after {len(warm)} warm-up "
                                f"iterations ({cap:.1f} s cap)")
        if on_timed_start is not None:
            on_timed_start()
        timed, wall_s = loop(workload, _timed_done(iterations, duration_s), "timed", progress)
        if on_timed_end is not None:
            on_timed_end()
    return _result(workload, timed, wall_s, warm, warnings)


def _warmup_done(count: int, seconds: float, cap: float) -> Callable[[List[float], float], bool]:
    def done(latencies_s: List[float], elapsed_s: float) -> bool:
        if elapsed_s >= cap and len(latencies_s) >= count:
            return True
        if len(latencies_s) < count or elapsed_s < seconds:
            return False
        return is_stable(latencies_s, _STABLE_WINDOW, _STABLE_TOLERANCE)

    done.fraction = lambda n, t: min(n / count if count else 1.0, t / seconds if seconds else 1.0)
    return done


def _timed_done(count: int, seconds: float) -> Callable[[List[float], float], bool]:
    def done(latencies_s: List[float], elapsed_s: float) -> bool:
        return len(latencies_s) >= count and elapsed_s >= seconds

    done.fraction = lambda n, t: min(n / count, t / seconds if seconds else 1.0)
    return done


def _host_loop(workload: Workload, done: Any, phase: str, progress: Optional[Progress]
               ) -> Tuple[List[float], float]:
    """CPU: back-to-back iterations timed with perf_counter; latency i is the time from the end
    of iteration i-1 to the end of iteration i, so latencies sum exactly to the wall time."""
    step, sync, clock = workload.step, workload.sync, time.perf_counter
    latencies: List[float] = []
    append = latencies.append
    start = prev = clock()
    next_report = start + _PROGRESS_EVERY_S
    while True:
        step()
        sync()
        now = clock()
        append(now - prev)
        prev = now
        if done(latencies, now - start):
            break
        if progress is not None and now >= next_report:
            progress(phase, done.fraction(len(latencies), now - start))
            next_report = now + _PROGRESS_EVERY_S
    return latencies, prev - start


def _cuda_loop(workload: Workload, done: Any, phase: str, progress: Optional[Progress]
               ) -> Tuple[List[float], float]:
    """GPU: each iteration bracketed by CUDA events and synchronised; latency is the device
    time between the events, wall time the host clock across the whole loop."""
    import torch

    step, clock = workload.step, time.perf_counter
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    latencies: List[float] = []
    workload.sync()
    start = clock()
    next_report = start + _PROGRESS_EVERY_S
    while True:
        begin.record()
        step()
        end.record()
        end.synchronize()
        latencies.append(begin.elapsed_time(end) / 1e3)
        now = clock()
        if done(latencies, now - start):
            break
        if progress is not None and now >= next_report:
            progress(phase, done.fraction(len(latencies), now - start))
            next_report = now + _PROGRESS_EVERY_S
    return latencies, now - start


def _result(workload: Workload, timed: List[float], wall_s: float, warm: List[float],
            warnings: List[str]) -> TimingResult:
    latencies_ms = tuple(t * 1e3 for t in timed)
    stats = _latency_stats(latencies_ms)
    cv = coefficient_of_variation(latencies_ms)
    if cv > CV_WARN and len(latencies_ms) >= 3:
        warnings.append(f"latency varies {cv:.1%} between iterations (over {CV_WARN:.1%}): lock "
                        "the clocks (`jetbench maxperf`) and stop other work on the machine")
    ips = images_per_s(workload.batch, len(timed), wall_s)
    flops = workload.flops_per_iteration
    gflops = None if flops is None else flops * len(timed) / wall_s / 1e9
    return TimingResult(workload.describe(), len(timed), wall_s, ips, stats, cv, gflops,
                        len(warm), sum(warm), latencies_ms, tuple(warnings))
