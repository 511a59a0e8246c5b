"""`jetbench calibrate --meter SPEC` as a library call (docs/power.md, "Wall energy").

The plan is one measure run of three points (at most three runs: the GPU's lowest clock, a
middle one and its highest, each with a built-in load and an idle baseline at that clock), the
board's total and the external meter recorded side by side. Their traces are put on one grid,
the meter's lag found, the pairs binned, wall = f(board) fitted and chosen by held-out error
(sampling/calibration_fit.py), and the calibration written atomically (nothing is written when
any step fails). `--plan quick` runs shorter windows.
"""

from __future__ import annotations

import datetime
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..documents import CalibrationDoc, CalibrationRun, PowerPoint, ResultDoc
from ..errors import MeasurementInvalid, UsageError
from ..hw.board import detect
from ..hw.clocks.domains import read_clocks
from ..hw.fs import Root
from ..hw.meters.accuracy import meter_accuracy
from ..hw.meters.registry import parse_meter_spec
from ..report import io
from ..sampling import calibration_fit as F
from ..units import MAX, MIN, FreqSpec
from .calibration import SCHEMA, board_identity, install, load
from .measure import Progress, measure
from .request import MeasureRequest

# plan -> (window per run, idle baseline per run, warm-up), seconds: ~10 min and ~2 min in all
PLANS: Dict[str, Tuple[float, float, float]] = {"full": (150.0, 40.0, 10.0),
                                                "quick": (25.0, 10.0, 3.0)}
MIN_METER_SHARE = 0.9  # of each run's window the meter must have covered (measure's own)


@dataclass(frozen=True)
class CalibrateRequest:
    meter: str
    plan: str = "full"
    label: str = "unlabelled"
    out: Optional[Path] = None  # also write the calibration here (it is installed either way)
    window_s: Optional[float] = None  # override the plan's window (demos, tests)
    model: Optional[str] = None  # the built-in load (default: sim:alexnet on a simulated board)
    batch: int = 16
    wait_s: Optional[float] = 0.0


@dataclass
class CalibrateReport:
    calibration: CalibrationDoc
    path: Path  # where it was installed
    out: Optional[Path] = None
    notes: List[str] = field(default_factory=list)
    pairs: Tuple[np.ndarray, np.ndarray] = (np.empty(0), np.empty(0))  # binned board, meter W


def check_request(req: CalibrateRequest) -> None:
    spec = parse_meter_spec(req.meter)
    if not spec.is_serial:
        raise UsageError(f"calibrate needs an external meter (wt310:, scpi:, stream:, um25c:), "
                         f"not {req.meter!r}", hint="e.g. --meter wt310:/dev/ttyUSB0")
    if req.plan not in PLANS:
        raise UsageError(f"--plan is one of {', '.join(PLANS)}, not {req.plan!r}")
    if req.window_s is not None and req.window_s <= 0:
        raise UsageError("--window must be positive")
    if not req.label.strip():
        raise UsageError("--label must name the carrier and supply")
    if req.out is not None:
        io.check_out_dir(req.out.parent if req.out.parent != Path("") else Path("."), "--out")


