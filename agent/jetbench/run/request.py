"""What `measure` (and `sweep`, `tune`) is asked to do: the request, its checks, and the points
it expands to (GPU clock x model x precision x batch)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Tuple

from ..errors import UsageError
from ..hw.board import Board
from ..report.schema import point_id
from ..units import format_hz, parse_freq, resolve_freq
from ..workload.model_arg import InputShape

MIN_COVERAGE = 0.9  # below this share of the window covered, img/s/W is refused


@dataclass(frozen=True)
class MeasureRequest:
    models: Tuple[str, ...] = ("alexnet",)
    precisions: Tuple[str, ...] = ("fp32",)
    batches: Tuple[int, ...] = (1,)
    gpu_freqs: Tuple[Optional[str], ...] = (None,)  # None: leave the GPU clock as it is
    cpu_freq: Optional[str] = None
    emc_freq: Optional[str] = None
    profile: Optional[str] = None  # a name or TOML file; --freq/--cpu-freq/--emc-freq override it
    meters: Tuple[str, ...] = ()  # () = auto
    device: str = "auto"
    input_shape: Optional[InputShape] = None  # named inputs for ONNX models / engines
    provider: Optional[str] = None  # ONNX Runtime's execution provider (None: the best present)
    command: Optional[Any] = None  # --cmd: a workload.command.CommandSpec instead of a network
    iterations: int = 10
    duration_s: float = 3.0
    warmup_s: float = 1.0
    idle_s: float = 0.0  # idle baseline with the clocks as pinned (MLPerf's "active idle")
    idle_unpinned: bool = False  # also idle with the board's own governors, before pinning
    keep_clocks: bool = False
    regulator_efficiency: Optional[float] = None
    min_coverage: float = MIN_COVERAGE
    out_dir: Optional[Path] = None
    resume: bool = False  # skip points whose result file already exists
    beyond_power_mode: bool = False  # --beyond-power-mode: max is the hardware's, not the mode's
    wait_s: Optional[float] = 0.0  # for the board lock / the daemon's lease (None: for ever)
    keep_going: bool = False  # a point that fails is recorded (status "failed"), not fatal
    workload_python: Optional[str] = None  # run the workload in a child under this interpreter


@dataclass(frozen=True)
class Point:
    gpu_freq: Optional[str]
    gpu_hz: Optional[int]  # resolved against the board's table (None: not pinned)
    model: str
    precision: str
    batch: int

    @property
    def id(self) -> str:
        return point_id(self.model, self.precision, self.batch, self.gpu_hz)

    @property
    def label(self) -> str:
        text = f"{self.model} {self.precision} b{self.batch}"
        return text + (f" @ {format_hz(self.gpu_hz)}" if self.gpu_hz else "")


def validate(request: MeasureRequest) -> None:
    if request.iterations < 1:
        raise UsageError("--iterations must be at least 1")
    if min(request.duration_s, request.warmup_s, request.idle_s) < 0:
        raise UsageError("durations must not be negative")
    if not request.batches or min(request.batches) < 1:
        raise UsageError("batch sizes must be at least 1")
    if request.workload_python and (request.command is not None or request.provider):
        raise UsageError("--workload-python runs a built-in network with PyTorch: not with "
                         "--cmd or --provider")
    eff = request.regulator_efficiency
    if eff is not None and not 0 < eff <= 1:
        raise UsageError(f"--regulator-efficiency must be in (0, 1], not {eff}",
                         hint="the whitepaper assumed 0.8 (80%)")


def plan_points(request: MeasureRequest, board: Board) -> List[Point]:
    from ..workload.sim_run import check_simulated

    check_simulated(request.models if request.command is None else (), board)
    points = []
    table = board.gpu.available_hz if board.gpu else (
        board.nvml_gpus[0].graphics_hz if board.nvml_gpus else ())
    for freq in request.gpu_freqs:
        hz = None
        if freq is not None:
            if board.gpu is None and not board.nvml_gpus:
                raise UsageError("--freq: this board has no GPU clock jetbench can set")
            spec = parse_freq(freq)
            hz = resolve_freq(spec, table) if table else (spec if isinstance(spec, int) else None)
        for model in request.models:
            for precision in request.precisions:
                for batch in request.batches:
                    points.append(Point(freq, hz, model, precision, batch))
    return points
