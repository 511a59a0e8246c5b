"""`jetbench measure`, `sweep` and `demo`: parse, call one library function, render.

Module level imports typer and the stdlib only; torch and matplotlib load inside the calls."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

import typer

from ..interrupts import InterruptLatch
from .common import (
    RUNTIME,
    WORKLOAD_PYTHON,
    beyond_power_mode_option,
    console,
    open_root,
    print_json,
)
from .progress_bar import ProgressBar, interruptible
from .render import print_invalid, print_note, print_results, print_table

if TYPE_CHECKING:
    from ..distributed.devices import RankEnv
    from ..distributed.messages import Leader
    from ..documents import ResultDoc
    from ..hw.fs import Root
    from ..run.measure import MeasureReport
    from ..run.measure import Progress as OnProgress
    from ..run.request import FreqSelection, MeasureOptions, MeasureRequest

    Runner = Callable[..., Optional[MeasureReport]]  # measure or sweep, with its keywords

def _finish(report: MeasureReport, as_json: bool, plot: bool, what: str, long: bool = False,
            answer: Sequence[str] = ()) -> None:
    from ..report import tables

    docs = report.results
    plots: List[Path] = []
    if plot and report.out_dir is not None:
        from ..report.plots import plot_trace, report_plots

        for doc, path in zip(docs, report.paths):
            csv = path.with_suffix(".csv")
            if doc.get("status") == "ok" and csv.is_file():
                plots.append(plot_trace(doc, csv, path.with_suffix(".trace.png")))
        if long:
            loaded = [_read_from(d, p) for d, p in zip(docs, report.paths)]
            plots += report_plots(loaded, report.out_dir, traces=False)
    if as_json:
        print_json({"simulated": report.simulated, "out_dir": str(report.out_dir),
                    "out_fallback": report.fallback,
                    "clocks": report.restored, "results": docs,
                    "advice": list(report.advice), "notes": list(report.notes),
                    "plots": [str(p) for p in plots]})
        _exit_if_invalid(report)
        return
    out = console()
    if not out.is_terminal:
        out.width = max(out.width, 140)  # piped: never truncate figures
    if docs:
        if long:
            print_table(out, tables.long_table(docs, what))
        else:
            print_results(out, tables.rich_table(docs, what))
    err = console(stderr=True)
    for w in tables.warnings_of(docs):
        print_note(err, "warning", w)
    for line in report.notes:
        print_note(err, "note", line)
    for line in report.advice:
        print_note(err, "advice", line)
    if report.fallback:
        print_note(err, "warning", report.fallback)
    for line in tables.uncertainty_advice(docs):
        print_note(err, "uncertainty", line)
    shorter = report.shorter_windows
    if shorter:  # --resume kept points measured with a shorter window: said, never mixed silently
        windows = sorted({f"{w:.3g} s" for _, w in shorter})
        print_note(err, "warning", (
            f"--resume mixes window lengths: {len(shorter)} resumed point(s) were measured over "
            f"{', '.join(windows)}, shorter than --duration asks now; measure them again "
            f"(another --out, or delete them): {', '.join(pid for pid, _ in shorter)}"))
    print_invalid(docs)
    # the answer and where it is, last: what a reader looks for after the table
    for line in answer:
        out.print(line, soft_wrap=not out.is_terminal, highlight=False, markup=False)
    if report.skipped:
        out.print(f"resumed: {len(report.skipped)} point(s) already measured, skipped")
    out.print(f"clocks: {report.restored}")
    if report.out_dir is not None and report.paths:
        # a result that never ran (oom, unavailable, mismatch) has no power trace
        traces = sum(Path(p).with_suffix(".csv").is_file() for p in report.paths)
        out.print(f"results: {report.out_dir} ({len(report.paths)} JSON, {traces} CSV power "
                  "trace(s))", soft_wrap=True)
    for p in plots:
        out.print(f"plot: {p}", soft_wrap=True)
    _exit_if_invalid(report)


def _read_from(doc: ResultDoc, path: Path) -> ResultDoc:
    """The result as `report` reads it from its file (its trace CSV beside it)."""
    loaded = doc.copy()
    loaded["_path"] = str(path)
    return loaded


def _exit_if_invalid(report: MeasureReport) -> None:
    from ..errors import HardwareError, MeasurementInvalid

    failed = [d for d in report.results if d.get("status") == "failed"]
    if failed:  # written like the others; the run went on past them
        raise HardwareError(f"{len(failed)} of {len(report.results)} result(s) failed: "
                            f"{failed[0].get('message', '')}"[:400],
                            hint="each failed result says why (`message`); the others ran "
                            "and are written")
    bad = report.invalid
    if bad:
        raise MeasurementInvalid(
            f"{len(bad)} of {len(report.results)} result(s) invalid: the clock that ran is not "
            "the one applied, or the power window was refused (written all the same, marked "
            "validity.valid = false)",
            hint="see the reasons above; `jetbench info` shows the clocks now")


_MODEL = typer.Option("alexnet", "--model", "-m", rich_help_panel="Workload", metavar="MODELS",
                      help="Networks (`jetbench models`), comma-separated, "
                      "or a TorchScript, .onnx or .engine file, module:callable.")
_PRECISION = typer.Option("fp32", "--precision", "-p", rich_help_panel="Workload",
                          metavar="PRECISIONS",
                          help="fp32 (IEEE), tf32 (Ampere+), "
                          "fp16, bf16, int8; comma-separated.")
_BATCH = typer.Option("1", "--batch", "-b", rich_help_panel="Workload", metavar="SIZES",
                      help="Batch sizes, comma-separated.")
_CPU = typer.Option(None, "--cpu-freq", rich_help_panel="Clocks", metavar="FREQ",
                    help="Pin the CPU clusters (nearest entry).")
_EMC = typer.Option(None, "--emc-freq", rich_help_panel="Clocks", metavar="FREQ",
                    help="Pin the memory clock (EMC).")
_PROFILE = typer.Option(None, "--profile", rich_help_panel="Clocks", metavar="PROFILE",
                        help="A profile (`jetbench profiles`) or TOML "
                        "file; --freq etc. override it.")
_METER = typer.Option(None, "--meter", rich_help_panel="Power", metavar="SPEC",
                      help="Power source (repeatable): auto, ina3221, "
                      "rapl, nvml, jtop, none, PROTOCOL:PORT (docs/power.md).")
_SAMPLE_RATE = typer.Option(None, "--sample-rate", rich_help_panel="Power", metavar="HZ",
                            help="Power read rate; default: sensor's.")
_ITER = typer.Option(10, "--iterations", "-n", rich_help_panel="Timing window", metavar="N",
                     help="Minimum timed iterations.")
_DURATION = typer.Option("3s", "--duration", rich_help_panel="Timing window", metavar="DURATION",
                         help="Minimum timed duration (the power window).")
_WARMUP = typer.Option("1s", "--warmup", rich_help_panel="Timing window", metavar="DURATION",
                       help="Minimum warm-up (then until latency is stable).")
_IDLE = typer.Option("0", "--idle", rich_help_panel="Power", metavar="DURATION",
                     help="Sample idle power this long first, "
                     "clocks pinned (energy above idle).")
_IDLE_UNPINNED = typer.Option(False, "--idle-unpinned", rich_help_panel="Power",
                              help="Also sample idle power unpinned, "
                              "before pinning (docs/measure.md).")
_KEEP = typer.Option(False, "--keep-clocks", rich_help_panel="Clocks",
                     help="Leave the clocks pinned afterwards.")
_REG = typer.Option(None, "--regulator-efficiency", rich_help_panel="Power", metavar="FRACTION",
                    help="Also an ESTIMATED "
                    "pre-regulator figure: total / this (e.g. 0.8).")
_DEVICE = typer.Option("auto", "--device", rich_help_panel="Workload", metavar="DEVICE",
                       help="auto (cuda if present), cuda, cpu.")
_SHAPE = typer.Option(None, "--input-shape", rich_help_panel="Workload", metavar="SHAPE",
                      help="A user model's sample shape, e.g. 3,224,224 "
                      "(docs/workloads.md).")
_PROVIDER = typer.Option(None, "--provider", rich_help_panel="Workload", metavar="PROVIDER",
                         help="ONNX Runtime's: tensorrt, cuda, cpu "
                         "(default: the best present).")
_PLOT = typer.Option(False, "--plot", rich_help_panel="Output",
                     help="Draw each run's power trace (PNG beside it).")
_JSON = typer.Option(False, "--json", rich_help_panel="Output",
                     help="Print the result documents as JSON.")
_WAIT = typer.Option(None, "--wait", rich_help_panel="Clocks", metavar="[SECONDS]",
                     help="Wait for a board another command "
                     "holds (for ever, or SECONDS) instead of failing (docs/clocks.md).")


_DEVICES = typer.Option(None, "--devices", rich_help_panel="Several devices", metavar="N|I,J,...",
                        help="Several devices as one run: a count (2) or "
                        "CUDA indices (0,1); docs/measure.md.")
_SCALING = typer.Option(False, "--scaling", rich_help_panel="Several devices",
                        help="With --devices: report the scaling against "
                        "one device alone.")


def _ranks(ctx: typer.Context, devices: Optional[str], scaling: bool,
           request: MeasureRequest) -> Optional[RankEnv]:
    """None for a plain run; this process's RankEnv when it is one rank of a multi-device job
    (under torchrun, or started by --devices). With --devices and no job yet, start the ranks
    here (each runs this same command) and exit with rank 0's status."""
    from ..distributed.devices import check_gpu_count, parse_devices, rank_env

    env = rank_env()
    if env is not None:
        return env
    if devices is None:
        return None
    spec = parse_devices(devices)
    check_gpu_count(spec, devices, request.device, _cuda_count(request.device))
    count = spec.count
    open_root(ctx)  # a bad --root fails here, not once per rank
    from ..distributed.launch import launch_ranks
    from .common import invocation

    raise typer.Exit(launch_ranks(invocation(), count))


