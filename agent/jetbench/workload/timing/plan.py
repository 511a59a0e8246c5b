"""`TimingPlan`: how one workload is timed, the one signature of the in-process runner
(`runner.run_timed`) and the workload child (`child.parent.run_in_child`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ...errors import UsageError
from .loop import Progress, warmup_cap_s

Callback = Callable[[], None]


@dataclass(frozen=True)
class TimingPlan:
    """Warm-up runs at least `warmup_iterations` and `warmup_s`, then until the latency is
    stable, or `max_warmup_s` (default 3 x warmup_s + 2 s) has passed; the timed phase runs
    until at least `iterations` iterations AND `duration_s` seconds are done (trtexec's rule).

    `on_timed_start()` fires immediately before the first timed iteration starts, and
    `on_timed_end()` immediately after the last one has been synchronised (both outside the
    timed interval: measure opens and closes its power window there). `progress(phase,
    fraction)` is called at most every 0.1 s."""

    iterations: int = 10
    duration_s: float = 3.0
    warmup_s: float = 1.0
    warmup_iterations: int = 2
    max_warmup_s: Optional[float] = None
    on_timed_start: Optional[Callback] = None
    on_timed_end: Optional[Callback] = None
    progress: Optional[Progress] = None

    @classmethod
    def measuring(cls, iterations: int, duration_s: float, warmup_s: float,
                  on_timed_start: Optional[Callback] = None,
                  on_timed_end: Optional[Callback] = None,
                  progress: Optional[Progress] = None) -> TimingPlan:
        """measure's plan (every rank's too): its warm-up is `warmup_s` alone, at least one
        iteration when there is one."""
        return cls(iterations, duration_s, warmup_s, 1 if warmup_s > 0 else 0,
                   on_timed_start=on_timed_start, on_timed_end=on_timed_end, progress=progress)

    def check(self) -> None:
        """The rules, for the in-process runner and the child alike (UsageError)."""
        if self.iterations < 1:
            raise UsageError(f"iterations must be at least 1, not {self.iterations}")
        if self.duration_s < 0 or self.warmup_s < 0:
            raise UsageError("durations must not be negative")

    @property
    def warmup_cap_s(self) -> float:
        return warmup_cap_s(self.warmup_s, self.max_warmup_s)
