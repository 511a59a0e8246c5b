"""`jetbench measure` as a library call: pin -> build -> warm up -> (idle) -> window around
the timed iterations -> correlate -> result file + trace, then restore the clocks.

    report = measure(root, MeasureRequest(models=("alexnet",), gpu_freqs=(690_000_000,)))

Every configuration (GPU clock x model x precision x batch) is a `Point`; `run/sweep.py` asks for
many GPU clocks, `measure` usually for one. The clocks are journalled before the first write
and put back in a `finally` (success, failure, Ctrl-C); a kill -9 leaves the journal for
`jetbench restore`. If another jetbench command had already changed the clocks (a journal
existed), only this run's own writes are undone and that journal is left as it was.

One path for every kind of workload: `_State.timed_run` picks the `TimedRun`
(workload/timing/timed.py: in process, a child under another Python, `--cmd`, or every rank of a
multi-device run) and `_State.one` measures it the same way. The pieces live beside this file:
request.py (what is asked), pinning.py (the clocks), meters.py (the power side), result.py
(the document).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

from ..documents import BoardDoc, ResultDoc
from ..errors import (
    NOT_RUN,
    RankLost,
    UsageError,
    first_line,
    not_run,
    set_interrupt_notes,
)
from ..hw.board import Board, detect
from ..hw.clocks.domains import read_clocks
from ..hw.fs import Root
from ..hw.readings import identity
from ..interrupts import Hold, checkpoint, pending
from ..open_board import open_board
from ..ownership import journal
from ..ownership.journal import originals
from ..ownership.owner import borrow_board
from ..report import io
from ..sampling.rates import sampling_doc
from ..sampling.uncertainty import throughput_sem_pct
from ..work_units import efficiency_label
from ..workload.model_arg import is_sim
from ..workload.runtimes import TORCH
from ..workload.sim_run import SimRun
from ..workload.timing.plan import TimingPlan
from ..workload.timing.timed import ChildRun, InProcessRun, TimedRun, Timing
from . import result as build
from .calibration import add_wall, board_identity, installed
from .meters import Meters
from .pinning import OnApplied, Pin, put_back
from .request import MeasureRequest, Point, plan_points, validate
from .validity import ClockSampler, held_shares, judge

if TYPE_CHECKING:
    from ..distributed.messages import Leader
    from ..sampling.sampler import Window
    from ..sampling.window import WindowResult

OnResult = Callable[[ResultDoc, Optional[Path]], None]  # each result, and where it went
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


@dataclass
class MeasureReport:
    results: List[ResultDoc] = field(default_factory=list)  # in point order
    paths: List[Path] = field(default_factory=list)  # JSON files written (or resumed)
    skipped: List[str] = field(default_factory=list)  # point ids resumed from disk
    # resumed points whose power window was shorter than this run's --duration asks:
    # (point id, its window in s); their figures come from another window length
    shorter_windows: List[Tuple[str, float]] = field(default_factory=list)
    simulated: bool = False
    board: BoardDoc = field(default_factory=lambda: BoardDoc())
    out_dir: Optional[Path] = None
    restored: Optional[str] = None  # what happened to the clocks at the end
    setup_s: Optional[float] = None  # measure start -> first timed iteration
    advice: List[str] = field(default_factory=list)  # "fp16 is 15x slower than fp32 here..."
    notes: List[str] = field(default_factory=list)  # planning's: "--freq X runs Y, as ..."
    fallback: Optional[str] = None  # --out failed mid-run: where the results went instead

    @property
    def invalid(self) -> List[ResultDoc]:
        """The results marked `validity.valid = false` (written all the same)."""
        return [d for d in self.results if not (d.get("validity") or {}).get("valid", True)]


# -- the run --------------------------------------------------------------------------------
def measure(root: Root, request: MeasureRequest, progress: Optional[Progress] = None,
            on_result: Optional[OnResult] = None, on_applied: Optional[OnApplied] = None,
            command: str = "measure", ranks: Optional[Leader] = None) -> MeasureReport:
    """Measure every point of `request`; see the module docstring. Every result is written,
    valid or not: one whose observed clocks contradict the applied ones, or whose window is
    refused, carries `validity.valid = false` and its reasons (`MeasureReport.invalid`; the CLI
    exits 3 after printing everything). The board is ours for the whole run: its lock, or a
    lease from the daemon holding it. `ranks`: rank 0's distributed.protocol.Leader when the
    point runs on several devices at once (measure --devices, torchrun)."""
    t_start = time.monotonic()
    validate(request)
    made = request.out_dir is not None and not request.out_dir.exists()
    if request.out_dir is not None:
        io.check_out_dir(request.out_dir)  # before any work: a bad --out costs no run
    with io.removed_if_left_empty(request.out_dir if made else None):
        return _measure(root, request, progress, on_result, on_applied, command, ranks, t_start)


def _measure(root: Root, request: MeasureRequest, progress: Optional[Progress],
             on_result: Optional[OnResult], on_applied: Optional[OnApplied], command: str,
             ranks: Optional[Leader],
             t_start: float) -> MeasureReport:
    report = MeasureReport(out_dir=request.out_dir)
    # Planned before the board lock: every request resolved once (reading the board, writing
    # nothing), so a request the board cannot run is refused at once, even while another
    # command holds it; the pin checks the board still resolves each point so.
    points = plan_points(request, detect(root), root, report.notes)
    with borrow_board(root, command, request.wait_s) as guard, open_board(root) as board:
        report.simulated = board.simulated
        report.board = identity(root, board, originals(root))
        mode = report.board.get("power_mode") or {}
        for differ in mode.get("not_in_force", []):
            report.notes.append(f"power mode reported by nvpmodel, not in force: {differ}")
        had_journal = bool(journal.load(root))
        pin = Pin(root, board, request, guard)  # every write through the guard
        state = _State(root, board, request, report, pin, progress, t_start, ranks)
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
                state.meters.stop()
                with guard.writing():  # nothing written once the daemon took the board back
                    report.restored = put_back(root, request, had_journal, state.pin.steps)
                set_interrupt_notes([f"clocks: {report.restored}", _finished_note(report)])
            if isinstance(err, KeyboardInterrupt):
                raise
            raise KeyboardInterrupt from err
        finally:
            if not put_back_tried:
                with Hold():  # an interrupt now waits for the put-back, then is raised (130)
                    state.meters.stop()
                    with guard.writing():
                        report.restored = put_back(root, request, had_journal, state.pin.steps)
                    if pending():
                        set_interrupt_notes([f"clocks: {report.restored}",
                                             _finished_note(report)])
    report.advice = build.precision_advice(report.results)
    return report


def _finished_note(report: MeasureReport) -> str:
    done = [p for p in report.paths if p is not None]
    if not done:
        return "results: none finished"
    return (f"results: {len(done)} finished, in {report.out_dir}; the same command with "
            "--resume measures the rest (the finished points are skipped)")


@dataclass
class _Windows:
    """A point's power windows: the idle baseline, the timed window open, its result."""
    idle: Optional[WindowResult] = None
    run: Optional[Window] = None
    result: Optional[WindowResult] = None


