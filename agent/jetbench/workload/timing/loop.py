"""The timing loop's rules, shared by the in-process runner (runner.py) and the child runner
(child/runner.py, which runs under JetPack 4's Python 3.6 with torch >= 1.10).

Python 3.6 and the standard library only (torch is passed in, never imported here): no
`from __future__ import annotations`, no walrus, no positional-only parameters, no dataclasses.
tests/test_workload_child.py checks it with vermin.

Warm-up runs at least a count and a duration, then until the median latency of the last 3
iterations is within 5% of the 3 before (stable), or a cap has passed. The timed phase runs
until at least `iterations` AND `duration_s` are done (trtexec's rule). Each iteration is
synchronised.
"""

import time
from types import ModuleType
from typing import Callable, List, Optional, Sequence, Tuple

STABLE_WINDOW = 3
STABLE_TOLERANCE = 0.05
PROGRESS_EVERY_S = 0.1

# progress(phase, fraction): phase "warmup" or "timed", fraction 0..1 of the minimum to meet
Progress = Callable[[str, float], None]
Done = Callable[[List[float], float], bool]
# loop(done, phase, progress) -> (latencies in s, wall s)
Loop = Callable[[Done, str, Optional[Progress]], Tuple[List[float], float]]


def is_stable(latencies: Sequence[float], window: int = STABLE_WINDOW,
              tolerance: float = STABLE_TOLERANCE) -> bool:
    """True when the median of the last `window` latencies is within `tolerance` (relative) of
    the median of the `window` before them: warm-up is over (caches, clocks, autotuners)."""
    if len(latencies) < 2 * window:
        return False
    last = sorted(latencies[-window:])[window // 2]
    before = sorted(latencies[-2 * window:-window])[window // 2]
    return abs(last - before) <= tolerance * before


def warmup_cap_s(warmup_s: float, max_warmup_s: Optional[float] = None) -> float:
    """The warm-up's cap: `max_warmup_s`, else 3 x warmup_s + 2 s."""
    return max_warmup_s if max_warmup_s is not None else 3 * warmup_s + 2.0


def warmup_done(count: int, seconds: float, cap_s: float) -> Done:
    def done(latencies_s: List[float], elapsed_s: float) -> bool:
        if elapsed_s >= cap_s and len(latencies_s) >= count:
            return True
        if len(latencies_s) < count or elapsed_s < seconds:
            return False
        return is_stable(latencies_s)

    done.fraction = lambda n, t: min(n / count if count else 1.0,  # type: ignore[attr-defined]
                                     t / seconds if seconds else 1.0)
    return done


def timed_done(count: int, seconds: float) -> Done:
    def done(latencies_s: List[float], elapsed_s: float) -> bool:
        return len(latencies_s) >= count and elapsed_s >= seconds

    done.fraction = lambda n, t: min(n / count,  # type: ignore[attr-defined]
                                     t / seconds if seconds else 1.0)
    return done


def host_loop(step: Callable[[], object], sync: Callable[[], object], done: Done, phase: str,
              progress: Optional[Progress]) -> Tuple[List[float], float]:
    """CPU: back-to-back iterations timed with perf_counter; latency i is the time from the end
    of iteration i-1 to the end of iteration i, so latencies sum exactly to the wall time."""
    clock = time.perf_counter
    latencies = []  # type: List[float]
    append = latencies.append
    start = prev = clock()
    next_report = start + PROGRESS_EVERY_S
    while True:
        step()
        sync()
        now = clock()
        append(now - prev)
        prev = now
        if done(latencies, now - start):
            break
        if progress is not None and now >= next_report:
            progress(phase, done.fraction(len(latencies), now - start))  # type: ignore
            next_report = now + PROGRESS_EVERY_S
    return latencies, prev - start


def cuda_loop(torch: ModuleType, step: Callable[[], object], sync: Callable[[], object],
              done: Done, phase: str, progress: Optional[Progress]) -> Tuple[List[float], float]:
    """GPU (the current CUDA device): each iteration bracketed by CUDA events and synchronised;
    latency is the device time between the events, wall time the host clock across the loop."""
    clock = time.perf_counter
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    latencies = []  # type: List[float]
    sync()
    start = now = clock()
    next_report = start + PROGRESS_EVERY_S
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
            progress(phase, done.fraction(len(latencies), now - start))  # type: ignore
            next_report = now + PROGRESS_EVERY_S
    return latencies, now - start


def warm_then_time(loop: Loop, iterations: int, duration_s: float, warmup_s: float,
                   warmup_iterations: int, cap_s: float,
                   on_timed_start: Optional[Callable[[], None]],
                   on_timed_end: Optional[Callable[[], None]],
                   progress: Optional[Progress]
                   ) -> Tuple[List[float], List[float], float, List[str]]:
    """Warm up, then time: (warm-up latencies, timed latencies, timed wall s, warnings), in
    seconds. `on_timed_start()` fires immediately before the first timed iteration,
    `on_timed_end()` immediately after the last one has been synchronised (both outside the
    timed interval)."""
    warnings = []  # type: List[str]
    warm = []  # type: List[float]
    if warmup_iterations > 0 or warmup_s > 0:
        warm, _ = loop(warmup_done(warmup_iterations, warmup_s, cap_s), "warmup", progress)
        if len(warm) >= 2 * STABLE_WINDOW and not is_stable(warm):
            warnings.append(f"latency was still changing after {len(warm)} warm-up "
                            f"iterations ({cap_s:.1f} s cap)")
    if on_timed_start is not None:
        on_timed_start()
    timed, wall_s = loop(timed_done(iterations, duration_s), "timed", progress)
    if on_timed_end is not None:
        on_timed_end()
    return warm, timed, wall_s, warnings