def _cuda_count(device: str) -> int:
    """CUDA GPUs visible to this process (0 without torch or CUDA); not asked for --device cpu."""
    if (device or "auto").lower() == "cpu":
        return 0
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _run_ranked(env: RankEnv, latch: InterruptLatch, request: MeasureRequest,
                devices: Optional[str], scaling: bool, run: Runner) -> Optional[MeasureReport]:
    """This rank's part; rank 0's report (None on the others). An error that follows a
    Ctrl-C (a peer gone because it was interrupted too) is the interrupt."""
    from ..distributed.rank_run import run_as_rank
    from ..errors import JetbenchError

    try:
        return run_as_rank(
            env, request.device, devices, scaling,
            lambda device, leader: run(dataclasses.replace(request, device=device), leader),
            lambda *_: latch.check())
    except JetbenchError:
        latch.check()
        raise


_CMD = typer.Option(None, "--cmd", rich_help_panel="Any command (--cmd)", metavar="COMMAND",
                    help="Measure this command instead of a network (split "
                    "like a shell line, no shell; docs/measure.md).")
_THROUGHPUT_FROM = typer.Option(None, "--throughput-from", rich_help_panel="Any command (--cmd)",
                                metavar="SOURCE",
                                help="With --cmd: trtexec, "
                                "regex:PATTERN (items/s) or items:N (docs/measure.md).")
