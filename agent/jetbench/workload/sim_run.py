"""`--model sim:NAME`: a built-in network whose speed follows the simulated board's clocks.

Each batch reads the clocks the board runs now (GPU, EMC, CPU: hw/clocks' readers, the same
`read_clocks` the measurement's clock sampler uses), takes the batch's time from the latency
model of its family (sim/workload_model.py) and SLEEPS until that batch's deadline: nothing
burns the CPU, and a clock changed mid-run changes the speed from the next batch on.

Paced by deadline, not by duration: batch n ends at t0 + the sum of the modelled times of
batches 1..n, so a sleep that overshoots (a busy host wakes the process late) is taken back by
the next batch instead of adding up. Over a window the rate is the model's as long as the
process runs at all; each batch's latency still shows the jitter the host adds. A batch that
ends more than one batch time behind its deadline is counted (`Pace`), and the run says how far
behind the host fell: a slow host is said, never passed off as a slow board.

The share of the batch the GPU is busy goes into the simulated GPU's `load` file
(sim/gpu_load.py), which the simulated power model reads, so watts follow the load and the
clocks together.

It is an in-process `Workload` timed by `runner.run_timed` like a PyTorch network (warm-up,
window, iterations and validity unchanged), framework `sim`; no torch is imported. Refused on
a board that is not simulated.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from typing import Dict, Optional, Sequence, Tuple

from ..documents import ResultDoc
from ..errors import UsageError
from ..hw.board import Board
from ..hw.clocks.domains import read_clocks
from ..hw.fs import Root
from ..sim import gpu_load
from ..sim.workload_model import (
    BatchTime,
    Clocks,
    FamilyConstants,
    NetworkCost,
    batch_time,
    family_constants,
)
from .base import RunOptions, Workload
from .macs import ModelCost
from .model_arg import SIM, SIM_PREFIX
from .precision import PrecisionUnavailable
from .registry import ModelSpec, get_spec
from .timing.plan import TimingPlan
from .timing.runner import TimingResult, run_timed
from .timing.timed import TimedRun

CLOCK_READ_EVERY_S = 0.005  # clocks re-read at most this often (every batch of 5 ms or more)
DEVICE = "sim"
# Governors that hold the CPU where they were told, whatever the load.
FIXED_CPU_GOVERNORS = ("userspace", "performance", "powersave")


def network_of(model: str) -> ModelSpec:
    """`sim:alexnet` -> the built-in network's spec (an unknown name: its usage error)."""
    return get_spec(model.strip()[len(SIM_PREFIX):], prefix=SIM_PREFIX)


def check_simulated(models: Sequence[str], board: Board) -> None:
    """`sim:` networks only on a simulated board: said before anything is pinned."""
    sims = [m for m in models if m.strip().lower().startswith(SIM_PREFIX)]
    if sims and not board.simulated:
        raise UsageError(f"{sims[0]}: a simulated network runs on a simulated board only, and "
                         "this board is not simulated",
                         hint="measure the real network (drop `sim:`), or create a simulated "
                         "board with `jetbench sim create` and give it as --root")
    for model in sims:
        network_of(model)
        if family_constants(board.family) is None:
            raise UsageError(f"{model}: no latency model for this board family "
                             f"({board.family or 'unknown'})",
                             hint="sim/workload_model.py lists the families it models")


@dataclass(frozen=True)
class _Shape:
    shape: Tuple[int, ...]  # what Workload.describe reads of an input


@dataclass
class Pace:
    """How well the host kept the modelled schedule since `restart`: batches that ended more
    than one batch time after their deadline, the worst lag, and the lag of the last batch
    when it too was more than a batch late (0 once caught up)."""

    batches: int = 0
    late_batches: int = 0
    worst_behind_s: float = 0.0
    end_behind_s: float = 0.0

    def warning(self) -> Optional[str]:
        """One sentence when the host fell behind by more than a batch, else None."""
        if not self.late_batches:
            return None
        end = (f"still {self.end_behind_s * 1e3:.0f} ms behind at the end: the rate is below "
               "the model's" if self.end_behind_s else "caught up by the end")
        return (f"the host fell behind the simulated network's schedule: {self.late_batches} "
                f"of {self.batches} batches over a batch late (worst "
                f"{self.worst_behind_s * 1e3:.0f} ms), {end}")


def running_clocks(root: Root, board: Board) -> Clocks:
    """The running clocks, read from the tree: GPU and EMC current rates, the fastest online
    CPU policy's current frequency. A CPU under a load-following governor (schedutil,
    ondemand, interactive...) counts at its policy's max: a kernel raises it under this
    load, and the simulated kernel does not model that ramp. A clock that reads nothing
    counts at its table's top."""
    gpu = emc = cpu = None
    top: Dict[str, float] = {}
    for r in read_clocks(root, board):
        if r.online is False:  # a cluster the power mode took offline runs nothing
            continue
        if r.available_hz:
            top[r.domain] = max(top.get(r.domain, 0.0), float(max(r.available_hz)))
        hz = r.cur_hz
        if r.domain == "cpu" and r.governor not in FIXED_CPU_GOVERNORS and r.max_hz:
            hz = r.max_hz
        if hz is None:
            continue
        if r.domain == "gpu":
            gpu = float(hz)
        elif r.domain == "emc":
            emc = float(hz)
        elif r.domain == "cpu":
            cpu = max(cpu or 0.0, float(hz))
    return Clocks(gpu or top.get("gpu", 1e9), emc or top.get("emc", 1.6e9),
                  cpu or top.get("cpu", 1.9e9))


