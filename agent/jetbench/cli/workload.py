"""`jetbench time` and `jetbench models`: parse, call one library function, render.

Module level imports typer and the stdlib only; torch loads inside the library calls."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

import typer

from .common import RUNTIME, WORKLOAD_PYTHON_TIME, console, print_json
from .render import print_table

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from ..run.timing import TimeReport, TimeRow
    from ..workload.check import Agreement
    from ..workload.layers import LayerTimes

_PROGRESS_AFTER_S = 2.0  # no bar for runs shorter than this


def time_cmd(
    model: str = typer.Option("alexnet", "--model", "-m", metavar="MODELS",
                              help="Networks, comma-separated (`jetbench models`), a TorchScript "
                              "file, module:callable (with --input-shape), an ONNX model "
                              "(.onnx) or a TensorRT engine (.engine, .plan)."),
    precision: str = typer.Option("fp32", "--precision", "-p", metavar="PRECISIONS",
                                  help="fp32 (IEEE), tf32 (Ampere+), fp16, bf16, int8; "
                                       "comma-separated."),
    batch: str = typer.Option("1", "--batch", "-b", metavar="SIZES",
                              help="Batch sizes, comma-separated, or `sweep` (1, 2, 4, ... "
                              "until out of memory)."),
    device: str = typer.Option("auto", "--device",
                               metavar="DEVICE", help="auto (cuda if present), cuda, cpu."),
    iterations: int = typer.Option(10, "--iterations", "-n", metavar="N",
                                   help="Minimum timed iterations."),
    duration: str = typer.Option("3s", "--duration", metavar="DURATION",
                                 help="Minimum timed duration (both minimums must be met)."),
    warmup: str = typer.Option("1s", "--warmup", metavar="DURATION",
                               help="Minimum warm-up time (then until latency is stable)."),
    input_mode: str = typer.Option("constant", "--input", metavar="INPUT",
                                   help="constant (non-zero, the whitepaper's) or random."),
    input_shape: Optional[str] = typer.Option(None, "--input-shape", metavar="SHAPE",
                                              help="One sample's shape, e.g. 3,224,224; for "
                                              "an ONNX model or engine's open dimensions also "
                                              "1x3x224x224 or NAME:1x3x224x224,NAME2:... (the "
                                              "batch is --batch)."),
    runtime: Optional[str] = RUNTIME,
    provider: Optional[str] = typer.Option(None, "--provider", metavar="PROVIDER",
                                           help="ONNX Runtime execution provider: tensorrt, "
                                           "cuda, cpu (default: the best present)."),
    mode: str = typer.Option("inference", "--mode",
                             metavar="MODE", help="inference or train (fwd+bwd)."),
    no_cudnn: bool = typer.Option(False, "--no-cudnn", help="Disable cuDNN."),
    cudnn_benchmark: bool = typer.Option(False, "--cudnn-benchmark",
                                         help="Let cuDNN autotune its algorithms."),
    channels_last: bool = typer.Option(False, "--channels-last", help="NHWC memory format."),
    cuda_graph: bool = typer.Option(False, "--cuda-graph", help="Replay as one CUDA graph."),
    compile_: bool = typer.Option(False, "--compile", help="torch.compile the network."),
    threads: Optional[int] = typer.Option(None, "--threads",
                                          metavar="N", help="CPU threads for torch."),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", metavar="BYTES",
                                               help="Treat workloads above this size (e.g. "
                                               "2GiB) as out of memory."),
    layers: bool = typer.Option(False, "--layers",
                                help="Per-layer forward (and backward) times, like caffe time."),
    check: bool = typer.Option(False, "--check",
                               help="Compare each reduced precision's outputs with fp32."),
    seed: int = typer.Option(0, "--seed",
                             metavar="N", help="Seed of the Gaussian weights and input."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON document."),
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="Write DIR/time.json."),
    workload_python: Optional[str] = WORKLOAD_PYTHON_TIME,
) -> None:
    """Time networks like `caffe time`, done right: warm-up until stable, then timed iterations
    until both --iterations and --duration are met; img/s, latency percentiles, CV, GFLOP/s."""
    from ..run.timing import TimeRequest, parse_batches, parse_bytes, time_models
    from ..units import parse_duration_s
    from ..workload.base import RunOptions
    from ..workload.model_arg import parse_shape_option
    from ..workload.precision import parse_precisions
    from ..workload.registry import check_model_names
    from ..workload.runtimes import parse_runtimes

    check_model_names(m.strip() for m in model.split(",") if m.strip())  # before torch loads
    runtimes = parse_runtimes(runtime)
    options = RunOptions(
        mode=mode, cudnn=not no_cudnn, cudnn_benchmark=cudnn_benchmark,
        channels_last=channels_last, cuda_graph=cuda_graph, compile=compile_, threads=threads,
        memory_limit_bytes=parse_bytes(memory_limit) if memory_limit else None, seed=seed,
        provider=provider,
    )
    request = TimeRequest(
        models=tuple(m.strip() for m in model.split(",") if m.strip()),
        precisions=tuple(parse_precisions(precision)),
        batches=parse_batches(batch), device=device, iterations=iterations,
        duration_s=parse_duration_s(duration), warmup_s=parse_duration_s(warmup),
        input_mode=input_mode, options=options,
        input_shape=parse_shape_option(input_shape) if input_shape else None,
        layers=layers, check=check, workload_python=workload_python, runtimes=runtimes,
    )
    if out is not None:
        from ..report.io import check_out_dir

        check_out_dir(out)  # before any work: a bad --out costs no run
    with _LazyProgress(enabled=not as_json) as bar:
        report = time_models(request, progress=bar.update)
    doc = report.to_dict()
    if out is not None:
        _write_json(out / "time.json", doc)
    if as_json:
        print_json(doc)
    else:
        _render(report, out)
    _exit_if_failed(report.rows)


def _exit_if_failed(rows: Sequence[TimeRow]) -> None:
    """Exit 2 once every row is written when a row's runtime failed (the others ran)."""
    from ..errors import HardwareError

    failed = [row for row in rows if row.status == "failed"]
    if failed:
        raise HardwareError(f"{len(failed)} of {len(rows)} row(s) failed; the others ran and "
                            "are written", hint="each failed row says why (`message` in --json)")


