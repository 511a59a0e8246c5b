"""A point's result document, built in one place: its skeleton (board, settings, workload),
the power figures and their uncertainty, img/J for the total and each measured point, the
thermal verdict. The schema is report/schema.py's; run/measure.py's run state fills it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import __version__
from ..documents import (
    BoardDoc,
    ClockDoc,
    EfficiencyDoc,
    FigureUncertainty,
    IdleDoc,
    PowerDoc,
    PowerPoint,
    ResultDoc,
    ThermalDoc,
    UncertaintyParts,
)
from ..hw.board import Board
from ..hw.fs import Root
from ..hw.meters.base import scope_of
from ..hw.thermal import assess, cooling_states, read_temperatures_c, scan
from ..report import schema
from ..report.schema import SCHEMA
from ..workload.runtimes import provider_for
from ..workload.timing.stats import LOCK_ADVICE
from .request import MeasureRequest, Point
from .timing import precision_advice as advise
from .validity import Mismatch, applied_summary

if TYPE_CHECKING:
    from ..hw.thermal import ThermalLayout
    from ..sampling.window import WindowResult
    from .pinning import Pin

# per figure ("total:SOURCE/NAME" or a channel's key): its uncertainty
Uncertainties = Mapping[str, FigureUncertainty]


def skeleton(point: Point, status: str, request: MeasureRequest, board: Board,
             board_doc: BoardDoc, pin: Pin, framework: str) -> ResultDoc:
    """The result of `point` before its figures: what was asked, what the knobs hold."""
    applied = applied_summary(pin.applied_clocks)
    provider = provider_for(point.runtime, point.model, request.provider)  # ONNX Runtime's only
    requested: Dict[str, object] = {}
    resolved: Dict[str, int] = {}
    why: Dict[str, str] = {}
    for r in pin.requested:
        if r.resolved_hz is None:
            requested[f"{r.domain}_{r.setting}"] = r.requested
            continue
        key = f"{r.domain}_hz" if r.setting == "freq" else f"{r.domain}_{r.setting}_hz"
        requested[key] = r.requested  # exactly as asked: 624750000, "max"
        resolved[key] = r.resolved_hz  # the clock that runs for it
        if r.why:
            why[key] = r.why
    return {
        "schema": SCHEMA,
        "status": status,
        "simulated": board.simulated,
        "id": point.id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "jetbench": __version__,
        "board": with_caps_lifted(board_doc, pin.caps_lifted),
        "settings": {
            "profile": pin.profile_name,
            "requested": requested,
            "resolved": resolved,
            "resolved_why": why,  # why a resolved clock is not the request
            "applied": applied,  # the knobs read back, not cur_freq (see run/validity.py)
            "clocks": [_without_table(c) for c in pin.applied_clocks],
            "pinned": bool(pin.requested),
        },
        "workload": {"model": point.model, "precision": point.precision,
                     "batch": point.batch, "device": request.device,
                     "iterations": None,
                     "framework": framework, "runtime": point.runtime,
                     **({"provider": provider} if provider else {})},
        "throughput": None,
        "power": None,
        "efficiency": {"images_per_j": None},
        "thermal": None,
        "clocks": {"observed": []},
        "validity": {"valid": True, "reasons": []},
        "warnings": [] if pin.requested else
        ["clocks not pinned (no --freq/--profile): the governor may move them"],
    }


def _without_table(clock: ClockDoc) -> ClockDoc:
    """A clock as a result's settings carry it: without the table it runs from."""
    kept = clock.copy()
    kept.pop("table_hz", None)
    return kept