class SimNetwork:
    """The step: read the clocks (at most every CLOCK_READ_EVERY_S), sleep until the batch's
    deadline on the modelled schedule."""

    def __init__(self, root: Root, board: Board, constants: FamilyConstants, cost: NetworkCost,
                 precision: str, batch: int):
        self.root, self.board = root, board
        self.constants, self.cost, self.precision, self.batch = constants, cost, precision, batch
        self._load_file = gpu_load.load_path(root.base, board.gpu.device if board.gpu else None)
        self._read_at = -1.0
        self._time: Optional[BatchTime] = None
        self._load_shown: Optional[float] = None
        self._deadline: Optional[float] = None  # perf_counter s the running batch should end
        self.pace = Pace()
        self.clocks: Optional[Clocks] = None

    def restart(self) -> None:
        """A new schedule from the next batch on (a phase starts after a pause: no debt)."""
        self._deadline = None
        self.pace = Pace()

    def clocks_now(self) -> Clocks:
        """The running clocks (running_clocks)."""
        return running_clocks(self.root, self.board)

    def batch_time(self) -> BatchTime:
        now = time.monotonic()
        if self._time is None or now - self._read_at >= CLOCK_READ_EVERY_S:
            self._read_at = now
            self.clocks = self.clocks_now()
            self._time = batch_time(self.constants, self.cost, self.precision, self.batch,
                                    self.clocks)
        return self._time

    def step(self) -> None:
        start = time.perf_counter()
        batch = self.batch_time()
        busy = round(batch.gpu_busy, 3)
        if busy != self._load_shown:  # the GPU's load file shows it busy while batches run
            gpu_load.write_load(self._load_file, busy)
            self._load_shown = busy
        total = batch.total_s
        # the clock read counts in the batch; the schedule starts at the first batch's start
        deadline = (start if self._deadline is None else self._deadline) + total
        self._deadline = deadline
        left = deadline - time.perf_counter()
        if left > 0:
            time.sleep(left)
        self._account(time.perf_counter() - deadline, total)

    def _account(self, behind_s: float, batch_s: float) -> None:
        pace = self.pace
        pace.batches += 1
        late = behind_s > batch_s
        pace.end_behind_s = behind_s if late else 0.0
        if late:
            pace.late_batches += 1
            pace.worst_behind_s = max(pace.worst_behind_s, behind_s)

    def show_load(self, busy: float) -> None:
        """The GPU's load file shows `busy` (0..1), for a caller that paces batches itself
        (workload/sim_app.py)."""
        gpu_load.write_load(self._load_file, busy)
        self._load_shown = busy

    def idle(self) -> None:
        gpu_load.write_load(self._load_file, 0.0)
        self._load_shown = 0.0
        self._deadline = None  # no batch ran meanwhile: the next one starts a new schedule


def build_sim_workload(root: Root, board: Board, model: str, precision: str,
                       batch: int) -> Tuple[Workload, SimNetwork]:
    """The `Workload` run_timed times, and its network (for the idle GPU at the end)."""
    check_simulated([model], board)
    if batch < 1:
        raise UsageError(f"batch must be at least 1, not {batch}")
    spec = network_of(model)
    constants = family_constants(board.family)
    assert constants is not None  # check_simulated said so otherwise
    if precision not in constants.flop_per_clock:
        raise PrecisionUnavailable(
            f"{precision} is not modelled on a simulated {board.family}",
            hint=f"it runs {', '.join(constants.flop_per_clock)}")
    cost = NetworkCost(spec.macs_per_image, spec.params or 0, spec.activation_elems_per_image)
    network = SimNetwork(root, board, constants, cost, precision, batch)
    details = {"simulated": True, "network": spec.name,
               "latency_model": "sim/workload_model.py", "board_family": board.family}
    workload = Workload(
        model=model.strip(), precision=precision, batch=batch, device=DEVICE,
        input_mode="constant", options=RunOptions(), module=None,
        input=_Shape((batch, *spec.input_shape)),
        cost=ModelCost(spec.params or 0, spec.macs_per_image, spec.activation_elems_per_image,
                       0),
        footprint_bytes=0, step=network.step, sync=lambda: None,
        context=contextlib.nullcontext,
        notes=("simulated workload: latency from the board's model (sim/workload_model.py), "
               "no claim about hardware",),
        framework=SIM, details=details, frame=lambda label: contextlib.nullcontext(),
        host_timed=True)
    return workload, network


class SimRun(TimedRun):
    """measure's TimedRun for `sim:NAME` (workload/timing/timed.py's protocol)."""

    framework = SIM

    def __init__(self, root: Root, board: Board, model: str, precision: str, batch: int):
        self._args = (root, board, model, precision, batch)
        self._workload: Optional[Workload] = None
        self._network: Optional[SimNetwork] = None

    def prepare(self) -> None:
        self._workload, self._network = build_sim_workload(*self._args)

    def run(self, plan: TimingPlan) -> TimingResult:
        assert self._workload is not None and self._network is not None
        network = self._network

        def timed_start() -> None:
            network.idle()  # no batch runs in measure's --idle baseline, taken here
            if plan.on_timed_start is not None:
                plan.on_timed_start()
            network.restart()  # the window's schedule starts at its first batch

        try:
            result = run_timed(self._workload, replace(plan, on_timed_start=timed_start))
        finally:
            network.idle()
        late = network.pace.warning()  # the timed window's pace (restarted at its start)
        return result if late is None else replace(result, warnings=result.warnings + (late,))

    def annotate(self, doc: ResultDoc) -> None:
        doc["simulated"] = True  # the workload too, whatever else the result says

    def close(self) -> None:
        # a simulated network holds no device memory: no collection to free it (TimedRun's
        # gc.collect took 60 ms a point, a sixth of a tune trial's overhead)
        if self._network is not None:
            self._network.idle()
        self._workload = self._network = None