_UNIT = typer.Option(None, "--unit", rich_help_panel="Any command (--cmd)", metavar="UNIT",
                     help="With --cmd: images (default), tokens, "
                     "frames, queries.")
_CMD_LOG = typer.Option(None, "--cmd-log", rich_help_panel="Any command (--cmd)", metavar="FILE",
                        help="With --cmd: its output to this file.")


def _options(ctx: typer.Context, given: Dict[str, Any]) -> MeasureOptions:  # locals()
    """measure's/sweep's parameters as typed, for run/request.build_request (every rule on
    which options go together is there, not here)."""
    from ..run.request import MeasureOptions
    from .clocks import wait_seconds

    names = {f.name for f in dataclasses.fields(MeasureOptions)} - {"given", "wait_s", "meter"}
    typed = {k: v for k, v in given.items() if k in names}

    def from_command_line(name: str) -> bool:  # typer's click may not be `click`: by name
        source = ctx.get_parameter_source(name)
        return source is not None and source.name != "DEFAULT"

    from ..hw.meters.registry import with_sample_rate

    meters = with_sample_rate(given.get("meter") or (), given.get("sample_rate"))
    return MeasureOptions(**typed, meter=tuple(meters),
                          wait_s=wait_seconds(given.get("wait")),
                          cmd_output_to_stderr=bool(given.get("as_json")),
                          given=frozenset(n for n in given if from_command_line(n)))


def _measure(root: Root, request: MeasureRequest, progress: Optional[OnProgress] = None,
             ranks: Optional[Leader] = None) -> MeasureReport:
    """run/measure.py's measure, imported once the request is built: a bad option is refused
    before numpy and the sampler load."""
    from ..run.measure import measure

    return measure(root, request, progress=progress, ranks=ranks)


def _sweep(root: Root, request: MeasureRequest, freq: FreqSelection,
           progress: Optional[OnProgress] = None, ranks: Optional[Leader] = None
           ) -> MeasureReport:
    from ..run.sweep import sweep

    return sweep(root, request, freq, progress=progress, ranks=ranks)


