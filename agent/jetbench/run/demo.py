"""`jetbench demo`: the README's first command. A simulated TX1 (L4T R24) in a temporary
directory, AlexNet FP32 and FP16 at batch 1 with the whitepaper's clocks (GPU 690 MHz ->
691.2 MHz table entry, CPU and EMC at max), its rails recorded, the table printed with
SIMULATED in its title and the power traces plotted.

Short on purpose (a couple of minutes at most on a 2-core machine with no GPU): 3 timed
iterations and at least 2 s per configuration, 1 s of warm-up, 0.5 s of idle baseline.
The network is `sim:alexnet` by default: its speed comes from the simulated board's latency
model at the clocks the board runs (sim/workload_model.py, calibrated on the TX1 whitepaper),
its power from the simulated power model; `model="alexnet"` runs the real network on this
machine's CPU instead (then img/s does not follow the simulated clocks). A demonstration of the
method, never a claim about a TX1.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from ..hw.fs import Root
from ..report.plots import plot_trace
from ..sim.create import create_board
from .measure import MeasureReport, Progress, measure
from .request import MeasureRequest

BOARD = "tx1-r24"
PROFILE = "tx1-690mhz"
MODEL = "sim:alexnet"  # speed follows the simulated clocks (workload/sim_run.py); no torch


@dataclass(frozen=True)
class DemoResult:
    report: MeasureReport
    out_dir: Path
    plots: List[Path]


def demo_request(out_dir: Path, models: tuple = (MODEL,),
                 precisions: tuple = ("fp32", "fp16"), duration_s: float = 2.0,
                 iterations: int = 3, warmup_s: float = 1.0, idle_s: float = 0.5,
                 input_shape: Optional[tuple] = None) -> MeasureRequest:
    return MeasureRequest(models=models, precisions=precisions, batches=(1,),
                          profile=PROFILE, iterations=iterations, duration_s=duration_s,
                          warmup_s=warmup_s, idle_s=idle_s, regulator_efficiency=0.8,
                          out_dir=out_dir, device="cpu", input_shape=input_shape)


def run_demo(out_dir: Optional[Path] = None, progress: Optional[Progress] = None,
             request: Optional[MeasureRequest] = None, model: str = MODEL) -> DemoResult:
    """Create the simulated board, measure, plot; the board tree is removed afterwards, the
    results (JSON, CSV, PNG) are kept in `out_dir` (default: a new temporary directory)."""
    work = Path(tempfile.mkdtemp(prefix="jetbench-demo-"))
    out = Path(out_dir) if out_dir is not None else work / "results"
    board_dir = work / "tx1-board"
    try:
        create_board(BOARD, board_dir)
        request = request or demo_request(out, models=(model,))
        report = measure(Root(board_dir), request, progress=progress)
    finally:
        # With --out the whole work directory goes; else only the board (results stay).
        shutil.rmtree(work if out_dir is not None else board_dir, ignore_errors=True)
    plots = []
    for doc, path in zip(report.results, report.paths):
        csv = path.with_suffix(".csv")
        if doc.get("status") == "ok" and csv.is_file():
            plots.append(plot_trace(doc, csv, path.with_suffix(".trace.png")))
    return DemoResult(report, out, plots)