class _State:
    """One measure run's moving parts: the sampler, the current pin, the written steps."""

    def __init__(self, root: Root, board: Board, request: MeasureRequest, report: MeasureReport,
                 pin: Pin, progress: Optional[Progress], t_start: float,
                 ranks: Optional[Leader] = None):
        self.root, self.board, self.request, self.report = root, board, request, report
        self.ranks = ranks  # multi-device: runs each point on every rank (distributed/)
        self.pin = pin
        self.calibration = installed(root)  # the board's wall calibration, if it has one
        self.progress, self.t_start = progress, t_start
        self.meters = Meters(root, board, request, ranks)
        self._sampler_started = False
        self.idle_unpinned: Optional[WindowResult] = None  # the idle before the first pin

    # -- set-up ---------------------------------------------------------------------------
    def measure_idle_unpinned(self) -> None:
        """--idle-unpinned: idle power with the board's own governors (before the first pin);
        a locked idle can read far higher (7.5 W vs 4.7 W published for an Orin NX)."""
        req = self.request
        if not req.idle_unpinned or self.meters.sampler is None or self.pin.steps:
            return
        with self.meters.sampler.window() as idle:
            time.sleep(req.idle_s or IDLE_UNPINNED_DEFAULT_S)
        self.idle_unpinned = idle.result_unchecked

    # -- points ---------------------------------------------------------------------------
    def run(self, points: List[Point], on_result: Optional[OnResult],
            on_applied: Optional[OnApplied]) -> None:
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
                    window = ((doc.get("power") or {}).get("window") or {}).get("duration_s")
                    # a window is never shorter than the --duration that opened it
                    if isinstance(window, (int, float)) and \
                            window < self.request.duration_s * 0.99:
                        self.report.shorter_windows.append((point.id, float(window)))
                    self.report.results.append(doc)
                    self.report.paths.append(json_path)
                    self.report.skipped.append(point.id)
                    continue
            if not self._sampler_started:
                self._sampler_started = True
                self.meters.start()
                self.measure_idle_unpinned()
            self.pin.to(point.gpu, on_applied)
            _phase("pinned")
            # Once the workload has returned its timings the point is finished: an interrupt
            # from then on is held until its result is written whole (docs/measure.md,
            # "Interrupts").
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

    def write(self, json_path: Path, doc: ResultDoc, csv_text: Optional[str]) -> Path:
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

    def timed_run(self, point: Point) -> TimedRun:
        """The one choice of what runs the point; measuring it is the same for every kind."""
        req = self.request
        if req.command is not None:
            from ..workload.command.run import CommandTimedRun

            return CommandTimedRun(req.command)
        if is_sim(point.model):  # a built-in network on the simulated board's latency model
            return SimRun(self.root, self.board, point.model, point.precision, point.batch)
        if self.ranks is not None:
            return self.ranks.timed_run(point, req)
        if req.workload_python:
            return ChildRun(req.workload_python, point.model, point.precision, point.batch,
                            req.device, input_shape=req.input_shape)
        return InProcessRun(point.model, point.precision, point.batch, req.device,
                            input_shape=req.input_shape, provider=req.provider,
                            runtime=point.runtime)

    def one(self, point: Point, k: int, total: int,
            hold: Optional[Hold] = None) -> Tuple[ResultDoc, Optional[str]]:
        req = self.request
        progress = self.progress
        report = None if progress is None else (
            lambda phase, f: progress(k, total, point.label, phase, f))
        marks: Dict[str, float] = {"start": time.monotonic()}
        temps_before = build.temperatures(self.root, self.board)
        watch = ClockSampler(lambda: read_clocks(self.root, self.board))
        windows = _Windows()
        run = self.timed_run(point)

        def timed_start() -> None:
            _phase("window-opening")
            if req.idle_s > 0 and self.meters.sampler is not None:
                marks["idle_start"] = time.monotonic()
                with self.meters.sampler.window() as idle:
                    time.sleep(req.idle_s)
                windows.idle = idle.result_unchecked
            watch.start()
            if self.report.setup_s is None:
                self.report.setup_s = time.monotonic() - self.t_start
            marks["timed_start"] = time.monotonic()
            if self.meters.sampler is not None:
                windows.run = self.meters.sampler.begin()
            _phase("window-open")

        def timed_end() -> None:
            if self.meters.sampler is not None and windows.run is not None:
                windows.result = self.meters.sampler.end(windows.run, check=False)
            marks["timed_end"] = time.monotonic()
            watch.stop()
            _phase("window-closed")

        try:
            if report:
                report("build", 0.0)
            run.prepare()
            if run.warms_up:
                marks["warmup_start"] = time.monotonic()
            timing = run.run(TimingPlan.measuring(req.iterations, req.duration_s, req.warmup_s,
                                                  timed_start, timed_end, report))
            windows.result = run.window(timing, self.meters.sampler, windows.result)
        except NOT_RUN as err:
            status, message = not_run(err)
            doc = self.skeleton(point, status, run)
            doc["message"] = message
            return doc, None
        except Exception as err:  # noqa: BLE001 - a sweep records any point's failure
            # a sweep goes on past a failed point, and several runtimes past one's failure
            # (torch eager, the reference, still ends a plain measure)
            going_on = req.keep_going or point.runtime != TORCH
            if not going_on or isinstance(err, RankLost):  # no ranks left to go on with
                raise
            doc = self.skeleton(point, "failed", run)
            hint = getattr(err, "hint", None)
            doc["message"] = f"{type(err).__name__}: {first_line(err)}" + \
                (f" ({hint})" if hint else "")
            return doc, None
        finally:
            watch.stop()
            run.close()
        if hold is not None:
            checkpoint()  # one that landed in the window (and was swallowed): no result
            hold.start()
            _phase("figures")
        marks["end"] = time.monotonic()
        doc = self.figures(point, run, timing, windows, marks, watch, temps_before)
        run.finish(doc, timing, req.duration_s)
        csv_text = None
        if self.meters.sampler is not None:
            t0 = marks["start"]
            csv_text = io.trace_csv_text(self.meters.sampler.traces(), t0, t0, marks["end"],
                                         self.board.simulated)
        return doc, csv_text

    def figures(self, point: Point, run: TimedRun, timing: Timing, windows: _Windows,
                marks: Dict[str, float], watch: ClockSampler, temps_before: Dict[str, float]
                ) -> ResultDoc:
        """The finished point's result: timings, power, img/J, clocks, thermal, validity."""
        req = self.request
        doc = self.skeleton(point, "ok", run)
        warnings: List[str] = list(doc["warnings"])
        doc.update(timing.to_dict())
        warnings += build.noise_advice(doc.pop("warnings", []), self.board.simulated,
                                       bool(self.pin.steps) or bool(journal.load(self.root)),
                                       throughput_sem_pct(timing.latencies_ms))
        res = windows.result
        refused = self.meters.check_window(res, efficiency_label(run.unit),
                                           run.times_iterations) if res is not None else []
        unc = self.meters.uncertainty(res) if res is not None else {}
        idle = windows.idle
        unc_idle = self.meters.uncertainty(idle) if idle is not None else {}
        power = doc["power"] = build.power_doc(req, res, idle, marks, point.id, unc, unc_idle)
        if res is not None:  # how fast each sensor was read, and how fast it refreshes
            doc["sampling"] = sampling_doc(self.meters.running().traces(), res.t_start_s,
                                           res.t_end_s)
            before_pin = self.idle_unpinned
            power["idle_unpinned"] = build.idle_doc(
                before_pin, "board governors (unpinned, before the pin)",
                self.meters.uncertainty(before_pin) if before_pin is not None else {})
        eff = doc["efficiency"] = build.efficiency(timing.images_per_s, res, idle,
                                                   req.regulator_efficiency, unc, unc_idle,
                                                   run.power_basis(power))
        if res is not None and res.total is not None:
            eff["uncertainty"] = self.meters.efficiency_uncertainty(res, unc, timing,
                                                                   run.times_iterations)
        if refused:
            build.refuse_efficiency(eff, refused)
        run.annotate(doc)
        if res is None:
            warnings.append("no power source on this machine: img/s/W not measured "
                            "(give --meter)")
        else:
            warnings += list(res.warnings)
        observed = watch.observed()
        shares = held_shares(self.pin.applied_clocks, observed, self.board.soc)
        for obs in observed:
            if (obs["domain"], obs["name"]) in shares:
                obs["held_share"] = shares[(obs["domain"], obs["name"])]
        mismatches = judge(self.pin.applied_clocks, observed, self.board.soc)
        doc["clocks"] = {"observed": observed}
        doc["thermal"] = build.thermal(self.root, self.board, temps_before, mismatches, warnings)
        doc["validity"] = {"valid": not (mismatches or refused),
                           "reasons": [m.reason for m in mismatches] + refused}
        doc["warnings"] = warnings + [f"note: {n}" for n in self.pin.notes + self.meters.notes]
        if self.calibration is not None and res is not None:  # wall figures (docs/power.md)
            add_wall(doc, self.calibration, board_identity(self.root, self.board))
        return doc

    def skeleton(self, point: Point, status: str, run: TimedRun) -> ResultDoc:
        return build.skeleton(point, status, self.request, self.board, self.report.board,
                              self.pin, run.framework)