def _run(ctx: typer.Context, options: MeasureOptions, run: Runner, as_json: bool
         ) -> Optional[MeasureReport]:
    """The request built (or a usage error, nothing started), then the run: here, or as one
    rank of a multi-device job. The report; None on a rank other than 0."""
    from ..distributed.devices import rank_env
    from ..run.request import build_request

    request = build_request(options, ranked=options.devices is not None or
                            rank_env() is not None)
    env = _ranks(ctx, options.devices, options.scaling, request)
    with InterruptLatch() as latch, \
            ProgressBar(enabled=not as_json and (env is None or env.leader)) as bar:
        progress = interruptible(bar.update, latch)
        if env is None:
            return run(open_root(ctx), request, progress=progress)
        return _run_ranked(env, latch, request, options.devices, options.scaling,
                           lambda req, leader: run(open_root(ctx), req, progress=progress,
                                                   ranks=leader))


def measure(
    ctx: typer.Context,
    model: str = _MODEL, precision: str = _PRECISION, batch: str = _BATCH,
    freq: Optional[str] = typer.Option(None, "--freq", rich_help_panel="Clocks", metavar="FREQ",
                                       help="GPU clock, e.g. 690MHz (nearest "
                                       "table entry; NVML's locked clock on a discrete GPU)."),
    cpu_freq: Optional[str] = _CPU, emc_freq: Optional[str] = _EMC,
    profile: Optional[str] = _PROFILE, meter: Optional[List[str]] = _METER,
    sample_rate: Optional[str] = _SAMPLE_RATE,
    iterations: int = _ITER, duration: str = _DURATION, warmup: str = _WARMUP,
    idle: str = _IDLE, idle_unpinned: bool = _IDLE_UNPINNED, keep_clocks: bool = _KEEP,
    regulator_efficiency: Optional[float] = _REG,
    out: Path = typer.Option(Path("jetbench-results"), "--out", rich_help_panel="Output",
                             metavar="DIR", help="Directory for the "
                             "result JSON and trace CSV of each configuration."),
    cmd: Optional[str] = _CMD, throughput_from: Optional[str] = _THROUGHPUT_FROM,
    unit: Optional[str] = _UNIT, cmd_log: Optional[Path] = _CMD_LOG,
    device: str = _DEVICE, input_shape: Optional[str] = _SHAPE,
    provider: Optional[str] = _PROVIDER, runtime: Optional[str] = RUNTIME,
    plot: bool = _PLOT, as_json: bool = _JSON, wait: Optional[str] = _WAIT,
    devices: Optional[str] = _DEVICES, scaling: bool = _SCALING,
    workload_python: Optional[str] = WORKLOAD_PYTHON,
    beyond_power_mode: bool = beyond_power_mode_option(),
) -> None:
    """img/s, latency, W and img/s/W at chosen clocks: pin (state journalled), warm up, sample
    power exactly around the timed iterations, restore the clocks, write a JSON result and
    its power trace per configuration. With --cmd, any command is the workload."""
    report = _run(ctx, _options(ctx, locals()), _measure, as_json)
    if report is not None:
        from ..run.sweep import summarize

        # the answer (as sweep's) where there is a choice: more than one configuration
        answer = summarize(report.results).answer() if len(report.results) > 1 else []
        with InterruptLatch():  # Ctrl-C or SIGTERM while the table prints: still 130, not -15
            _finish(report, as_json, plot, "jetbench measure", answer=answer)


