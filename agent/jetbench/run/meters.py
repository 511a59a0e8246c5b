"""The power side of a measure run: the sources `--meter` names, the sampler process reading
them, and what a window's figures are worth (their uncertainty, and whether img/s/W stands)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Tuple

from ..documents import EfficiencyUncertainty, FigureUncertainty
from ..hw.board import Board
from ..hw.cuda_map import cuda_gpu
from ..hw.fs import Root
from ..hw.meters.accuracy import channel_accuracies
from ..hw.meters.base import EmptySource
from ..hw.meters.registry import open_sources
from ..sampling.rates import faster_than_sensor
from ..sampling.sampler_process import ProcessSampler
from ..sampling.uncertainty import efficiency_uncertainty, throughput_sem_pct, window_uncertainty
from ..workload.model_arg import PYTORCH, model_kind
from ..workload.pytorch import resolve_device
from .request import MeasureRequest

if TYPE_CHECKING:
    from ..distributed.messages import Leader
    from ..hw.meters.base import PowerSource
    from ..sampling.window import WindowResult
    from ..workload.timing.timed import Timing


class Meters:
    """Started before the first point, stopped (always) at the end of the run."""

    def __init__(self, root: Root, board: Board, request: MeasureRequest,
                 ranks: Optional[Leader] = None):
        self.root, self.board, self.request, self.ranks = root, board, request, ranks
        self.sampler: Optional[ProcessSampler] = None
        self.sources: List[PowerSource] = []
        self.notes: Tuple[str, ...] = ()  # why --meter auto chose its source

    def start(self) -> None:
        chosen: List[str] = []
        sources = open_sources(list(self.request.meters), self.root, rails=self.board.rails,
                               total_rail=self.board.total_rail,
                               gpu=cuda_gpu(self.workload_device(), os.environ), notes=chosen)
        self.notes = tuple(chosen)
        # "nothing here" is no source; a source that learns its channels at open() (jtop) stays
        sources = [s for s in sources if not isinstance(s, EmptySource)]
        if self.ranks is not None:
            sources = self.ranks.node_sources(sources)
        self.sources = sources
        # in a process of its own: a workload holding the GIL neither starves it nor is slowed
        self.sampler = ProcessSampler(sources).start() if sources else None
        if self.sampler is not None:  # said once per run, in every result's notes
            self.notes += tuple(faster_than_sensor(self.sampler.traces()))

    def workload_device(self) -> str:
        """The device the workload runs on, as far as the meters need it: `--device auto` for
        PyTorch networks run here is what PyTorch resolves it to (a PC with a CPU torch and an
        NVIDIA GPU measures the CPU's workload, not the idle GPU through NVML); a command,
        an ONNX model, an engine or a child's network keeps `auto` (the GPU when there is one)."""
        req = self.request
        if req.device != "auto" or req.command is not None or req.workload_python:
            return req.device
        if not req.models or any(model_kind(m) != PYTORCH for m in req.models):
            return req.device
        return resolve_device(req.device)

    def stop(self) -> None:
        sampler, self.sampler = self.sampler, None
        if sampler is not None:
            sampler.stop()

    def running(self) -> ProcessSampler:
        """The sampler of a window that was measured (a window is one of its)."""
        if self.sampler is None:
            raise RuntimeError("no sampler runs: a window without one has no figures")
        return self.sampler

    def uncertainty(self, res: WindowResult) -> Dict[str, FigureUncertainty]:
        """Per channel and total: the power figure's uncertainty (sampling/uncertainty.py)."""
        accuracies = channel_accuracies(self.root, self.sources, self.board.family)
        return window_uncertainty(res, self.running().traces(), accuracies)

    def efficiency_uncertainty(self, res: WindowResult, unc: Mapping[str, FigureUncertainty],
                               timing: Timing, per_iteration: bool = True
                               ) -> EfficiencyUncertainty:
        total = res.total
        power: FigureUncertainty = (unc.get(f"total:{total.source}/{total.total.name}") or {}) \
            if total is not None else {}
        external = any(getattr(s, "protocol", None) for s in self.sources)
        return efficiency_uncertainty(power.get("mean_w_uncertainty_pct"),
                                      throughput_sem_pct(timing.latencies_ms),
                                      power.get("basis", "unknown"), external, per_iteration)

    def check_window(self, res: WindowResult, label: str = "img/s/W",
                     per_iteration: bool = True) -> List[str]:
        """Why the efficiency figure (`label`: img/s/W, tokens/J...) is refused for this window
        (too short for the sensors, or too poorly covered); empty when it stands. Each reason
        says what would fix it."""
        reasons = list(res.reasons)
        total = res.total
        if total is not None and total.mean_w is not None \
                and total.coverage < self.request.min_coverage:
            reasons.append(f"{total.total.name} covered only {total.coverage:.0%} of the window "
                           f"(at least {self.request.min_coverage:.0%} is needed)")
        if not reasons:
            return []
        slowest = max((s.period_s for s in self.running().traces()), default=0.0)
        need = max(4 * slowest * 2, self.request.duration_s * 2, 0.5)
        more = ", or more --iterations" if per_iteration else ""
        return [f"{label} refused: {r} (measure for longer: --duration {need:.3g}s or "
                f"more{more})" for r in reasons]