def _gpu_points(root: Root) -> Tuple[Optional[FreqSpec], ...]:
    """Lowest, middle and highest GPU clock (of the power mode); one point when unknown."""
    board = detect(root)
    gpu = next((c for c in read_clocks(root, board) if c.domain == "gpu"), None)
    if gpu is None or not gpu.available_hz:
        return (None,)
    table = sorted(f for f in gpu.available_hz if gpu.max_hz is None or f <= gpu.max_hz)
    return (MIN, table[len(table) // 2], MAX)


def _measure_request(root: Root, req: CalibrateRequest, out: Path) -> MeasureRequest:
    window, idle, warmup = PLANS[req.plan]
    if req.window_s is not None:
        scale = req.window_s / window
        window, idle, warmup = req.window_s, idle * scale, max(warmup * scale, 0.2)
    model = req.model or ("sim:alexnet" if detect(root).simulated else "alexnet")
    return MeasureRequest(models=(model,), batches=(req.batch,), gpu_freqs=_gpu_points(root),
                          meters=("auto", req.meter), duration_s=window, warmup_s=warmup,
                          idle_s=idle, iterations=1, out_dir=out, wait_s=req.wait_s)


def _series(doc: ResultDoc, csv: Path) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                  str]:
    """(t, board total, t, meter) from one point's trace, and the board total's name."""
    totals = (doc.get("power") or {}).get("totals") or []
    board = next((t for t in totals if t.get("scope") != "wall"), None)
    meter = next((t for t in totals if t.get("scope") == "wall"), None)
    if board is None:
        raise MeasurementInvalid("calibrate: the board's own total was not measured",
                                 hint="a board with power sensors (see `jetbench info`)")
    if meter is None:
        raise MeasurementInvalid("calibrate: the meter gave no total")
    trace = io.read_trace_csv(csv)
    t = np.array(trace["t_s"], dtype=float)

    def column(total: PowerPoint) -> np.ndarray:
        cols = [trace["channels"].get(f"{total['source']}/{name}") for name in total["channels"]]
        if any(c is None for c in cols):
            raise MeasurementInvalid(f"calibrate: the trace lacks {total['name']}'s channels")
        arr = np.array([[np.nan if v is None else v for v in c] for c in cols if c is not None],
                       dtype=float)
        return arr.sum(axis=0)

    answered = float(meter.get("coverage") or 0.0)
    if answered < MIN_METER_SHARE:
        raise MeasurementInvalid(
            f"calibrate: the meter covered {answered:.0%} of a run's window (it stalled or "
            "disconnected): no calibration written",
            hint="check the meter's cable and port, then run calibrate again")
    return t, column(board), t, column(meter), str(board["name"])


def _pairs(docs: Sequence[ResultDoc], paths: Sequence[Path]
           ) -> Tuple[float, np.ndarray, np.ndarray, str, List[CalibrationRun]]:
    grids, name = [], ""
    runs: List[CalibrationRun] = []
    for doc, path in zip(docs, paths):
        t_a, a, t_b, b, name = _series(doc, path.with_suffix(".csv"))
        grid, ga, gb = F.common_grid(t_a, a, t_b, b)
        if len(grid) == 0:
            raise MeasurementInvalid("calibrate: the board and the meter share no readings")
        grids.append((ga, gb))
        gpu = ((doc.get("settings") or {}).get("applied") or {}).get("gpu_hz")
        runs.append({"gpu_hz": float(gpu or 0), "board_w_min": float(np.nanmin(ga)),
                     "board_w_max": float(np.nanmax(ga)), "seconds": float(grid[-1] - grid[0])})
    lag = F.find_lag_s(grids)
    xs, ys = [], []
    for ga, gb in grids:
        sa, sb = F.shifted(ga, gb, lag)
        x, y = F.binned(sa, sb)
        xs.append(x)
        ys.append(y)
    return lag, np.concatenate(xs), np.concatenate(ys), name, runs


def calibrate(root: Root, req: CalibrateRequest,
              progress: Optional[Progress] = None) -> CalibrateReport:
    """Run the plan, fit, and install the calibration (and write --out): see the docstring."""
    check_request(req)
    tmp = Path(tempfile.mkdtemp(prefix="jetbench-calibrate-"))
    try:
        report = measure(root, _measure_request(root, req, tmp / "runs"), progress,
                         command="calibrate")
        ok = [(d, p) for d, p in zip(report.results, report.paths) if d.get("status") == "ok"]
        if not ok:
            raise MeasurementInvalid("calibrate: no run of the plan finished")
        lag, x, y, total, runs = _pairs([d for d, _ in ok], [p for _, p in ok])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fit = F.fit(x, y)
    board = detect(root)
    spec = parse_meter_spec(req.meter)
    meter_pct = _meter_pct(spec.kind, spec.options.get("accuracy"), float(np.mean(y)))
    now = time.time()
    cal: CalibrationDoc = {
        "schema": SCHEMA, "simulated": board.simulated,
        "created": datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(
            timespec="seconds"),
        "created_unix": now, "label": req.label, "board": board_identity(root, board),
        "meter": req.meter.split("?")[0], "total": total,
        "range_w": [float(x.min()), float(x.max())], "lag_s": lag,
        "model": {"kind": fit.kind, "coefficients": list(fit.coefficients),
                  "compared_heldout_rms_pct": fit.compared,
                  "formula": "wall_w = c0 + c1 * board_w (+ c2 * board_w^2)"},
        "residual": {"heldout_rms_pct": fit.heldout_rms_pct,
                     "heldout_p95_pct": fit.heldout_p95_pct, "meter_pct": meter_pct,
                     "bins": fit.bins, "bin_s": F.BIN_S},
        "runs": runs,
    }
    if req.out is not None:  # the travelling copy first: a failure leaves the board as it was
        io.atomic_write_text(req.out, json.dumps(cal, indent=1) + "\n")
    path = install(root, board, cal)
    return CalibrateReport(cal, path, req.out, report.notes, (x, y))


def _meter_pct(protocol: str, given: Optional[str], mean_w: float) -> Optional[float]:
    """The meter's own 95% limit at the plan's mean power, percent (None: unknown)."""
    acc = meter_accuracy(protocol, given)
    worst = acc.worst_case_w(mean_w) if acc.known else None
    return 100.0 * worst / mean_w if worst is not None and mean_w else None


def import_calibration(root: Root, path: Path) -> CalibrationDoc:
    """Install a calibration made on another board of the same module and carrier."""
    cal = load(path)
    install(root, detect(root), cal)
    return cal