def sweep(
    ctx: typer.Context,
    freq: str = typer.Option(..., "--freq", rich_help_panel="Clocks", metavar="RANGE",
                             help="307MHz..998MHz (every table entry in the "
                             "range), all, or a list 614MHz,691MHz."),
    model: str = _MODEL, precision: str = _PRECISION, batch: str = _BATCH,
    cpu_freq: Optional[str] = _CPU, emc_freq: Optional[str] = _EMC,
    profile: Optional[str] = _PROFILE, meter: Optional[List[str]] = _METER,
    sample_rate: Optional[str] = _SAMPLE_RATE,
    iterations: int = _ITER, duration: str = _DURATION, warmup: str = _WARMUP,
    idle: str = _IDLE, idle_unpinned: bool = _IDLE_UNPINNED, keep_clocks: bool = _KEEP,
    regulator_efficiency: Optional[float] = _REG,
    out: Path = typer.Option(Path("jetbench-sweep"), "--out", rich_help_panel="Output",
                             metavar="DIR", help="Directory: one result "
                             "per point, written as it completes."),
    resume: bool = typer.Option(False, "--resume", rich_help_panel="Output",
                                help="Skip points already in --out."),
    cmd: Optional[str] = _CMD, throughput_from: Optional[str] = _THROUGHPUT_FROM,
    unit: Optional[str] = _UNIT, cmd_log: Optional[Path] = _CMD_LOG,
    device: str = _DEVICE, input_shape: Optional[str] = _SHAPE,
    provider: Optional[str] = _PROVIDER, runtime: Optional[str] = RUNTIME,
    plot: bool = typer.Option(True, "--plot/--no-plot", rich_help_panel="Output",
                              help="Draw the curves (and traces)."),
    as_json: bool = _JSON, wait: Optional[str] = _WAIT,
    devices: Optional[str] = _DEVICES, scaling: bool = _SCALING,
    workload_python: Optional[str] = WORKLOAD_PYTHON,
    beyond_power_mode: bool = beyond_power_mode_option(),
) -> None:
    """measure over GPU clocks x batch x precision: where is the efficiency peak really?
    Prints every point, the most efficient and the fastest, and draws the curves. With --cmd,
    the command is run once per clock."""
    from ..run.request import parse_selection

    chosen = parse_selection(freq)  # a typo answered at once, before the board is opened
    given = {k: v for k, v in locals().items() if k != "freq"}  # the selection, not a list
    report = _run(ctx, _options(ctx, given),
                  lambda root, req, progress=None, ranks=None: _sweep(
                      root, req, chosen, progress=progress, ranks=ranks), as_json)
    if report is None:
        return  # not rank 0: rank 0 reports for the run
    from ..run.sweep import summarize

    with InterruptLatch():  # Ctrl-C or SIGTERM while the tables print: still 130, not -15
        _finish(report, as_json, plot, "jetbench sweep", long=True,
                answer=summarize(report.results, report.simulated).lines())


def demo(
    out: Optional[Path] = typer.Option(None, "--out",
                                       metavar="DIR", help="Where to keep the results "
                                       "(default: a new temporary directory)."),
    model: str = typer.Option("sim:alexnet", "--model", help="The network: sim:NAME (default: "
                              "speed from the simulated board's latency model, following its "
                              "clocks) or a built-in network run on this machine's CPU."),
) -> None:
    """The README's first command: a simulated TX1 at the whitepaper's 690 MHz, AlexNet FP32
    and FP16 at batch 1 with its rails; prints the table (SIMULATED) and plots the traces.
    No hardware, no root; short runs (about a minute on a 2-core machine)."""
    from ..report import tables
    from ..run.demo import run_demo
    from ..workload.model_arg import is_sim
    from ..workload.registry import check_model_names

    check_model_names([model])
    t0 = time.monotonic()
    con = console()
    con.print("jetbench demo: a SIMULATED Jetson TX1 (L4T R24) in a temporary directory, "
              "profile tx1-690mhz (GPU 690 MHz asked: 691.2 MHz runs; CPU and EMC at max), "
              f"{model} FP32 and FP16, batch 1. Short runs: 3 iterations / 2 s each.")
    with InterruptLatch() as latch, ProgressBar(enabled=True) as bar:
        result = run_demo(out, progress=interruptible(bar.update, latch), model=model)
    width = con.width
    if not con.is_terminal:  # piped: the table whole, the prose at the screen's width
        con.width = max(con.width, 140)
    print_results(con, tables.rich_table(result.report.results, "jetbench demo: Table 1"))
    con.width = width
    for w in tables.warnings_of(result.report.results):
        print_note(console(stderr=True), "warning", w)
    for line in result.report.advice:
        print_note(console(stderr=True), "advice", line)
    for line in tables.uncertainty_advice(result.report.results):
        print_note(console(stderr=True), "uncertainty", line)
    con.print(f"clocks: {result.report.restored}")
    con.print(f"results: {result.out_dir}", soft_wrap=True)
    for p in result.plots:
        con.print(f"plot: {p}", soft_wrap=True)
    if is_sim(model):
        con.print(f"(the figures come from the simulated board's latency model, calibrated on "
                  f"the TX1 whitepaper, and its power model: SIMULATED, not a TX1. img/s and W "
                  f"both follow the simulated clocks. {time.monotonic() - t0:.0f} s)")
    else:
        con.print(f"(the figures are this machine's CPU running {model} with the simulated "
                  f"board's power model: SIMULATED, not a TX1. img/s comes from this machine's "
                  f"CPU and does not follow the simulated GPU clock; only the simulated power "
                  f"does. {time.monotonic() - t0:.0f} s)")
    print_invalid(result.report.results)
    _exit_if_invalid(result.report)


