"""`jetbench measure` as a library call: pin -> build -> warm up -> (idle) -> window around
the timed iterations -> correlate -> result file + trace, then restore the clocks.

    report = measure(root, MeasureRequest(models=("alexnet",), gpu_freqs=("690MHz",)))

Every configuration (GPU clock x model x precision x batch) is a `Point`; `sweep.py` asks for
many GPU clocks, `measure` usually for one. The clocks are journalled before the first write
and put back in a `finally` (success, failure, Ctrl-C); a kill -9 leaves the journal for
`jetbench restore`. If another jetbench command had already changed the clocks (a journal
existed), only this run's own writes are undone and that journal is left as it was.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import __version__
from .errors import MeasurementInvalid, OutOfMemory, UsageError
from .hw.board import Board
from .hw.fs import Root
from .report import io
from .report.schema import SCHEMA, point_id
from .units import format_hz, parse_freq, resolve_freq

MIN_COVERAGE = 0.9  # below this share of the window covered, img/s/W is refused
_WATCH_EVERY_S = 0.1  # clock polling during the window (a transient cap shows up here)

# progress(done_points, total_points, label, phase, fraction of this point)
Progress = Callable[[int, int, str, str, float], None]


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
    input_shape: Optional[Tuple[int, ...]] = None
    iterations: int = 10
    duration_s: float = 3.0
    warmup_s: float = 1.0
    idle_s: float = 0.0
    keep_clocks: bool = False
    regulator_efficiency: Optional[float] = None
    min_coverage: float = MIN_COVERAGE
    out_dir: Optional[Path] = None
    resume: bool = False  # skip points whose result file already exists


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


@dataclass
class MeasureReport:
    results: List[Dict[str, Any]] = field(default_factory=list)  # in point order
    paths: List[Path] = field(default_factory=list)  # JSON files written (or resumed)
    skipped: List[str] = field(default_factory=list)  # point ids resumed from disk
    simulated: bool = False
    board: Dict[str, Any] = field(default_factory=dict)
    out_dir: Optional[Path] = None
    restored: Optional[str] = None  # what happened to the clocks at the end
    setup_s: Optional[float] = None  # measure start -> first timed iteration
    advice: List[str] = field(default_factory=list)  # "fp16 is 15x slower than fp32 here..."


def validate(request: MeasureRequest) -> None:
    if request.iterations < 1:
        raise UsageError("--iterations must be at least 1")
    if min(request.duration_s, request.warmup_s, request.idle_s) < 0:
        raise UsageError("durations must not be negative")
    if not request.batches or min(request.batches) < 1:
        raise UsageError("batch sizes must be at least 1")
    eff = request.regulator_efficiency
    if eff is not None and not 0 < eff <= 1:
        raise UsageError(f"--regulator-efficiency must be in (0, 1], not {eff}",
                         hint="the whitepaper assumed 0.8 (80%)")


def build_profile(request: MeasureRequest, gpu_freq: Optional[str], root_base: Any) -> Any:
    """The profile to pin for one GPU clock: --profile (if any) with --freq/--cpu-freq/
    --emc-freq on top. None when nothing is to be pinned."""
    from .tuning.profile import FreqRange, Profile, load_profile

    if request.profile:
        profile = load_profile(request.profile, root_base)
    elif gpu_freq or request.cpu_freq or request.emc_freq:
        profile = Profile(name="measure", source="command line")
    else:
        return None
    changes: Dict[str, Any] = {}
    sections = list(profile.sections)
    if gpu_freq:
        spec = parse_freq(gpu_freq)
        changes["gpu_freq"] = FreqRange(spec, spec)
        if profile.gpu_railgate is None:
            changes["gpu_railgate"] = False  # a railgated GPU wakes up slowly: never measure it
        sections.append("gpu")
    if request.cpu_freq:
        spec = parse_freq(request.cpu_freq)
        changes["cpu_freq"] = FreqRange(spec, spec)
        if not profile.cpu_governors:
            changes["cpu_governors"] = ("userspace", "performance")
        sections.append("cpu")
    if request.emc_freq:
        changes["emc_freq"] = parse_freq(request.emc_freq)
        sections.append("emc")
    changes["sections"] = tuple(dict.fromkeys(sections))
    return dataclasses.replace(profile, **changes)


def plan_points(request: MeasureRequest, board: Board) -> List[Point]:
    points = []
    table = board.gpu.available_hz if board.gpu else ()
    for freq in request.gpu_freqs:
        hz = None
        if freq is not None:
            if board.gpu is None:
                raise UsageError("--freq: this board has no GPU clock jetbench can set")
            spec = parse_freq(freq)
            hz = resolve_freq(spec, table) if table else (spec if isinstance(spec, int) else None)
        for model in request.models:
            for precision in request.precisions:
                for batch in request.batches:
                    points.append(Point(freq, hz, model, precision, batch))
    return points


# -- the run --------------------------------------------------------------------------------
def measure(root: Root, request: MeasureRequest, progress: Optional[Progress] = None,
            on_result: Optional[Callable[[Dict[str, Any], Path], None]] = None,
            on_applied: Optional[Callable[[Any, Sequence[Any]], None]] = None) -> MeasureReport:
    """Measure every point of `request`; see the module docstring. Raises MeasurementInvalid
    (exit 3) when a window cannot honestly give img/s/W; the clocks are restored first."""
    from .session import open_board
    from .tuning import journal

    t_start = time.monotonic()
    validate(request)
    report = MeasureReport(out_dir=request.out_dir)
    with open_board(root) as board:
        report.simulated = board.simulated
        report.board = _board_doc(root, board)
        points = plan_points(request, board)
        had_journal = bool(journal.load(root))
        state = _State(root, board, request, report, progress, t_start)
        try:
            state.run(points, on_result, on_applied)
        finally:
            state.stop_sampler()
            report.restored = _put_back(root, request, had_journal, state.steps)
    report.advice = precision_advice(report.results)
    return report


def _free_path(path: Path) -> Path:
    """`stem-2.json`, `stem-3.json`...: the first name whose JSON and CSV are both free."""
    n = 2
    while True:
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not candidate.exists() and not candidate.with_suffix(".csv").exists():
            return candidate
        n += 1


def precision_advice(results: Sequence[Dict[str, Any]]) -> List[str]:
    """The workload layer's "this precision is slower than FP32 here" advice, per clock setting
    (a precision is only compared with FP32 measured at the same clocks)."""
    from types import SimpleNamespace

    from .workload.session import precision_advice as advise

    groups: Dict[str, List[Any]] = {}
    for doc in results:
        if doc.get("status") != "ok":
            continue
        work = doc.get("workload", {})
        key = json.dumps(doc.get("settings", {}).get("applied", {}), sort_keys=True)
        groups.setdefault(key, []).append(SimpleNamespace(
            model=work.get("model"), precision=work.get("precision"), batch=work.get("batch"),
            device=work.get("device"), status="ok",
            images_per_s=doc.get("throughput", {}).get("images_per_s")))
    return [line for rows in groups.values() for line in advise(rows)]


class _State:
    """One measure run's moving parts: the sampler, the current pin, the written steps."""

    def __init__(self, root: Root, board: Board, request: MeasureRequest, report: MeasureReport,
                 progress: Optional[Progress], t_start: float):
        self.root, self.board, self.request, self.report = root, board, request, report
        self.progress, self.t_start = progress, t_start
        self.sampler: Any = None
        self.steps: List[Any] = []  # every Step written, in order (for a partial undo)
        self.pinned_for: Any = object()
        self.applied: Dict[str, Any] = {}
        self.requested: List[Any] = []
        self.clocks: Tuple[Any, ...] = ()
        self.profile_name: Optional[str] = None
        self.notes: Tuple[str, ...] = ()
        self._sampler_started = False

    # -- set-up ---------------------------------------------------------------------------
    def start_sampler(self) -> None:
        from .hw.power.spec import open_sources
        from .power.sampler import Sampler

        sources = open_sources(list(self.request.meters), self.root, rails=self.board.rails,
                               total_rail=self.board.total_rail)
        sources = [s for s in sources if tuple(s.channels())]  # "nothing here" is no source
        self.sampler = Sampler(sources).start() if sources else None

    def stop_sampler(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    def pin(self, gpu_freq: Optional[str], on_applied: Any) -> None:
        from .tuning.apply import apply_profile, read_clocks

        if gpu_freq == self.pinned_for:
            return
        profile = build_profile(self.request, gpu_freq, self.root.base)
        if profile is not None:
            result = apply_profile(self.root, self.board, profile)
            self.steps += list(result.steps)
            self.requested = list(result.targets.requested)
            self.notes = result.targets.notes
            self.profile_name = profile.name
        self.clocks = _settled_clocks(self.root, self.board, read_clocks)
        self.pinned_for = gpu_freq
        if on_applied is not None:
            on_applied(self.requested, self.clocks)

    # -- points ---------------------------------------------------------------------------
    def run(self, points: List[Point], on_result: Any, on_applied: Any) -> None:
        out = self.request.out_dir
        total = len(points)
        for k, point in enumerate(points):
            json_path = out / f"{point.id}.json" if out else None
            if self.request.resume and json_path is not None and json_path.exists():
                try:
                    doc = io.load_result(json_path)
                except UsageError:
                    doc = None  # not ours or damaged: measure it again
                if doc is not None:
                    doc.pop("_path", None)
                    self.report.results.append(doc)
                    self.report.paths.append(json_path)
                    self.report.skipped.append(point.id)
                    continue
            if json_path is not None and json_path.exists():
                json_path = _free_path(json_path)  # never overwrite an earlier measurement
            self.pin(point.gpu_freq, on_applied)
            if not self._sampler_started:
                self._sampler_started = True
                self.start_sampler()
            doc, csv_text = self.one(point, k, total)
            if json_path is not None:
                if csv_text is not None:
                    io.atomic_write_text(json_path.with_suffix(".csv"), csv_text)
                io.write_json(json_path, doc)  # last: its presence marks the point done
                self.report.paths.append(json_path)
            self.report.results.append(doc)
            if on_result is not None:
                on_result(doc, json_path)

    def one(self, point: Point, k: int, total: int) -> Tuple[Dict[str, Any], Optional[str]]:
        from .tuning.apply import read_clocks
        from .workload.precision import PrecisionUnavailable
        from .workload.runner import run_timed
        from .workload.workload import build_workload

        req = self.request
        report = None if self.progress is None else (
            lambda phase, f: self.progress(k, total, point.label, phase, f))
        marks: Dict[str, float] = {"start": time.monotonic()}
        temps_before = _temperatures(self.root, self.board)
        watch = _ClockWatch(self.root, self.board)
        windows: Dict[str, Any] = {}
        workload = None

        def timed_start() -> None:
            if req.idle_s > 0 and self.sampler is not None:
                marks["idle_start"] = time.monotonic()
                with self.sampler.window() as idle:
                    time.sleep(req.idle_s)
                windows["idle"] = idle.result_unchecked
            watch.start()
            if self.report.setup_s is None:
                self.report.setup_s = time.monotonic() - self.t_start
            marks["timed_start"] = time.monotonic()
            if self.sampler is not None:
                windows["run"] = self.sampler.begin()

        def timed_end() -> None:
            if self.sampler is not None:
                windows["result"] = self.sampler.end(windows["run"], check=False)
            marks["timed_end"] = time.monotonic()
            watch.stop()

        try:
            if report:
                report("build", 0.0)
            workload = build_workload(point.model, point.precision, point.batch, req.device,
                                      input_shape=req.input_shape)
            marks["warmup_start"] = time.monotonic()
            timing = run_timed(workload, req.iterations, req.duration_s, req.warmup_s,
                               warmup_iterations=1 if req.warmup_s > 0 else 0,
                               on_timed_start=timed_start, on_timed_end=timed_end,
                               progress=report)
        except (OutOfMemory, PrecisionUnavailable) as err:
            status = "oom" if isinstance(err, OutOfMemory) else "unavailable"
            doc = self.skeleton(point, status)
            doc["message"] = str(err)
            return doc, None
        finally:
            watch.stop()
            del workload
            gc.collect()
        marks["end"] = time.monotonic()
        after = read_clocks(self.root, self.board)
        doc = self.skeleton(point, "ok")
        warnings: List[str] = list(doc["warnings"])
        doc.update(timing.to_dict())
        warnings += doc.pop("warnings", [])
        res = windows.get("result")
        if res is not None:
            self.check_window(point, res)
        doc["power"] = _power_doc(req, res, windows.get("idle"), marks, point.id)
        doc["efficiency"] = _efficiency(timing.images_per_s, res, windows.get("idle"),
                                        req.regulator_efficiency)
        if res is None:
            warnings.append("no power source on this machine: img/s/W not measured "
                            "(give --meter)")
        else:
            warnings += list(res.warnings)
        doc["thermal"] = self.thermal(temps_before, after, watch, warnings)
        doc["warnings"] = warnings + [f"note: {n}" for n in self.notes]
        csv_text = None
        if self.sampler is not None:
            t0 = marks["start"]
            csv_text = io.trace_csv_text(self.sampler.traces(), t0, t0, marks["end"],
                                         self.board.simulated)
        return doc, csv_text

    def check_window(self, point: Point, res: Any) -> None:
        """Refuse img/s/W for a window too short for the sensors, or too poorly covered."""
        reasons = list(res.reasons)
        total = res.total
        if total is not None and total.mean_w is not None \
                and total.coverage < self.request.min_coverage:
            reasons.append(f"{total.total.name} covered only {total.coverage:.0%} of the window "
                           f"(at least {self.request.min_coverage:.0%} is needed)")
        if not reasons:
            return
        slowest = max((s.period_s for s in self.sampler.traces()), default=0.0)
        need = max(4 * slowest * 2, self.request.duration_s * 2, 0.5)
        raise MeasurementInvalid(
            f"{point.label}: img/s/W refused: " + "; ".join(reasons),
            hint=f"measure for longer: --duration {need:.3g}s or more "
                 "(or more --iterations)",
        )

    def thermal(self, before: Dict[str, float], after_clocks: Sequence[Any],
                watch: _ClockWatch, warnings: List[str]) -> Dict[str, Any]:
        after = _temperatures(self.root, self.board)
        trips = _trip_points(self.root, self.board)
        throttled = False
        pinned = {r.domain for r in self.requested if r.resolved_hz}
        lowest = dict(watch.lowest)
        for r in after_clocks:
            key = f"{r.domain}/{r.name}"
            if r.cur_hz is not None:
                lowest[key] = min(lowest.get(key, r.cur_hz), r.cur_hz)
        for r in self.clocks:
            key = f"{r.domain}/{r.name}"
            low = lowest.get(key)
            if r.domain in pinned and r.cur_hz and low is not None and low < r.cur_hz:
                throttled = True
                warnings.append(f"throttled: {key} read {format_hz(low)} during the run, "
                                f"below the applied {format_hz(r.cur_hz)} (a thermal or "
                                "power cap, or another agent moved the clock)")
        crossed = []
        for zone, temp in after.items():
            for trip in trips.get(zone, ()):
                if max(temp, before.get(zone, temp)) >= trip:
                    crossed.append(zone)
                    throttled = True
                    warnings.append(f"throttled: {zone} at {temp:.1f} C reached its trip point "
                                    f"{trip:.1f} C")
                    break
        return {"before_c": before, "after_c": after, "trip_points_c": trips,
                "clocks_lowest_hz": lowest, "throttled": throttled,
                "trips_crossed": crossed}

    def skeleton(self, point: Point, status: str) -> Dict[str, Any]:
        applied = _applied_hz(self.clocks)
        requested: Dict[str, Any] = {}
        resolved: Dict[str, Any] = {}
        for r in self.requested:
            if r.resolved_hz is None:
                requested[f"{r.domain}_{r.setting}"] = r.requested
                continue
            key = f"{r.domain}_hz" if r.setting == "freq" else f"{r.domain}_{r.setting}_hz"
            spec = parse_freq(r.requested)
            requested[key] = spec
            resolved[key] = r.resolved_hz
        return {
            "schema": SCHEMA,
            "status": status,
            "simulated": self.board.simulated,
            "id": point.id,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "jetbench": __version__,
            "board": self.report.board,
            "settings": {
                "profile": self.profile_name,
                "requested": requested,
                "resolved": resolved,
                "applied": applied,
                "clocks": [_clock_doc(c) for c in self.clocks],
                "pinned": bool(self.requested),
            },
            "workload": {"model": point.model, "precision": point.precision,
                         "batch": point.batch, "device": self.request.device,
                         "iterations": None},
            "throughput": None,
            "power": None,
            "efficiency": {"images_per_j": None},
            "thermal": None,
            "warnings": [] if self.requested else
            ["clocks not pinned (no --freq/--profile): the governor may move them"],
        }


class _ClockWatch:
    """Polls the clocks while the window is open; keeps each one's lowest reading."""

    def __init__(self, root: Root, board: Board):
        self.root, self.board = root, board
        self.lowest: Dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="jetbench-clock-watch",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        from .tuning.apply import read_clocks

        while True:
            try:
                for r in read_clocks(self.root, self.board):
                    if r.cur_hz is not None:
                        key = f"{r.domain}/{r.name}"
                        self.lowest[key] = min(self.lowest.get(key, r.cur_hz), r.cur_hz)
            except Exception:  # a flaky sysfs read must not end the measurement
                pass
            if self._stop.wait(_WATCH_EVERY_S):
                return


# -- helpers (pure or nearly) ---------------------------------------------------------------
def _settled_clocks(root: Root, board: Board, read: Any, timeout_s: float = 1.0) -> Tuple:
    """Read the clocks until two reads agree (a simulated kernel, or a slow governor, may take
    a few ms to move the current frequency after the write)."""
    deadline = time.monotonic() + timeout_s
    last = read(root, board)
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = read(root, board)
        if now == last:
            return now
        last = now
    return last


def _applied_hz(clocks: Sequence[Any]) -> Dict[str, Optional[int]]:
    """The first reading of each domain (cpu policy0, the GPU, EMC): what the run saw."""
    out: Dict[str, Optional[int]] = {}
    for c in clocks:
        out.setdefault(f"{c.domain}_hz", c.cur_hz)
    return out


def _clock_doc(c: Any) -> Dict[str, Any]:
    return {"domain": c.domain, "name": c.name, "governor": c.governor, "min_hz": c.min_hz,
            "max_hz": c.max_hz, "cur_hz": c.cur_hz}


def _board_doc(root: Root, board: Board) -> Dict[str, Any]:
    from .hw.nvpmodel import mode_doc

    return {"model": board.model, "family": board.family, "soc": board.soc, "l4t": board.l4t,
            "power_mode": mode_doc(root), "simulated": board.simulated, "root": str(root.base)}


def _temperatures(root: Root, board: Board) -> Dict[str, float]:
    from .hw.thermal import read_temperatures_c

    return read_temperatures_c(root, board)


def _trip_points(root: Root, board: Board) -> Dict[str, List[float]]:
    """Per zone, the trip points at which the kernel caps clocks (passive, hot, critical)."""
    from .hw.thermal import scan

    trips: Dict[str, List[float]] = {}
    for trip in scan(root, board).trips:
        trips.setdefault(trip.zone, []).append(trip.temp_c)
    return trips


def _power_doc(req: MeasureRequest, res: Any, idle: Any, marks: Dict[str, float],
               stem: str) -> Dict[str, Any]:
    t0 = marks["start"]
    phases = {k: round(v - t0, 6) for k, v in marks.items()}
    doc: Dict[str, Any] = {"meters": list(req.meters) or ["auto"], "phases_s": phases,
                           "trace_csv": f"{stem}.csv" if res is not None else None}
    if res is None:
        doc.update(channels=[], total=None, totals=[], window=None, idle=None)
        return doc
    d = res.to_dict()
    for c in d["channels"]:  # gaps relative to the trace's t0, like the CSV
        c["gaps"] = [[a - t0, b - t0] for a, b in c["gaps"]]
    doc.update(channels=d["channels"], total=d["total"], totals=d["totals"],
               faults=d["faults"],
               window={"start_s": res.t_start_s - t0, "duration_s": res.duration_s,
                       "valid": res.valid, "reasons": list(res.reasons)})
    doc["idle"] = None
    if idle is not None:
        doc["idle"] = {"duration_s": idle.duration_s, "valid": idle.valid,
                       "total": idle.total.to_dict() if idle.total else None,
                       "channels": [{"name": c.channel.name, "source": c.channel.source,
                                     "point": c.channel.point, "mean_w": c.mean_w}
                                    for c in idle.channels]}
    return doc


def _ratio(ips: float, watts: Optional[float]) -> Optional[float]:
    return ips / watts if watts else None


def _efficiency(ips: float, res: Any, idle: Any, reg_eff: Optional[float]) -> Dict[str, Any]:
    """images_per_j = img/s / mean W over the window (= images / J), for the total and each
    measured point; above idle and an estimated pre-regulation figure when asked."""
    if res is None or res.total is None or res.total.mean_w is None:
        return {"images_per_j": None, "basis": None, "by_point": []}
    total = res.total
    by_point = [{"name": t.total.name, "source": t.source, "point": t.total.point,
                 "kind": "total", "mean_w": t.mean_w, "images_per_j": _ratio(ips, t.mean_w)}
                for t in res.totals]
    by_point += [{"name": c.channel.name, "source": c.channel.source,
                  "point": c.channel.point, "kind": "channel", "mean_w": c.mean_w,
                  "images_per_j": _ratio(ips, c.mean_w)} for c in res.channels]
    doc: Dict[str, Any] = {
        "images_per_j": _ratio(ips, total.mean_w),
        "basis": f"{total.total.name} ({total.total.point}, source {total.source})",
        "by_point": by_point,
    }
    if idle is not None and idle.total is not None and idle.total.mean_w is not None:
        above = total.mean_w - idle.total.mean_w
        doc["above_idle"] = {
            "idle_w": idle.total.mean_w, "mean_w": above,
            "energy_j": above * res.duration_s,
            "images_per_j": _ratio(ips, above) if above > 0 else None,
        }
    if reg_eff is not None:
        pre = total.mean_w / reg_eff
        doc["pre_regulation_estimate"] = {
            "estimate": True, "regulator_efficiency": reg_eff, "mean_w": pre,
            "images_per_j": _ratio(ips, pre),
            "note": f"an estimate: {total.total.name} divided by an assumed {reg_eff:.0%} "
                    "regulator efficiency (the TX1 whitepaper's assumption), not a measurement",
        }
    return doc


def _put_back(root: Root, request: MeasureRequest, had_journal: bool, steps: List[Any]) -> str:
    from .tuning import journal

    if not had_journal:
        # Decided by the journal, not by `steps`: an interrupt inside apply_profile (journal
        # written, the step half done) leaves no step in our list, but writes to undo.
        if not journal.load(root):
            return "nothing was changed"
        if request.keep_clocks:
            return "kept (--keep-clocks): `jetbench restore` puts them back"
        journal.restore(root)
        return "restored"
    if not steps:
        return "nothing was changed"
    if request.keep_clocks:
        return "kept (--keep-clocks): `jetbench restore` puts them back"
    # Clocks were already changed by an earlier maxperf/apply: undo only this run's writes.
    from .hw.clocks.common import undo_writes

    undo_writes(root, [w for step in steps for w in step.writes], strict=True)
    return "put back to the earlier jetbench state (its journal is kept)"
