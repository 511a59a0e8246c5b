"""`jetbench measure` as a library call: pin -> build -> warm up -> (idle) -> window around
the timed iterations -> correlate -> result file + trace, then restore the clocks.

    report = measure(root, MeasureRequest(models=("alexnet",), gpu_freqs=("690MHz",)))

Every configuration (GPU clock x model x precision x batch) is a `Point`; `run/sweep.py` asks for
many GPU clocks, `measure` usually for one. The clocks are journalled before the first write
and put back in a `finally` (success, failure, Ctrl-C); a kill -9 leaves the journal for
`jetbench restore`. If another jetbench command had already changed the clocks (a journal
existed), only this run's own writes are undone and that journal is left as it was.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import __version__
from ..errors import OutOfMemory, RankLost, UsageError, set_interrupt_notes
from ..hw.board import Board
from ..hw.fs import Root
from ..interrupts import Hold, checkpoint, pending
from ..report import io
from ..report.schema import SCHEMA, point_id
from ..units import format_hz, parse_freq, resolve_freq
from ..workload.model_arg import InputShape, model_kind
from .validity import ClockSampler, applied_summary, judge

MIN_COVERAGE = 0.9  # below this share of the window covered, img/s/W is refused
IDLE_UNPINNED_DEFAULT_S = 2.0  # --idle-unpinned without --idle

# progress(done_points, total_points, label, phase, fraction of this point)
Progress = Callable[[int, int, str, str, float], None]

# Test-only: called with the name of each phase boundary a point reaches ("pinned",
# "window-opening", "window-open", "window-closed", "figures"); tests/interrupt_at.py sends a
# signal from here to land an interrupt exactly there. Always None in production.
PHASE_HOOK: Optional[Callable[[str], None]] = None


def _phase(name: str) -> None:
    """A boundary of a point: an interrupt received (and swallowed) before it is raised here."""
    if PHASE_HOOK is not None:
        PHASE_HOOK(name)
    checkpoint()


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
    fallback: Optional[str] = None  # --out failed mid-run: where the results went instead

    @property
    def invalid(self) -> List[Dict[str, Any]]:
        """The results marked `validity.valid = false` (written all the same)."""
        return [d for d in self.results if not (d.get("validity") or {}).get("valid", True)]


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


def build_profile(request: MeasureRequest, gpu_freq: Optional[str], root_base: Any) -> Any:
    """The profile to pin for one GPU clock: --profile (if any) with --freq/--cpu-freq/
    --emc-freq on top. None when nothing is to be pinned."""
    from ..tuning.profile import FreqRange, Profile, load_profile

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
    changes["beyond_power_mode"] = request.beyond_power_mode
    return dataclasses.replace(profile, **changes)


def plan_points(request: MeasureRequest, board: Board) -> List[Point]:
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


# -- the run --------------------------------------------------------------------------------
def measure(root: Root, request: MeasureRequest, progress: Optional[Progress] = None,
            on_result: Optional[Callable[[Dict[str, Any], Path], None]] = None,
            on_applied: Optional[Callable[[Any, Sequence[Any]], None]] = None,
            command: str = "measure", ranks: Any = None) -> MeasureReport:
    """Measure every point of `request`; see the module docstring. Every result is written,
    valid or not: one whose observed clocks contradict the applied ones, or whose window is
    refused, carries `validity.valid = false` and its reasons (`MeasureReport.invalid`; the CLI
    exits 3 after printing everything). The board is ours for the whole run: its lock, or a
    lease from the daemon holding it. `ranks`: rank 0's distributed.protocol.Leader when the
    point runs on several devices at once (measure --devices, torchrun)."""
    from ..open_board import open_board
    from ..ownership import journal
    from ..ownership.owner import borrow_board

    t_start = time.monotonic()
    validate(request)
    if request.out_dir is not None:
        io.check_out_dir(request.out_dir)  # before any work: a bad --out costs no run
    report = MeasureReport(out_dir=request.out_dir)
    with borrow_board(root, command, request.wait_s) as guard, open_board(root) as board:
        report.simulated = board.simulated
        report.board = _board_doc(root, board)
        points = plan_points(request, board)
        had_journal = bool(journal.load(root))
        state = _State(root, board, request, report, progress, t_start, ranks)
        state.guard = guard  # every batch of writes: refused once a lease is revoked
        put_back_tried = False
        try:
            state.run(points, on_result, on_applied)
            checkpoint()  # an interrupt that was swallowed on its way still wins (exit 130)
        except BaseException as err:
            # An error after an interrupt (a --cmd the same SIGTERM ended) is that interrupt.
            if not isinstance(err, KeyboardInterrupt) \
                    and not (isinstance(err, Exception) and pending()):
                raise
            # What the user needs after Ctrl-C: the clocks' fate and the finished results
            # (the CLI prints these notes under "interrupted").
            set_interrupt_notes(["clocks: maybe still pinned: `jetbench restore` puts them back"])
            put_back_tried = True
            with Hold(deliver=False):  # a second Ctrl-C cannot cut the put-back short
                state.stop_sampler()
                with guard.writing():  # nothing written once the daemon took the board back
                    report.restored = _put_back(root, request, had_journal, state.steps)
                set_interrupt_notes([f"clocks: {report.restored}", _finished_note(report)])
            if isinstance(err, KeyboardInterrupt):
                raise
            raise KeyboardInterrupt from err
        finally:
            if not put_back_tried:
                with Hold():  # an interrupt now waits for the put-back, then is raised (130)
                    state.stop_sampler()
                    with guard.writing():
                        report.restored = _put_back(root, request, had_journal, state.steps)
                    if pending():
                        set_interrupt_notes([f"clocks: {report.restored}",
                                             _finished_note(report)])
    report.advice = precision_advice(report.results)
    return report


def _finished_note(report: MeasureReport) -> str:
    done = [p for p in report.paths if p is not None]
    if not done:
        return "results: none finished"
    return f"results: {len(done)} finished, in {report.out_dir}"


def precision_advice(results: Sequence[Dict[str, Any]]) -> List[str]:
    """The workload layer's "this precision is slower than FP32 here" advice, per clock setting
    (a precision is only compared with FP32 measured at the same clocks)."""
    from types import SimpleNamespace

    from .timing import precision_advice as advise

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
                 progress: Optional[Progress], t_start: float, ranks: Any = None):
        self.root, self.board, self.request, self.report = root, board, request, report
        self.ranks = ranks  # multi-device: runs each point on every rank (distributed/)
        self.guard: Any = None  # tuning/lease.Guard: around each batch of writes
        self.progress, self.t_start = progress, t_start
        self.sampler: Any = None
        self.sources: List[Any] = []
        self.steps: List[Any] = []  # every Step written, in order (for a partial undo)
        self.pinned_for: Any = object()
        self.applied_clocks: List[Dict[str, Any]] = []  # knobs read back (hw/knobs.py)
        self.requested: List[Any] = []
        self.clocks: Tuple[Any, ...] = ()
        self.profile_name: Optional[str] = None
        self.notes: Tuple[str, ...] = ()
        self.caps_lifted: Tuple[str, ...] = ()  # --beyond-power-mode: the caps this pin passed
        self.meter_notes: Tuple[str, ...] = ()  # why --meter auto chose its source
        self._sampler_started = False
        self.idle_unpinned: Any = None  # WindowResult of the idle before the first pin

    # -- set-up ---------------------------------------------------------------------------
    def start_sampler(self) -> None:
        from ..hw.meters.base import EmptySource
        from ..hw.meters.registry import open_sources
        from ..hw.nvml import cuda_gpu
        from ..sampling.sampler_process import ProcessSampler

        chosen: List[str] = []
        sources = open_sources(list(self.request.meters), self.root, rails=self.board.rails,
                               total_rail=self.board.total_rail,
                               gpu=cuda_gpu(self.request.device, os.environ), notes=chosen)
        self.meter_notes = tuple(chosen)
        # "nothing here" is no source; a source that learns its channels at open() (jtop) stays
        sources = [s for s in sources if not isinstance(s, EmptySource)]
        if self.ranks is not None:
            sources = self.ranks.node_sources(sources)
        self.sources = sources
        # in a process of its own: a workload holding the GIL neither starves it nor is slowed
        self.sampler = ProcessSampler(sources).start() if sources else None

    def stop_sampler(self) -> None:
        if self.sampler is not None:
            self.sampler, sampler = None, self.sampler
            sampler.stop()

    def pin(self, gpu_freq: Optional[str], on_applied: Any) -> None:
        from ..tuning.apply import apply_profile, read_clocks

        if gpu_freq == self.pinned_for:
            return
        profile = build_profile(self.request, gpu_freq, self.root.base)
        if profile is not None:
            with self.guard.writing():
                result = apply_profile(self.root, self.board, profile)
            self.steps += list(result.steps)
            self.requested = list(result.targets.requested)
            self.notes = result.targets.notes
            self.caps_lifted = result.targets.caps_lifted
            self.profile_name = profile.name
        self.clocks = _settled_clocks(self.root, self.board, read_clocks)
        self.applied_clocks = _applied_clocks(self.root, self.board)
        self.pinned_for = gpu_freq
        if on_applied is not None:
            on_applied(self.requested, self.clocks)

    def measure_idle_unpinned(self) -> None:
        """--idle-unpinned: idle power with the board's own governors (before the first pin);
        a locked idle can read far higher (7.5 W vs 4.7 W published for an Orin NX)."""
        req = self.request
        if not req.idle_unpinned or self.sampler is None or self.steps:
            return
        with self.sampler.window() as idle:
            time.sleep(req.idle_s or IDLE_UNPINNED_DEFAULT_S)
        self.idle_unpinned = idle.result_unchecked

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
                if doc is not None and doc.get("status") == "failed":
                    doc = None  # a point that failed is tried again
                if doc is not None:
                    doc.pop("_path", None)
                    self.report.results.append(doc)
                    self.report.paths.append(json_path)
                    self.report.skipped.append(point.id)
                    continue
            if not self._sampler_started:
                self._sampler_started = True
                self.start_sampler()
                self.measure_idle_unpinned()
            self.pin(point.gpu_freq, on_applied)
            _phase("pinned")
            # Once the workload has returned its timings the point is finished: an interrupt
            # from then on is held until its result is written whole (README, "Interrupts").
            hold = Hold()
            try:
                doc, csv_text = self.one(point, k, total, hold)
                checkpoint()
                hold.start()
                cause = pending()
                if cause:
                    doc["interrupted"] = cause  # after its window: the figures are complete
                if json_path is not None:
                    # A free name claimed atomically: never over an earlier measurement, nor
                    # over one another run into the same --out is writing now.
                    json_path = self.write(json_path, doc, csv_text)
                    out = json_path.parent
                    self.report.paths.append(json_path)
                self.report.results.append(doc)
            except BaseException:
                hold.end(deliver=False)
                raise
            hold.end()
            if on_result is not None:
                on_result(doc, json_path)

    def write(self, json_path: Path, doc: Dict[str, Any], csv_text: Optional[str]) -> Path:
        """Claim a free name; if --out fails now (removed, full, unmounted), keep the result
        and this run's later ones in a fallback directory the report names."""
        try:
            return io.claim_result(json_path, doc, csv_text)
        except OSError as err:
            fallback = io.fallback_dir()
            self.report.fallback = (f"could not write {json_path} ({err.strerror or err}); "
                                    f"results from here on are in {fallback}")
            self.report.out_dir = fallback
            return io.claim_result(fallback / json_path.name, doc, csv_text)

    def one(self, point: Point, k: int, total: int,
            hold: Optional[Hold] = None) -> Tuple[Dict[str, Any], Optional[str]]:
        from ..tuning.apply import read_clocks
        from ..workload.child import ChildWorkload, run_in_child
        from ..workload.precision import PrecisionUnavailable
        from ..workload.runner import run_timed
        from ..workload.workload import RunOptions, build_workload

        req = self.request
        report = None if self.progress is None else (
            lambda phase, f: self.progress(k, total, point.label, phase, f))
        marks: Dict[str, float] = {"start": time.monotonic()}
        temps_before = _temperatures(self.root, self.board)
        watch = ClockSampler(lambda: read_clocks(self.root, self.board))
        windows: Dict[str, Any] = {}
        workload = None

        def timed_start() -> None:
            _phase("window-opening")
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
            _phase("window-open")

        def timed_end() -> None:
            if self.sampler is not None:
                windows["result"] = self.sampler.end(windows["run"], check=False)
            marks["timed_end"] = time.monotonic()
            watch.stop()
            _phase("window-closed")

        try:
            if report:
                report("build", 0.0)
            if req.command is not None:  # --cmd: the window is the command's run
                from ..workload.command import command_window, run_point

                timing = run_point(req.command, timed_start, timed_end, req.duration_s, report)
                windows["result"] = command_window(timing, self.sampler, windows.get("result"))
            elif self.ranks is not None:  # every rank builds, warms up, runs; windows together
                marks["warmup_start"] = time.monotonic()
                timing = self.ranks.run_point(point, req, timed_start, timed_end, report)
            else:
                if req.workload_python:  # the network in a child under that interpreter
                    work = ChildWorkload(req.workload_python, point.model, point.precision,
                                         point.batch, req.device, input_shape=req.input_shape)
                    marks["warmup_start"] = time.monotonic()
                    timed_run: Any = functools.partial(run_in_child, work)
                else:
                    workload = build_workload(point.model, point.precision, point.batch,
                                              req.device, input_shape=req.input_shape,
                                              options=RunOptions(provider=req.provider))
                    marks["warmup_start"] = time.monotonic()
                    timed_run = functools.partial(run_timed, workload)
                timing = timed_run(req.iterations, req.duration_s, req.warmup_s,
                                   warmup_iterations=1 if req.warmup_s > 0 else 0,
                                   on_timed_start=timed_start, on_timed_end=timed_end,
                                   progress=report)
        except (OutOfMemory, PrecisionUnavailable) as err:
            status = "oom" if isinstance(err, OutOfMemory) else "unavailable"
            doc = self.skeleton(point, status)
            doc["message"] = str(err)
            return doc, None
        except Exception as err:  # noqa: BLE001 - a sweep records any point's failure
            if not req.keep_going or isinstance(err, RankLost):  # no ranks left to go on with
                raise
            doc = self.skeleton(point, "failed")
            doc["message"] = f"{type(err).__name__}: {err}"
            return doc, None
        finally:
            watch.stop()
            del workload
            gc.collect()
        if hold is not None:
            checkpoint()  # one that landed in the window (and was swallowed): no result
            hold.start()
            _phase("figures")
        marks["end"] = time.monotonic()
        doc = self.skeleton(point, "ok")
        warnings: List[str] = list(doc["warnings"])
        doc.update(timing.to_dict())
        warnings += doc.pop("warnings", [])
        res = windows.get("result")
        refused = self.check_window(point, res) if res is not None else []
        unc = self.uncertainty(res) if res is not None else {}
        idle = windows.get("idle")
        unc_idle = self.uncertainty(idle) if idle is not None else {}
        doc["power"] = _power_doc(req, res, idle, marks, point.id, unc, unc_idle)
        if res is not None:
            before_pin = self.idle_unpinned
            doc["power"]["idle_unpinned"] = _idle_doc(
                before_pin, "board governors (unpinned, before the pin)",
                self.uncertainty(before_pin) if before_pin is not None else {})
        doc["efficiency"] = _efficiency(timing.images_per_s, res, idle,
                                        req.regulator_efficiency, unc, unc_idle)
        if res is not None and res.total is not None:
            doc["efficiency"]["uncertainty"] = self.efficiency_uncertainty(res, unc, timing)
        if refused:
            _refuse_efficiency(doc["efficiency"], refused)
        if self.ranks is not None:
            self.ranks.annotate(doc)
        if res is None:
            warnings.append("no power source on this machine: img/s/W not measured "
                            "(give --meter)")
        else:
            warnings += list(res.warnings)
        observed = watch.observed()
        mismatches = judge(self.applied_clocks, observed, self.board.soc)
        doc["clocks"] = {"observed": observed}
        doc["thermal"] = self.thermal(temps_before, mismatches, warnings)
        doc["validity"] = {"valid": not (mismatches or refused),
                           "reasons": [m.reason for m in mismatches] + refused}
        doc["warnings"] = warnings + [f"note: {n}" for n in self.notes + self.meter_notes]
        if req.command is not None:
            from ..workload.command import finish_doc

            finish_doc(doc, timing, req.duration_s)
        csv_text = None
        if self.sampler is not None:
            t0 = marks["start"]
            csv_text = io.trace_csv_text(self.sampler.traces(), t0, t0, marks["end"],
                                         self.board.simulated)
        return doc, csv_text

    def uncertainty(self, res: Any) -> Dict[str, Dict[str, Any]]:
        """Per channel and total: the power figure's uncertainty (sampling/uncertainty.py)."""
        from ..hw.meters.accuracy import channel_accuracies
        from ..sampling.uncertainty import window_uncertainty

        accuracies = channel_accuracies(self.root, self.sources, self.board.family)
        return window_uncertainty(res, self.sampler.traces(), accuracies)

    def efficiency_uncertainty(self, res: Any, unc: Dict[str, Any], timing: Any) -> Dict[str, Any]:
        from ..sampling.uncertainty import efficiency_uncertainty, throughput_sem_pct

        total = res.total
        power = unc.get(f"total:{total.source}/{total.total.name}") or {}
        external = any(getattr(s, "protocol", None) for s in self.sources)
        return efficiency_uncertainty(power.get("mean_w_uncertainty_pct"),
                                      throughput_sem_pct(timing.latencies_ms),
                                      power.get("basis", "unknown"), res.duration_s, external)

    def check_window(self, point: Point, res: Any) -> List[str]:
        """Why img/s/W is refused for this window (too short for the sensors, or too poorly
        covered); empty when it stands. Each reason says what would fix it."""
        reasons = list(res.reasons)
        total = res.total
        if total is not None and total.mean_w is not None \
                and total.coverage < self.request.min_coverage:
            reasons.append(f"{total.total.name} covered only {total.coverage:.0%} of the window "
                           f"(at least {self.request.min_coverage:.0%} is needed)")
        if not reasons:
            return []
        slowest = max((s.period_s for s in self.sampler.traces()), default=0.0)
        need = max(4 * slowest * 2, self.request.duration_s * 2, 0.5)
        return [f"img/s/W refused: {r} (measure for longer: --duration {need:.3g}s or more, "
                "or more --iterations)" for r in reasons]

    def thermal(self, before: Dict[str, float], mismatches: Sequence[Any],
                warnings: List[str]) -> Dict[str, Any]:
        """Throttling only with evidence: a zone at or above a passive/hot/critical trip
        (before or after the run), or a thermal cooling device active after it. A clock below
        its pin without evidence is reported as exactly that."""
        from ..hw.thermal import assess, cooling_states, scan

        after = _temperatures(self.root, self.board)
        layout = scan(self.root, self.board)
        trips = _trip_points(layout)
        hottest = {z: max(t, before.get(z, t)) for z, t in after.items()}
        evidence = list(assess(hottest, layout.trips, cooling_states(self.root, layout)))
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

    def skeleton(self, point: Point, status: str) -> Dict[str, Any]:
        applied = applied_summary(self.applied_clocks)
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
            "board": _with_caps_lifted(self.report.board, self.caps_lifted),
            "settings": {
                "profile": self.profile_name,
                "requested": requested,
                "resolved": resolved,
                "applied": applied,  # the knobs read back, not cur_freq (see run/validity.py)
                "clocks": [{k: v for k, v in c.items() if k != "table_hz"}
                           for c in self.applied_clocks],
                "pinned": bool(self.requested),
            },
            "workload": {"model": point.model, "precision": point.precision,
                         "batch": point.batch, "device": self.request.device,
                         "iterations": None,
                         "framework": "command" if self.request.command is not None
                         else model_kind(point.model),
                         **({"provider": self.request.provider}
                            if self.request.provider else {})},
            "throughput": None,
            "power": None,
            "efficiency": {"images_per_j": None},
            "thermal": None,
            "clocks": {"observed": []},
            "validity": {"valid": True, "reasons": []},
            "warnings": [] if self.requested else
            ["clocks not pinned (no --freq/--profile): the governor may move them"],
        }


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