def models_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The built-in networks, one line each: input shape, parameters (millions), GMACs per image
    (conv + fc multiply-accumulates), description. --json has the exact parameter counts.
    Each also runs as sim:NAME on a simulated board (speed from its latency model)."""
    from ..workload.models_info import describe_models

    rows = describe_models()
    if as_json:
        print_json({"models": rows})
        return
    from .models_table import print_models

    con = console()
    print_models(con, rows)
    con.print("each also runs as sim:NAME on a simulated board (sim:resnet50: its speed from "
              "the board's latency model, no torch needed)", highlight=False)


def _render(report: TimeReport, out: Optional[Path]) -> None:
    from rich.table import Table

    con = console()
    if not con.is_terminal:
        con.width = max(con.width, 120)  # piped output: never truncate the figures
    table = Table(box=None)
    runtimes = any(row.runtime != "torch" for row in report.rows)
    columns = ("model", *(("runtime",) if runtimes else ()), "precision", "batch", "device",
               "img/s", "mean ms", "p50", "p90", "p99", "CV", "GFLOP/s", "status")
    for title in columns:
        table.add_column(title, justify="left" if title in ("model", "runtime", "precision",
                                                             "device", "status") else "right")
    for row in report.rows:
        r = row.result
        head = (row.model, *((_runtime_cell(row),) if runtimes else ()), row.precision,
                str(row.batch), row.device)
        if r is None:
            table.add_row(*head, *(["-"] * 7), row.status)
            continue
        lat = r.latency_ms
        table.add_row(*head, f"{r.images_per_s:.1f}", f"{lat.mean_ms:.2f}", f"{lat.p50_ms:.2f}",
                      f"{lat.p90_ms:.2f}", f"{lat.p99_ms:.2f}", f"{r.cv:.1%}",
                      "-" if r.gflops is None else f"{r.gflops:.1f}", row.status)
    print_table(con, table, key_columns=len(columns) - 8)  # model .. device: every part
    for row in report.rows:
        if row.layers is not None:
            _render_layers(con, row, row.layers)
    if report.checks:
        _render_checks(con, report.checks)
    from ..report.tables import grouped
    from .render import print_note

    def name(row: TimeRow) -> str:
        return f"{row.model}{'' if row.runtime == 'torch' else ' ' + row.runtime} " \
               f"{row.precision} batch {row.batch}"

    pairs = [(name(row), row.message) for row in report.rows if row.message]
    for row in report.rows:
        if row.result is not None:
            pairs += [(name(row), w) for w in row.result.warnings]
    # each kind of warning once, with the configurations it applies to
    notes = grouped(pairs, len(report.rows)) + list(report.warnings)
    err = console(stderr=True)
    for note in notes:
        print_note(err, "warning", note)
    for line in report.fastest:  # the answer last, after the warnings
        con.print(line)
    if out is not None:
        con.print(f"wrote {out / 'time.json'}")


def _runtime_cell(row: TimeRow) -> str:
    """'onnxruntime (cpu)': the runtime, and ONNX Runtime's provider where it ran."""
    from ..report.schema import runtime_label

    return runtime_label(row.result.workload if row.result is not None else
                         {"runtime": row.runtime})