def thermal(root: Root, board: Board, before: Dict[str, float], mismatches: Sequence[Mismatch],
            warnings: List[str]) -> ThermalDoc:
    """Throttling only with evidence: a zone at or above a passive/hot/critical trip
    (before or after the run), or a thermal cooling device active after it. A clock below
    its pin without evidence is reported as exactly that."""
    after = temperatures(root, board)
    layout = scan(root, board)
    trips = _trip_points(layout)
    hottest = {z: max(t, before.get(z, t)) for z, t in after.items()}
    evidence = list(assess(hottest, layout.trips, cooling_states(root, layout)))
    crossed = sorted({t.zone for t in layout.trips
                      if hottest.get(t.zone, float("-inf")) >= t.temp_c})
    below = sorted({m.domain for m in mismatches if m.direction == "below"})
    for reason in evidence:
        warnings.append(f"throttled: {reason}")
    if below and not evidence:
        for domain in below:
            warnings.append(f"{domain} below its pin, cause unknown (no zone at a trip "
                            "point, no cooling device active)")
    return {"before_c": before, "after_c": after, "trip_points_c": trips,
            "throttled": bool(evidence), "evidence": evidence,
            "below_pin": [f"{d} below its pin, cause unknown" for d in below]
            if not evidence else [f"{d} below its pin" for d in below],
            "trips_crossed": crossed}


def with_caps_lifted(board: BoardDoc, lifted: Tuple[str, ...]) -> BoardDoc:
    """The board document, its power mode marked when this point ran past the mode's caps
    (--beyond-power-mode): two results in "the same" mode are not comparable otherwise."""
    mode = board.get("power_mode")
    if not lifted or not mode:
        return board
    marked = board.copy()
    marked["power_mode"] = {**mode, "caps_lifted": True, "lifted": list(lifted)}
    return marked


def temperatures(root: Root, board: Board) -> Dict[str, float]:
    return read_temperatures_c(root, board)


def _trip_points(layout: ThermalLayout) -> Dict[str, List[float]]:
    """Per zone, the trip points at which the kernel caps clocks (passive, hot, critical)."""
    trips: Dict[str, List[float]] = {}
    for trip in layout.trips:
        trips.setdefault(trip.zone, []).append(trip.temp_c)
    return trips


def power_doc(req: MeasureRequest, res: Optional[WindowResult], idle: Optional[WindowResult],
              marks: Dict[str, float], stem: str, unc: Optional[Uncertainties] = None,
              unc_idle: Optional[Uncertainties] = None) -> PowerDoc:
    t0 = marks["start"]
    phases = {k: round(v - t0, 6) for k, v in marks.items()}
    doc: PowerDoc = {"meters": list(req.meters) or ["auto"], "phases_s": phases,
                     "trace_csv": f"{stem}.csv" if res is not None else None}
    if res is None:
        doc.update({"channels": [], "total": None, "totals": [], "window": None, "idle": None})
        return doc
    unc = unc or {}
    channels = [c.to_dict() for c in res.channels]
    for c in channels:  # gaps relative to the trace's t0, like the CSV
        c["gaps"] = [[a - t0, b - t0] for a, b in c.get("gaps", [])]
        c.update(_unc_fields(unc.get(f"{c.get('source')}/{c.get('name')}")))
        c.update(scoped(c))
    totals = [t.to_dict() for t in res.totals]
    for t in totals:
        t.update(_unc_fields(unc.get(f"total:{t.get('source')}/{t.get('name')}")))
        t.update(scoped(t))
    doc.update({"channels": channels, "totals": totals, "total": totals[0] if totals else None,
                "faults": {k: dict(v) for k, v in res.faults.items()},
                "window": {"start_s": res.t_start_s - t0, "duration_s": res.duration_s,
                           "valid": res.valid, "reasons": list(res.reasons)}})
    doc["idle"] = idle_doc(idle, "as pinned (active idle)", unc_idle or {})
    return doc


def idle_doc(idle: Optional[WindowResult], clocks: str, unc: Uncertainties) -> Optional[IdleDoc]:
    """An idle baseline, saying at which clocks it was taken, with its uncertainty."""
    if idle is None:
        return None
    total = idle.total.to_dict() if idle.total else None
    if total is not None:
        total.update(_unc_fields(unc.get(f"total:{total.get('source')}/{total.get('name')}")))
    channels: List[PowerPoint] = [{"name": c.channel.name, "source": c.channel.source,
                                   "point": c.channel.point, "mean_w": c.mean_w}
                                  for c in idle.channels]
    doc: IdleDoc = {"clocks": clocks, "duration_s": idle.duration_s, "valid": idle.valid,
                    "total": total, "channels": channels}
    return doc