def _applied_clocks(root: Root, board: Board) -> List[Dict[str, Any]]:
    from ..hw.knobs import read_applied

    return read_applied(root, board)


def _board_doc(root: Root, board: Board) -> Dict[str, Any]:
    from ..hw.nvpmodel import mode_doc

    return {"model": board.model, "family": board.family, "soc": board.soc, "l4t": board.l4t,
            "power_mode": mode_doc(root), "simulated": board.simulated, "root": str(root.base)}


def _with_caps_lifted(board: Dict[str, Any], lifted: Tuple[str, ...]) -> Dict[str, Any]:
    """The board document, its power mode marked when this point ran past the mode's caps
    (--beyond-power-mode): two results in "the same" mode are not comparable otherwise."""
    if not lifted or not board.get("power_mode"):
        return board
    return {**board, "power_mode": {**board["power_mode"], "caps_lifted": True,
                                    "lifted": list(lifted)}}


def _temperatures(root: Root, board: Board) -> Dict[str, float]:
    from ..hw.thermal import read_temperatures_c

    return read_temperatures_c(root, board)


def _trip_points(layout: Any) -> Dict[str, List[float]]:
    """Per zone, the trip points at which the kernel caps clocks (passive, hot, critical)."""
    trips: Dict[str, List[float]] = {}
    for trip in layout.trips:
        trips.setdefault(trip.zone, []).append(trip.temp_c)
    return trips


