"""A measure/sweep run as one rank of a multi-device job: rank 0 runs the usual measure with
a Leader (it alone owns the board), the other ranks follow it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Optional, TypeVar

from ..errors import RankLost
from .devices import RankEnv, parse_devices
from .group import RankGroup
from .messages import Leader, follow

if TYPE_CHECKING:
    from ..workload.timing.plan import Progress

T = TypeVar("T")


def launcher_name() -> str:
    """Who started the ranks: `jetbench measure --devices` marks its children; else torchrun."""
    return "jetbench --devices" if os.environ.get("JETBENCH_LAUNCHER") else "torchrun"


def run_as_rank(env: RankEnv, device: str, devices: Optional[str], scaling: bool,
                run: Callable[[str, Leader], T], progress: Optional[Progress] = None
                ) -> Optional[T]:
    """Join the job's process group and take this rank's part. `run(rank_device, leader)` is
    the measure (or sweep) call on this rank's device (`device` as asked: `--device`), made
    on rank 0 only; its report is returned there, None on the other ranks (which print
    nothing: rank 0 speaks for the run)."""
    spec = parse_devices(devices) if devices else None
    group = RankGroup.open(env, device, spec)
    together = False  # every rank got to the end: leave the group in step
    try:
        all_devices = [str(d) for d in group.gather(group.device)]
        if not env.leader:
            follow(group, progress)
            together = True
            return None
        leader = Leader(group, all_devices, scaling, launcher_name())
        try:
            report = run(group.device, leader)
        except KeyboardInterrupt:
            leader.broken = True  # the others may be mid-collective: they are stopped by signal
            raise
        except RankLost:
            leader.broken = True
            raise
        finally:
            leader.finish()
            together = not leader.broken  # Stop was sent: the others wait in close() too
        return report
    finally:
        group.close(together)