def _render_layers(con: Console, row: TimeRow, lt: LayerTimes) -> None:
    from rich.table import Table

    train = lt.backward_ms is not None
    table = Table(title=f"{row.model} {row.precision} batch {row.batch}: per-layer, mean of "
                  f"{lt.iterations}", box=None)
    for title in ("layer", "type", "forward ms") + (("backward ms",) if train else ()):
        table.add_column(title, justify="right" if "ms" in title else "left")
    for layer in lt.layers:
        cells = [layer.name, layer.kind, f"{layer.forward_ms:.3f}"]
        if train:
            cells.append(f"{layer.backward_ms:.3f}")
        table.add_row(*cells)
    print_table(con, table)
    con.print(f"Average Forward pass: {lt.forward_ms:.3f} ms.")
    if lt.backward_ms is not None:
        con.print(f"Average Backward pass: {lt.backward_ms:.3f} ms.")
        con.print(f"Average Forward-Backward: {lt.forward_ms + lt.backward_ms:.3f} ms.")


def _render_checks(con: Console, checks: Sequence[Agreement]) -> None:
    from rich.table import Table

    table = Table(title="agreement with fp32 (same weights, same input)", box=None)
    for title in ("model", "precision", "batch", "top-1", "top-5", "max |diff|", "mean |diff|",
                  "max |fp32|"):
        table.add_column(title, justify="left" if title in ("model", "precision") else "right")
    for a in checks:
        table.add_row(a.model, a.precision, str(a.batch), f"{a.top1_agreement:.0%}",
                      f"{a.top5_agreement:.0%}", f"{a.max_abs_diff:.4g}",
                      f"{a.mean_abs_diff:.4g}", f"{a.reference_max_abs:.4g}")
    print_table(con, table)


def _write_json(path: Path, doc: object) -> None:
    """Atomic (a reader sees the old file or the whole new one); if the directory fails now,
    the results go to a fallback directory that the warning names."""
    from ..report.io import fallback_dir, write_json

    try:
        write_json(path, doc)
    except OSError as err:
        saved = write_json(fallback_dir() / path.name, doc)
        console(stderr=True).print(f"warning: could not write {path} ({err.strerror or err}); "
                                   f"results written to {saved}", soft_wrap=True,
                                   markup=False, highlight=False)


class _LazyProgress:
    """A progress bar on stderr that appears only once a run has lasted a few seconds."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.start = time.monotonic()
        self.progress: Optional[Progress] = None
        self.task: Optional[TaskID] = None

    def __enter__(self) -> _LazyProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def update(self, label: str, phase: str, fraction: float) -> None:
        if not self.enabled or time.monotonic() - self.start < _PROGRESS_AFTER_S:
            return
        if self.progress is None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     TimeElapsedColumn(), console=console(stderr=True),
                                     transient=True)
            self.progress.start()
            self.task = self.progress.add_task("", total=1.0)
        if self.task is not None:
            self.progress.update(self.task, description=f"{label} {phase}", completed=fraction)