def _power_doc(req: MeasureRequest, res: Any, idle: Any, marks: Dict[str, float],
               stem: str, unc: Optional[Dict[str, Dict[str, Any]]] = None,
               unc_idle: Optional[Dict[str, Dict[str, Any]]] = None) -> Dict[str, Any]:
    t0 = marks["start"]
    phases = {k: round(v - t0, 6) for k, v in marks.items()}
    doc: Dict[str, Any] = {"meters": list(req.meters) or ["auto"], "phases_s": phases,
                           "trace_csv": f"{stem}.csv" if res is not None else None}
    if res is None:
        doc.update(channels=[], total=None, totals=[], window=None, idle=None)
        return doc
    d = res.to_dict()
    unc = unc or {}
    for c in d["channels"]:  # gaps relative to the trace's t0, like the CSV
        c["gaps"] = [[a - t0, b - t0] for a, b in c["gaps"]]
        c.update(_unc_fields(unc.get(f"{c['source']}/{c['name']}")))
    for t in d["totals"] + ([d["total"]] if d["total"] else []):
        t.update(_unc_fields(unc.get(f"total:{t['source']}/{t['name']}")))
    doc.update(channels=d["channels"], total=d["total"], totals=d["totals"],
               faults=d["faults"],
               window={"start_s": res.t_start_s - t0, "duration_s": res.duration_s,
                       "valid": res.valid, "reasons": list(res.reasons)})
    doc["idle"] = _idle_doc(idle, "as pinned (active idle)", unc_idle or {})
    return doc