def scoped(figure: PowerPoint) -> PowerPoint:
    """What a measured figure covers (module, board, wall) and that it was measured."""
    return {"scope": scope_of(figure.get("point", "")), "basis": "measured"}


def _unc_fields(u: Optional[FigureUncertainty]) -> PowerPoint:
    """A figure's uncertainty as its document carries it (None = unknown, never 0)."""
    u = u or {}
    parts: UncertaintyParts = {"basis": u.get("basis", "unknown")}
    for key in ("sensor_w", "integration_w", "uncovered_w"):
        if key in u:
            parts[key] = u[key]
    return {"mean_w_uncertainty_w": u.get("mean_w_uncertainty_w"),
            "mean_w_uncertainty_pct": u.get("mean_w_uncertainty_pct"), "uncertainty": parts}


def refuse_efficiency(eff: EfficiencyDoc, reasons: List[str]) -> None:
    """A refused window gives no img/s/W at all (the total, each point, above idle, the
    pre-regulation estimate); its watts stay, marked by the result's validity."""
    eff["images_per_j"] = None
    eff["refused"] = reasons
    for item in [*eff.get("by_point", []), eff.get("above_idle"),
                 eff.get("pre_regulation_estimate")]:
        if item:
            item["images_per_j"] = None


def _ratio(ips: float, watts: Optional[float]) -> Optional[float]:
    return ips / watts if watts else None


def efficiency(ips: float, res: Optional[WindowResult], idle: Optional[WindowResult],
               reg_eff: Optional[float], unc: Optional[Uncertainties] = None,
               unc_idle: Optional[Uncertainties] = None,
               basis: Optional[PowerPoint] = None) -> EfficiencyDoc:
    """images_per_j = img/s / mean W over the window (= images / J), for the total and each
    measured point; above idle and an estimated pre-regulation figure when asked. `basis`: the
    power the workload's own kind says is the whole run's, when the window's first total is not
    (several GPUs, each with its NVML source: TimedRun.power_basis)."""
    total = res.total if res is not None else None
    total_w = total.mean_w if total is not None else None
    if res is None or total is None or total_w is None:
        return {"images_per_j": None, "basis": None, "by_point": []}
    unc = unc or {}

    def pct(key: str) -> Optional[float]:
        return (unc.get(key) or {}).get("mean_w_uncertainty_pct")

    by_point: List[PowerPoint] = [{"name": t.total.name, "source": t.source, "point": t.total.point,
                 "kind": "total", "mean_w": t.mean_w, "images_per_j": _ratio(ips, t.mean_w),
                 "mean_w_uncertainty_pct": pct(f"total:{t.source}/{t.total.name}"),
                 "scope": scope_of(t.total.point), "basis": "measured"}
                for t in res.totals]
    by_point += [{"name": c.channel.name, "source": c.channel.source,
                  "point": c.channel.point, "kind": "channel", "mean_w": c.mean_w,
                  "images_per_j": _ratio(ips, c.mean_w),
                  "mean_w_uncertainty_pct": pct(c.channel.key),
                  "scope": scope_of(c.channel.point), "basis": "measured"} for c in res.channels]
    doc: EfficiencyDoc = {
        "images_per_j": _ratio(ips, total_w),
        "basis": f"{total.total.name} ({total.total.point}, source {total.source})",
        "by_point": by_point,
    }
    basis_w = (basis or {}).get("mean_w")
    if basis is not None and basis_w:
        doc["images_per_j"] = _ratio(ips, basis_w)
        doc["basis"] = f"{basis.get('name')} ({basis.get('point')}, {basis.get('kind')})"
    if idle is not None and idle.total is not None and idle.total.mean_w is not None:
        above = total_w - idle.total.mean_w
        key = f"total:{total.source}/{total.total.name}"
        busy_unc = (unc.get(key) or {}).get("mean_w_uncertainty_w")
        idle_unc = ((unc_idle or {}).get(
            f"total:{idle.total.source}/{idle.total.total.name}") or {}).get(
            "mean_w_uncertainty_w")
        above_unc = None if busy_unc is None or idle_unc is None else busy_unc + idle_unc
        doc["above_idle"] = {
            "mean_w_uncertainty_w": above_unc,
            "mean_w_uncertainty_pct": 100.0 * above_unc / abs(above)
            if above_unc is not None and above else None,
            "idle_w": idle.total.mean_w, "idle_clocks": "as pinned (active idle)",
            "mean_w": above,
            "energy_j": above * res.duration_s,
            "images_per_j": _ratio(ips, above) if above > 0 else None,
        }
    if reg_eff is not None:
        pre = total_w / reg_eff
        doc["pre_regulation_estimate"] = {
            "estimate": True, "regulator_efficiency": reg_eff, "mean_w": pre,
            "images_per_j": _ratio(ips, pre),
            "note": f"an estimate: {total.total.name} divided by an assumed {reg_eff:.0%} "
                    "regulator efficiency (the TX1 whitepaper's assumption), not a measurement",
        }
    return doc


