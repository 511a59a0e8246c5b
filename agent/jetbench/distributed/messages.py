"""One point on every rank, in lock step (the same calls on every rank, so no rank is ever
left waiting at a collective the others skipped):

    rank 0: broadcast the point        others: receive it (or Stop: the run is over)
    all:    build the workload on the rank's device, warm up
    all:    gather "ready or my error"  -> any error: every rank raises RankFailed with it
    rank 0: (--idle: sample idle power) open the power window
    all:    barrier                     -> nobody starts before the window is open
    all:    timed iterations, synchronised
    all:    barrier                     -> rank 0 closes the window
    all:    gather the rows (or errors) -> rank 0 aggregates them
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Protocol, Sequence, Union

from ..errors import JetbenchError, RankFailed, RankLost
from ..hw.cuda_map import cuda_gpu
from ..hw.meters.nvml import NvmlSource
from ..workload.base import PointSpec, Workload
from ..workload.build import build_workload
from ..workload.model_arg import InputShape
from ..workload.timing.plan import Progress, TimingPlan
from ..workload.timing.runner import TimingResult, run_timed
from ..workload.timing.timed import TimedRun
from .group import RankGroup
from .rows import RankRow, aggregate_timing, device_docs, devices_power_sum, scaling_doc

Callback = Optional[Callable[[], None]]

if TYPE_CHECKING:
    from ..documents import DeviceDoc, PowerDoc, PowerPoint, ResultDoc
    from ..hw.meters.base import PowerSource


class RequestSpec(Protocol):
    """What a rank needs of measure's request (run/request.MeasureRequest)."""

    @property
    def input_shape(self) -> Optional[InputShape]: ...
    @property
    def iterations(self) -> int: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def warmup_s(self) -> float: ...


@dataclass(frozen=True)
class PointOrder:
    """What every rank runs for one point (sent by rank 0, so all ranks agree)."""

    model: str
    precision: str
    batch: int
    input_shape: Optional[InputShape]
    iterations: int
    duration_s: float
    warmup_s: float

    @classmethod
    def of(cls, point: PointSpec, request: RequestSpec) -> PointOrder:
        return cls(point.model, point.precision, point.batch, request.input_shape,
                   request.iterations, request.duration_s, request.warmup_s)


@dataclass(frozen=True)
class Stop:
    """Rank 0's last message: no more points."""


def build(order: PointOrder, device: str) -> Workload:
    return build_workload(order.model, order.precision, order.batch, device,
                          input_shape=order.input_shape)


def timed(workload: Workload, order: PointOrder, on_start: Callback = None,
          on_end: Callback = None, progress: Optional[Progress] = None) -> TimingResult:
    return run_timed(workload, TimingPlan.measuring(order.iterations, order.duration_s,
                                                    order.warmup_s, on_start, on_end, progress))


def _raise_first_error(values: Sequence[object]) -> None:
    for value in values:
        if isinstance(value, str):
            raise RankFailed(value)


def _describe(group: RankGroup, err: BaseException) -> str:
    text = str(err) if isinstance(err, JetbenchError) else f"{type(err).__name__}: {err}"
    return f"rank {group.env.rank} ({group.device}): {text}"


@dataclass
class _RankState:
    """How far this rank got through a point (what its error still owes the others)."""
    ready: bool = False
    opened: bool = False
    ended: bool = False
    start: float = 0.0  # the ready gather's wait
    open: float = 0.0  # the opening barrier's wait
    end: float = 0.0  # the closing barrier's wait
    t_start: Optional[float] = None
    t_end: Optional[float] = None


def run_point(group: RankGroup, order: PointOrder, on_open: Callback = None,
              on_close: Callback = None, progress: Optional[Progress] = None,
              workload: Optional[Workload] = None) -> List[RankRow]:
    """This rank's part of one point (see the module docstring); every rank's row, in rank
    order. Any rank's failure raises RankFailed with its message on every rank."""
    state = _RankState()

    def opened() -> None:
        state.open = group.barrier()
        state.opened, state.t_start = True, time.monotonic()

    def start() -> None:
        t0 = time.perf_counter()
        ready = group.gather(None)
        state.ready, state.start = True, time.perf_counter() - t0
        _raise_first_error(ready)
        try:
            if on_open is not None:
                on_open()
        except Exception:
            opened()  # the others wait there; then this rank's error goes to the last gather
            raise
        opened()

    def end() -> None:
        state.t_end = time.monotonic()
        state.end = group.barrier()
        state.ended = True
        if on_close is not None:
            on_close()

    error: Optional[str] = None
    timing = None
    try:
        if workload is None:
            workload = build(order, group.device)
        timing = timed(workload, order, start, end, progress)
    except RankFailed:
        raise  # decided together at a collective: every rank raises it
    except Exception as err:  # noqa: BLE001 - any failure of this rank is the whole run's
        error = _describe(group, err)
        if not state.ready:
            _raise_first_error(group.gather(error))  # raises (ours at least is an error)
        if not state.opened:
            group.barrier()
        if not state.ended:
            group.barrier()
    finally:
        workload = None
        gc.collect()
    mine: Union[str, RankRow]
    if error is None and timing is not None:
        mine = RankRow(group.env.rank, group.device, os.getpid(), group.threads, group.cores,
                       timing, state.start, state.end, state.t_start, state.t_end, state.open)
    else:  # (no timing without an error cannot happen: said rather than sent as None)
        mine = error or _describe(group, RuntimeError("no timing"))
    rows = group.gather(mine)
    _raise_first_error(rows)
    return [r for r in rows if isinstance(r, RankRow)]  # every rank's, once none failed


