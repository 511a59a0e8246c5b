"""`measure --cmd "COMMAND ..."`: the user's own program as the workload (trtexec, a DeepStream
pipeline, an LLM benchmark). measure pins the clocks as for any workload; this module runs the
command in its own process group with the power window open over exactly its run (narrowed to
trtexec's timed queries when it reports them), streams its output through (or to `--cmd-log`),
reads its throughput (throughput_from.py) and turns the result into the schema's unit-aware
form:

    throughput.items_per_s, throughput.unit, efficiency.items_per_j, command.{argv, exit_code,
    output_tail, run_s}; images_per_s / images_per_j as well when the unit is images.

A command that fails or prints no throughput raises MeasurementInvalid (exit 3) with its
output's tail; one that cannot be started, UsageError (exit 1); a window shorter than
`--duration` gives a result marked invalid (the window it needs was not there). Ctrl-C ends
the command's process group before measure restores the clocks.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from io import BufferedReader
from typing import IO, Callable, Deque, List, Optional, Tuple

from ...documents import ResultDoc, ThroughputDoc, WorkloadDoc
from ...errors import MeasurementInvalid, UsageError
from ...procs import end_process_group
from ...sampling.sampler import Sampler
from ...sampling.window import WindowResult, compute_window
from ...work_units import efficiency_label
from ..timing.plan import TimingPlan
from ..timing.timed import TimedRun, Timing
from .spec import PRECISION, CommandSpec
from .throughput_from import (
    OutputParser,
)

TAIL_LINES = 20  # of the command's output, kept in the result and shown on failure
POLL_S = 0.1  # how often the wait for the command checks for Ctrl-C and reports progress
TERM_GRACE_S = 5.0  # SIGTERM to the process group, then SIGKILL after this
CHUNK_BYTES = 1 << 16  # read at most this much of the command's output at a time
# -- running it -----------------------------------------------------------------------------
@dataclass
class CommandRun:
    exit_code: int
    t_start_s: float  # time.monotonic() at its start and its exit
    t_end_s: float
    run_s: float
    parser: OutputParser
    tail: List[str]
    warnings: List[str] = field(default_factory=list)


class _Sink:
    """Where the command's output goes: a log file, or jetbench's own stdout/stderr (as bytes,
    unchanged), flushed as it comes so a long run shows its progress."""

    def __init__(self, spec: CommandSpec):
        self.lock = threading.Lock()
        self.log: Optional[IO[bytes]] = None
        if spec.log_path is not None:
            try:
                self.log = open(spec.log_path, "ab")
            except OSError as err:
                raise UsageError(f"--cmd-log: cannot write {spec.log_path} "
                                 f"({err.strerror or err})") from None
            self.log.write(f"# jetbench: {spec.line}\n".encode())
        self.to_stderr = spec.stdout_to_stderr
        self.broken: Optional[str] = None  # why the output stopped being passed on

    def write(self, stream: str, data: bytes) -> None:
        with self.lock:
            if self.broken is not None:
                return
            try:
                self._write(stream, data)
            except (OSError, ValueError) as err:  # a closed pipe (`| head`), a full disk
                # keep reading (a command blocked on a full pipe would hang the run)
                self.broken = f"its output could not be passed on after a point ({err})"

    def _write(self, stream: str, data: bytes) -> None:
        if self.log is not None:
            self.log.write(data)
            self.log.flush()
            return
        out = sys.stderr if stream == "stderr" or self.to_stderr else sys.stdout
        # under a progress bar (rich's live display proxies the streams) the text goes through
        # the proxy, which puts it on lines of its own above the bar: bytes written under it
        # were glued to the bar ("left 0:00:01processed 680582 blocks")
        proxied = hasattr(out, "rich_proxied_file")
        raw = None if proxied else getattr(out, "buffer", None)
        if raw is not None:
            out.flush()
            raw.write(data)
            raw.flush()
        else:  # a text stream without bytes (a test's capture)
            out.write(data.decode("utf-8", "replace"))
            out.flush()

    def close(self) -> None:
        if self.log is not None:
            self.log.close()


def run_command(spec: CommandSpec, on_start: Callable[[], None], on_end: Callable[[], None],
                poll: Optional[Callable[[float], None]] = None) -> CommandRun:
    """Run the command: `on_start()` just before it starts (the power window opens),
    `on_end()` as soon as it has exited (the window closes). `poll(elapsed_s)` runs every
    0.1 s while it runs (measure's progress, where a swallowed Ctrl-C is raised again).
    On any exception (Ctrl-C) the command's process group is ended before it propagates."""
    sink = _Sink(spec)
    parser = OutputParser(spec.throughput_from)
    tail: Deque[str] = deque(maxlen=TAIL_LINES)
    lock = threading.Lock()

    def lines(chunks: List[bytes], t_s: float) -> None:
        text = b"\n".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
        with lock:
            tail.extend(line.rstrip("\r") for line in text.split("\n")[-TAIL_LINES:])
            parser.feed_block(text, t_s)

    def pump(pipe: BufferedReader, stream: str) -> None:
        # whole chunks, not lines: a chatty command must never wait on jetbench's reading
        pending = b""
        while True:
            data = pipe.read1(CHUNK_BYTES)
            if not data:
                break
            t_s = time.monotonic()  # the sampler's clock: when this output arrived
            sink.write(stream, data)
            *complete, pending = (pending + data).split(b"\n")
            if len(pending) > CHUNK_BYTES:  # no newline for a long while (\r progress bars)
                complete, pending = complete + [pending], b""
            if complete:
                lines(complete, t_s)
        if pending:
            lines([pending], time.monotonic())
        pipe.close()

    on_start()
    t0 = time.monotonic()
    try:
        # its own session and process group: the terminal's Ctrl-C reaches jetbench alone,
        # which ends the whole group (a shell script's children included), then measure
        # restores the clocks
        proc = subprocess.Popen(list(spec.argv), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as err:
        on_end()
        sink.close()
        raise UsageError(f"--cmd: cannot start {spec.argv[0]!r}: {err.strerror or err}",
                         hint="give the program's path, or run it through `sh -c '...'`") from None
    pumps = [threading.Thread(target=pump, args=(proc.stdout, "stdout"), daemon=True),
             threading.Thread(target=pump, args=(proc.stderr, "stderr"), daemon=True)]
    exited = threading.Event()  # set the moment it exits (Popen.wait(timeout) polls: 50 ms)
    exit_s: List[float] = []

    def waiter() -> None:
        proc.wait()
        exit_s.append(time.monotonic())
        exited.set()

    warnings: List[str] = []
    try:
        # an interrupt from the moment the command exists ends its group (here: a Ctrl-C that
        # lands while these threads start, as soon as the command runs, left it running)
        for t in [*pumps, threading.Thread(target=waiter, daemon=True)]:
            t.start()
        while not exited.wait(POLL_S):
            if poll is not None:
                poll(time.monotonic() - t0)
        code, t1 = proc.returncode, exit_s[0]
        on_end()
        if end_process_group(proc, TERM_GRACE_S):
            warnings.append("the command left processes running in its process group: "
                            "ended them (SIGTERM) when it exited")
    except BaseException:
        end_process_group(proc, TERM_GRACE_S)
        proc.wait()
        for t in pumps:
            if t.ident is not None:  # started
                t.join(timeout=TERM_GRACE_S)
        sink.close()
        raise
    for t in pumps:
        t.join(timeout=TERM_GRACE_S)
        if t.is_alive():  # a process that left the group (setsid) holds the output open
            warnings.append("the command's output was still open after it exited (a process "
                            "outside its group holds it): stopped reading")
    sink.close()
    if sink.broken:
        warnings.append(sink.broken)
    with lock:
        return CommandRun(code, t0, t1, t1 - t0, parser, list(tail), warnings)


# -- the result -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CommandTiming:
    """What measure's timing loop gives for a network, for a command: `images_per_s` is the
    rate measure divides by the watts (items/s, whatever the unit; finish_doc names it)."""

    spec: CommandSpec
    run: CommandRun
    items_per_s: float
    latencies_ms: Tuple[float, ...] = ()  # a command gives no per-iteration latencies
    span_s: Optional[Tuple[float, float]] = None  # trtexec's timed queries (monotonic s)
    window_basis: str = "the command's run"

    @property
    def window_s(self) -> float:
        return self.span_s[1] - self.span_s[0] if self.span_s else self.run.run_s

    @property
    def images_per_s(self) -> float:
        return self.items_per_s

    def to_dict(self) -> ResultDoc:
        spec, parser = self.spec, self.run.parser
        throughput: ThroughputDoc = {
            "items_per_s": self.items_per_s, "unit": spec.unit,
            "source": spec.throughput_from.text(), "parsed_value": parser.value,
            "latency_ms": parser.latency_ms or None, "wall_s": self.run.run_s,
            "iterations": None, "cv": None, "window": self.window_basis,
        }
        if spec.unit == "images":
            throughput["images_per_s"] = self.items_per_s
        if spec.throughput_from.kind == "trtexec":
            throughput.update({"qps": parser.value,
                               "gpu_compute_ms": parser.gpu_compute_ms or None,
                               "queries": parser.queries, "inference_s": parser.inference_s,
                               "host_walltime_s": parser.walltime_s})
        workload: WorkloadDoc = {"model": spec.name, "framework": "command", "precision": PRECISION,
                    "batch": spec.batch, "batch_source": spec.batch_source,
                    "device": "command", "iterations": None, "unit": spec.unit}
        return {"workload": workload, "throughput": throughput,
                "warnings": list(spec.notes) + self.run.warnings}


def run_point(spec: CommandSpec, on_start: Callable[[], None], on_end: Callable[[], None],
              duration_s: float, progress: Optional[Callable[[str, float], None]] = None
              ) -> CommandTiming:
    """Run the command once with the window around it; MeasurementInvalid (with the output's
    tail) when it fails or prints no throughput."""
    def poll(elapsed_s: float) -> None:
        if progress is not None:
            progress("timed", min(elapsed_s / duration_s, 1.0) if duration_s else 1.0)

    run = run_command(spec, on_start, on_end, poll)
    if run.exit_code != 0:
        reason = (f"exited with status {run.exit_code}" if run.exit_code > 0
                  else f"was killed by signal {-run.exit_code}")
        _fail(spec, run, f"the command {reason}")
    missing = run.parser.missing()
    if missing is not None:
        _fail(spec, run, f"no throughput: {missing}")
    if spec.throughput_from.kind == "items":
        assert spec.throughput_from.items is not None
        rate = spec.throughput_from.items / run.run_s if run.run_s > 0 else 0.0
    else:
        assert run.parser.value is not None
        rate = run.parser.value * spec.qps_factor
    if not rate > 0:
        _fail(spec, run, f"no throughput: it reads {rate:g} {spec.unit}/s")
    span = _trtexec_span(run)
    if span is None:
        return CommandTiming(spec, run, rate)
    return CommandTiming(spec, run, rate, span_s=span, window_basis=(
        f"trtexec's timed queries: the {run.parser.inference_s:g} s of its 'Timing trace' line, "
        "ending when that line arrived (warm-up and engine loading left out)"))


def _trtexec_span(run: CommandRun) -> Optional[Tuple[float, float]]:
    """The power window trtexec's qps was measured over: its timed queries, `inference_s`
    long, ending when `Timing trace has N queries over S s` arrived. Right because trtexec
    prints that line as soon as runInference returns (trtexec.cpp: printPerformanceReport
    straight after it; printProlog first) and its logger flushes every line
    (samples/common/logging.h, LogStreamConsumerBuffer::putOutput), so the span ends at most
    the report's set-up before the line; None (the whole run) when either is missing or the
    span does not lie inside the run."""
    parser = run.parser
    if parser.inference_s is None or parser.trace_line_t_s is None or parser.inference_s <= 0:
        return None
    end = min(parser.trace_line_t_s, run.t_end_s)  # read late: it was written before the exit
    start = end - parser.inference_s
    if start < run.t_start_s:
        return None
    return start, end


def command_window(timing: CommandTiming, sampler: Optional[Sampler],
                   whole_run: Optional[WindowResult]) -> Optional[WindowResult]:
    """The power window of the result: trtexec's timed queries when known, else the command's
    whole run (`whole_run`, closed when it exited; its traces reach past the span's end)."""
    if timing.span_s is None or sampler is None or whole_run is None:
        return whole_run

    start, end = timing.span_s
    return compute_window(sampler.traces(), start, end, min_periods=sampler.min_periods,
                          gap_factor=sampler.gap_factor)


def _fail(spec: CommandSpec, run: CommandRun, reason: str) -> None:
    shown = "\n".join(f"  | {line}" for line in run.tail) or "  (no output)"
    raise MeasurementInvalid(f"--cmd {spec.line}: {reason} after {run.run_s:.2f} s; the last "
                             f"lines of its output:\n{shown}",
                             hint="the whole output went to "
                                  + (str(spec.log_path) if spec.log_path else "the terminal"))


def finish_doc(doc: ResultDoc, timing: CommandTiming, duration_s: float) -> None:
    """Name the unit in measure's result: `efficiency.items_per_j` beside (images) or instead
    of `images_per_j` at every level, the command's section, and the window's verdict: a run
    shorter than --duration is marked invalid (the window it needs was not there)."""
    spec, run = timing.spec, timing.run
    label = efficiency_label(spec.unit)
    eff = doc.get("efficiency") or {}
    validity = doc["validity"]
    short = timing.window_s < duration_s
    if short:
        what = "its timed queries took" if timing.span_s else "the command ran"
        reason = (f"{label} refused: {what} {timing.window_s:.2f} s, shorter than the "
                  f"window needs (--duration {duration_s:g}s): make it run longer (trtexec "
                  "--duration=N, more prompts or frames), or lower --duration")
        validity["reasons"].append(reason)
        validity["valid"] = False
        eff["refused"] = list(eff.get("refused", [])) + [reason]
    for item in [eff, *eff.get("by_point", []), eff.get("above_idle"),
                 eff.get("pre_regulation_estimate")]:
        if item and "images_per_j" in item:
            item["items_per_j"] = None if short else item["images_per_j"]
            if spec.unit != "images":
                del item["images_per_j"]
            elif short:
                item["images_per_j"] = None
    doc["command"] = {"argv": list(spec.argv), "line": spec.line, "exit_code": run.exit_code,
                      "run_s": run.run_s, "throughput_from": spec.throughput_from.text(),
                      "output_tail": run.tail,
                      "log": str(spec.log_path) if spec.log_path else None}


class CommandTimedRun(TimedRun):
    """--cmd as a `TimedRun`: the window is the command's run (or trtexec's timed queries),
    the result is named in the command's unit."""

    framework = "command"
    warms_up = False
    times_iterations = False

    def __init__(self, spec: CommandSpec):
        self.spec = spec
        self.unit = spec.unit

    def run(self, plan: TimingPlan) -> CommandTiming:
        """The command once, its run the window (it has no iterations of jetbench's)."""
        return run_point(self.spec, plan.on_timed_start or _nothing,
                         plan.on_timed_end or _nothing, plan.duration_s, plan.progress)

    def window(self, timing: Timing, sampler: Optional[Sampler],
               whole: Optional[WindowResult]) -> Optional[WindowResult]:
        assert isinstance(timing, CommandTiming)  # what run() returned
        return command_window(timing, sampler, whole)

    def finish(self, doc: ResultDoc, timing: Timing, duration_s: float) -> None:
        assert isinstance(timing, CommandTiming)
        finish_doc(doc, timing, duration_s)


def _nothing() -> None:
    """A hook nobody gave."""
