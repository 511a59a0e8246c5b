"""The ranks' process group: torch.distributed does the rendezvous, the barriers and the
gathering; this wrapper picks the backend, gives each rank its device (and on a CPU its share
of the cores), and turns a collective that fails because a peer is gone into RankLost."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, TypeVar

from ..errors import RankLost
from ..procs import die_with_parent
from .devices import DeviceSpec, RankEnv, cpu_share, rank_device
from .launch import require_distributed
from .teardown import joined

# A rank waits this long for its peers at a collective (rank 0's pinning, a --scaling
# baseline, model builds and warm-ups) before it gives up; a rank that dies is noticed by the
# launcher, which stops the others at once.
COLLECTIVE_TIMEOUT_S = 3600.0
# The last barrier, when every rank got to the end: a peer that does not come within this is
# gone, and this rank leaves without it.
if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

T = TypeVar("T")
CLOSE_TIMEOUT_S = 60.0


class RankGroup:
    """This process's rank: `gather`, `broadcast` and `barrier` over all ranks."""

    def __init__(self, env: RankEnv, device: str, dist: ModuleType):  # torch.distributed
        self.env, self.device, self._dist = env, device, dist
        self.threads: Optional[int] = None
        self.cores: Optional[List[int]] = None
        self.last_s: Dict[str, float] = {}  # seconds the last call of each collective took
        self.backend = dist.get_backend() if dist.is_initialized() else None
        # the group of the control collectives (None: the default)
        self.control: Optional[ProcessGroup] = None

    @classmethod
    def open(cls, env: RankEnv, requested_device: str, spec: Optional[DeviceSpec]) -> RankGroup:
        require_distributed()
        import torch
        import torch.distributed as dist

        # A rank whose launcher is killed (kill -9 of `jetbench measure --devices`, or of
        # torchrun) gets SIGTERM instead of living on as an orphan: rank 0 then restores the
        # clocks as on Ctrl-C.
        die_with_parent(signal.SIGTERM)
        device = rank_device(requested_device, env, spec, torch.cuda.is_available())
        group = cls(env, device, dist)
        if device.startswith("cuda"):
            torch.cuda.set_device(torch.device(device))  # nccl gathers on the current device
        else:
            group.take_cpu_share(torch)
        # gloo on GPUs too: the group only carries control collectives (barriers, small
        # objects), never tensors of the workload; NVIDIA's Jetson torch wheels have no NCCL,
        # and NCCL's kernels would busy-poll every GPU while ranks wait
        backend = "gloo"
        joined()  # from here on the process ends with teardown.leave
        dist.init_process_group(backend, timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S))
        group.backend = backend
        group.control = control_group(dist, backend)
        return group

    def take_cpu_share(self, torch: ModuleType) -> None:
        """Each CPU rank on its own cores, with as many threads (the workloads would otherwise
        fight over every core)."""
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
            list(range(os.cpu_count() or 1))
        share = cpu_share(cores, self.env.local_rank, self.env.local_world_size)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, share)
        torch.set_num_threads(len(share))
        self.cores, self.threads = share, len(share)

    # -- collectives ----------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T]) -> T:
        t0 = time.perf_counter()
        try:
            return fn()
        except RuntimeError as err:  # gloo/nccl: a peer closed its connection, or timed out
            raise RankLost(f"rank {self.env.rank}: {what} failed, another rank is gone "
                           f"({str(err).splitlines()[0] if str(err) else type(err).__name__})"
                           ) from err
        finally:
            self.last_s[what] = time.perf_counter() - t0

    def gather(self, value: object) -> List[object]:
        """Every rank's value, in rank order, on every rank."""
        out: List[object] = [None] * self.env.world_size
        self._call("gather", lambda: self._dist.all_gather_object(out, value, **self._on()))
        return out

    def broadcast(self, value: object = None) -> object:
        """Rank 0's value, on every rank."""
        box = [value]
        self._call("broadcast",
                   lambda: self._dist.broadcast_object_list(box, src=0, **self._on()))
        return box[0]

    def barrier(self) -> float:
        """Wait for every rank; the seconds this rank waited."""
        self._call("barrier", lambda: self._dist.barrier(**self._on()))
        return self.last_s["barrier"]

    def _on(self) -> Dict[str, ProcessGroup]:
        return {} if self.control is None else {"group": self.control}

    def close(self, together: bool = False) -> None:
        """Leave the group. `together`: the run ended well on every rank, so meet in one last
        barrier first (at most CLOSE_TIMEOUT_S), so that no rank tears down while a peer is
        still in a collective; then destroy_process_group on every rank (nccl's documentation
        asks it of each rank before exit). The process then ends with teardown.leave, which
        says why it must not finalize."""
        if not self._dist.is_initialized():
            return
        if together:
            try:
                work = self._dist.barrier(async_op=True, **self._on())
                work.wait(timedelta(seconds=CLOSE_TIMEOUT_S))
            except Exception:  # noqa: BLE001 - a peer already gone: nothing left to meet
                pass
        self._dist.destroy_process_group()


def control_group(dist: ModuleType, backend: str) -> Optional[ProcessGroup]:
    """Where barriers and object collectives go. Over NCCL they would spin on every GPU while
    ranks wait (NCCL's kernels busy-poll), so GPUs 1..N are neither idle nor cold during
    `--idle` and the scaling baseline: a gloo group over the same ranks carries them on the
    CPU instead. None (the default group) when the run is gloo already."""
    if backend != "nccl":
        return None
    return dist.new_group(backend="gloo", timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S))