def follow(group: RankGroup, progress: Optional[Progress] = None) -> None:
    """A rank other than 0: run each point rank 0 sends, until it says Stop. A failed point
    is rank 0's to judge (a measure stops, a sweep records it and goes on)."""
    while True:
        order = group.broadcast()
        if isinstance(order, Stop) or not isinstance(order, PointOrder):
            return
        try:
            run_point(group, order, progress=progress)
        except RankLost:
            raise
        except RankFailed:
            continue


class Leader:
    """Rank 0's side, handed to measure(): it runs each point on every rank and adds the
    devices' rows (and the scaling baseline) to the point's result."""

    def __init__(self, group: RankGroup, devices: Sequence[str], scaling: bool, launcher: str):
        self.group, self.devices, self.scaling = group, list(devices), scaling
        self.launcher = launcher
        self.rows: List[RankRow] = []
        self.gather_s: Optional[float] = None  # the rows' gather, after the window closed
        self.window: Dict[str, float] = {}  # rank 0's monotonic times of the window's edges
        self.baseline_ips: Optional[float] = None
        self.broken = False  # a collective failed: the others are gone, no Stop to send

    def node_sources(self, sources: List[PowerSource]) -> List[PowerSource]:
        """NVML measures GPU 0 by default: on a multi-GPU run, one NVML source per GPU used,
        each CUDA ordinal mapped to NVML's index as CUDA numbers GPUs (CUDA_VISIBLE_DEVICES,
        CUDA_DEVICE_ORDER: NVML numbers them by PCI bus, whatever those say)."""
        gpus = sorted({int(d.split(":", 1)[1]) for d in self.devices if d.startswith("cuda:")})
        if not gpus or not any(isinstance(s, NvmlSource) for s in sources):
            return sources
        return [s for s in sources if not isinstance(s, NvmlSource)] + \
            [NvmlSource(i, gpu=cuda_gpu(f"cuda:{i}", os.environ)) for i in gpus]

    def run_point(self, point: PointSpec, request: RequestSpec, on_open: Callback,
                  on_close: Callback, progress: Optional[Progress] = None) -> TimingResult:
        """One point on all ranks (after a single-device baseline on rank 0 with --scaling,
        while the others wait); the node's aggregate timing."""
        order = PointOrder.of(point, request)
        self.rows, self.baseline_ips = [], None
        workload = None
        if self.scaling:
            workload = build(order, self.group.device)
            self.baseline_ips = timed(workload, order, progress=progress).images_per_s
        self.group.broadcast(order)
        window: Dict[str, float] = {}

        def open_window() -> None:
            if on_open is not None:
                on_open()
            window["t_start"] = time.monotonic()

        def close_window() -> None:
            window["t_end"] = time.monotonic()
            if on_close is not None:
                on_close()

        try:
            self.rows = run_point(self.group, order, open_window, close_window, progress,
                                  workload)
            self.window = window
            self.gather_s = self.group.last_s.get("gather")
        except RankLost:
            self.broken = True
            raise
        return aggregate_timing(self.rows)

    def timed_run(self, point: PointSpec, request: RequestSpec) -> RanksRun:
        return RanksRun(self, point, request)

    def power_basis(self, power: PowerDoc) -> Optional[PowerPoint]:
        """The node's power for img/J: when the window's total is NVML's (GPU 0's source), every
        GPU's own NVML source summed; None otherwise (the board's total covers them all)."""
        total = power.get("total") or {}
        summed = devices_power_sum(self._device_docs(power))
        if summed and summed.get("mean_w") and str(total.get("source", "")).startswith("nvml"):
            return {**summed, "kind": "sum of the devices' NVML sources"}
        return None

    def _device_docs(self, power: Optional[PowerDoc]) -> List[DeviceDoc]:
        window = ((power or {}).get("window") or {}).get("duration_s")
        return device_docs(self.rows, (power or {}).get("channels") or [], window, self.window)

    def annotate(self, doc: ResultDoc) -> None:
        """devices[], the devices' own power summed, scaling, how the ranks ran."""
        power = doc.get("power")
        devices = doc["devices"] = self._device_docs(power)
        if power is not None:
            power["devices_sum"] = devices_power_sum(devices)
        ips = (doc.get("throughput") or {}).get("images_per_s")
        doc["distributed"] = {"world_size": len(self.devices), "backend": self.group.backend,
                              "launcher": self.launcher, "devices": self.devices,
                              "gather_s": self.gather_s}
        if self.baseline_ips is not None and ips:
            doc["scaling"] = scaling_doc(ips, len(self.devices), self.baseline_ips,
                                         self.devices[0])

    def finish(self) -> None:
        """Tell the other ranks the run is over (unless they are gone)."""
        if not self.broken:
            try:
                self.group.broadcast(Stop())
            except RankLost:
                self.broken = True


class RanksRun(TimedRun):
    """One point on every rank as a `TimedRun`: each rank builds, warms up and runs; the
    window opens and closes together; the devices' rows go into the result."""

    def __init__(self, leader: Leader, point: PointSpec, request: RequestSpec):
        self.leader, self.point, self.request = leader, point, request

    def run(self, plan: TimingPlan) -> TimingResult:
        """Every rank times the request's own plan; the hooks here open the one window."""
        return self.leader.run_point(self.point, self.request, plan.on_timed_start,
                                     plan.on_timed_end, plan.progress)

    def power_basis(self, power: PowerDoc) -> Optional[PowerPoint]:
        return self.leader.power_basis(power)

    def annotate(self, doc: ResultDoc) -> None:
        self.leader.annotate(doc)