def precision_advice(results: Sequence[ResultDoc]) -> List[str]:
    """The workload layer's "this precision is slower than FP32 here" advice, per clock setting
    (a precision is only compared with FP32 measured at the same clocks)."""
    groups: Dict[str, List[_Speed]] = {}
    for doc in results:
        if doc.get("status") != "ok":
            continue
        work = doc.get("workload", {})
        key = json.dumps(doc.get("settings", {}).get("applied", {}), sort_keys=True)
        batch = work.get("batch")
        groups.setdefault(key, []).append(_Speed(
            str(work.get("model")), str(work.get("precision")),
            batch if isinstance(batch, int) else 0, str(work.get("device")),
            str(work.get("runtime", "torch")), "ok", schema.images_per_s(doc),
            (doc.get("throughput") or {}).get("cv")))
    return [line for rows in groups.values() for line in advise(rows)]


@dataclass(frozen=True)
class _Speed:
    """A measured result's figures as the precision advice reads them (run/timing.SpeedRow)."""
    model: str
    precision: str
    batch: int
    device: str
    runtime: str
    status: str
    images_per_s: Optional[float]
    cv: Optional[float]


# the CV warning's advice by the board's state (issue 61): maxperf's advice only where the
# clocks are free; on a simulated board the latency follows this machine's load
_HELD = "the clocks are held: stop other work on the machine"
_SIMULATED = ("the host is busy: a simulated board's latency follows this machine's load "
              "(stop other work on it)")
# the rate's standard error under which the spread changes no figure this result gives (the
# img/J's bound is 1%, MLPerf Power's: half of it for the rate)
NOISE_MATTERS_PCT = 0.5


def noise_advice(warnings: Sequence[str], simulated: bool, clocks_held: bool,
                 rate_sem_pct: Optional[float]) -> List[str]:
    """The timing's warnings with the latency-spread one said for this board's state: none
    where the spread cannot change a figure (the rate's standard error under
    NOISE_MATTERS_PCT), "the host is busy" on a simulated board, no "lock the clocks" where
    they are held (this run pinned them, or an earlier maxperf/apply did)."""
    out = []
    for w in warnings:
        if not w.endswith(LOCK_ADVICE):
            out.append(w)
        elif rate_sem_pct is None or rate_sem_pct >= NOISE_MATTERS_PCT:
            advice = _SIMULATED if simulated else _HELD if clocks_held else LOCK_ADVICE
            out.append(w[: -len(LOCK_ADVICE)] + advice)
    return out