def _idle_doc(idle: Any, clocks: str, unc: Dict[str, Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """An idle baseline, saying at which clocks it was taken, with its uncertainty."""
    if idle is None:
        return None
    total = idle.total.to_dict() if idle.total else None
    if total is not None:
        total.update(_unc_fields(unc.get(f"total:{total['source']}/{total['name']}")))
    return {"clocks": clocks, "duration_s": idle.duration_s, "valid": idle.valid,
            "total": total,
            "channels": [{"name": c.channel.name, "source": c.channel.source,
                          "point": c.channel.point, "mean_w": c.mean_w}
                         for c in idle.channels]}


def _unc_fields(u: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """A figure's uncertainty as its document carries it (None = unknown, never 0)."""
    u = u or {}
    return {"mean_w_uncertainty_w": u.get("mean_w_uncertainty_w"),
            "mean_w_uncertainty_pct": u.get("mean_w_uncertainty_pct"),
            "uncertainty": {k: v for k, v in u.items() if not k.startswith("mean_w")}
            or {"basis": "unknown"}}


def _refuse_efficiency(eff: Dict[str, Any], reasons: List[str]) -> None:
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


def _efficiency(ips: float, res: Any, idle: Any, reg_eff: Optional[float],
                unc: Optional[Dict[str, Dict[str, Any]]] = None,
                unc_idle: Optional[Dict[str, Dict[str, Any]]] = None) -> Dict[str, Any]:
    """images_per_j = img/s / mean W over the window (= images / J), for the total and each
    measured point; above idle and an estimated pre-regulation figure when asked."""
    if res is None or res.total is None or res.total.mean_w is None:
        return {"images_per_j": None, "basis": None, "by_point": []}
    total = res.total
    unc = unc or {}

    def pct(key: str) -> Optional[float]:
        return (unc.get(key) or {}).get("mean_w_uncertainty_pct")

    by_point = [{"name": t.total.name, "source": t.source, "point": t.total.point,
                 "kind": "total", "mean_w": t.mean_w, "images_per_j": _ratio(ips, t.mean_w),
                 "mean_w_uncertainty_pct": pct(f"total:{t.source}/{t.total.name}")}
                for t in res.totals]
    by_point += [{"name": c.channel.name, "source": c.channel.source,
                  "point": c.channel.point, "kind": "channel", "mean_w": c.mean_w,
                  "images_per_j": _ratio(ips, c.mean_w),
                  "mean_w_uncertainty_pct": pct(c.channel.key)} for c in res.channels]
    doc: Dict[str, Any] = {
        "images_per_j": _ratio(ips, total.mean_w),
        "basis": f"{total.total.name} ({total.total.point}, source {total.source})",
        "by_point": by_point,
    }
    if idle is not None and idle.total is not None and idle.total.mean_w is not None:
        above = total.mean_w - idle.total.mean_w
        key = f"total:{total.source}/{total.total.name}"
        both = [(unc.get(key) or {}).get("mean_w_uncertainty_w"),
                ((unc_idle or {}).get(f"total:{idle.total.source}/{idle.total.total.name}")
                 or {}).get("mean_w_uncertainty_w")]
        above_unc = None if None in both else both[0] + both[1]  # type: ignore[operator]
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
        pre = total.mean_w / reg_eff
        doc["pre_regulation_estimate"] = {
            "estimate": True, "regulator_efficiency": reg_eff, "mean_w": pre,
            "images_per_j": _ratio(ips, pre),
            "note": f"an estimate: {total.total.name} divided by an assumed {reg_eff:.0%} "
                    "regulator efficiency (the TX1 whitepaper's assumption), not a measurement",
        }
    return doc


def _put_back(root: Root, request: MeasureRequest, had_journal: bool, steps: List[Any]) -> str:
    from ..ownership import journal

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
    from ..hw.clocks.steps import undo_writes

    writes = [(w, step.label) for step in steps for w in step.writes]
    undo_writes(root, [w for w, _ in writes], strict=True)
    # The journal's `wrote` goes back with the values (oldest last, as undo left them), or
    # restore would call the earlier jetbench state "moved by another tool".
    journal.record(root, [(w.path, label, w.old) for w, label in reversed(writes) if w.verify])
    return "put back to the earlier jetbench state (its journal is kept)"
