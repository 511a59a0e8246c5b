"""`jetbench time` as a library call: every model x precision x batch, one row each, with
out-of-memory and unavailable precisions recorded as rows, and advice when a precision is
slower than FP32 on this device."""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Protocol, Sequence, Tuple, Union

from ..errors import NOT_RUN, JetbenchError, OutOfMemory, UsageError, first_line, not_run
from ..report.digits import noise_words, significant
from ..report.schema import TIME_SCHEMA
from ..report.verdict import differ
from ..workload.base import PointSpec, RunOptions
from ..workload.build import build_workload
from ..workload.check import Agreement, check_precisions
from ..workload.child.parent import ChildWorkload, run_in_child
from ..workload.layers import LayerTimes, time_layers
from ..workload.model_arg import ONNX, PYTORCH, SIM, InputShape, model_kind
from ..workload.pytorch import resolve_device
from ..workload.runtimes import DEFAULT, TORCH, check_runtimes
from ..workload.timing.plan import TimingPlan
from ..workload.timing.runner import TimingResult, run_timed

SCHEMA = TIME_SCHEMA
SWEEP = "sweep"
SWEEP_MAX_BATCH = 1024  # a sweep doubles the batch up to this, or until out of memory
_ADVICE_MARGIN = 0.10  # slower than fp32 by more than run-to-run noise

# on_row(row) after each configuration; progress(label, phase, fraction) during one
RowCallback = Callable[["TimeRow"], None]
SessionProgress = Callable[[str, str, float], None]


@dataclass(frozen=True)
class TimeRequest:
    """What to time. `batches` is a list of sizes or "sweep" (1, 2, 4, ... until OOM)."""

    models: Tuple[str, ...]
    precisions: Tuple[str, ...] = ("fp32",)
    batches: Union[Tuple[int, ...], str] = (1,)
    device: str = "auto"
    iterations: int = 10
    duration_s: float = 3.0
    warmup_s: float = 1.0
    input_mode: str = "constant"
    options: RunOptions = field(default_factory=RunOptions)
    input_shape: Optional[InputShape] = None  # named inputs for ONNX models / engines
    layers: bool = False
    layer_iterations: int = 10
    check: bool = False
    sweep_max_batch: int = SWEEP_MAX_BATCH
    workload_python: Optional[str] = None  # time in a child under this interpreter (child/)
    runtimes: Tuple[str, ...] = DEFAULT  # --runtime (workload/runtimes/)


@dataclass(frozen=True)
class TimeRow:
    """One configuration. status: ok, oom, unavailable, mismatch (the runtime's outputs
    differ from PyTorch's: not timed)."""

    model: str
    precision: str
    batch: int
    device: str
    status: str
    result: Optional[TimingResult] = None
    layers: Optional[LayerTimes] = None
    message: Optional[str] = None
    runtime: str = TORCH
    mode: str = "inference"  # or train (forward+backward)

    @property
    def images_per_s(self) -> Optional[float]:
        return self.result.images_per_s if self.result else None

    def to_dict(self) -> Dict[str, object]:  # a row of `jetbench time --json`
        doc: Dict[str, object]
        if self.result is not None:
            doc = dict(self.result.to_dict())
        else:
            doc = {"workload": {"model": self.model, "precision": self.precision,
                                "batch": self.batch, "device": self.device,
                                "runtime": self.runtime, "mode": self.mode},
                   "throughput": None, "warnings": []}
        doc = {"status": self.status, **doc}
        if self.message:
            doc["message"] = self.message
        if self.layers is not None:
            doc["layers"] = self.layers.to_dict()
        return doc


@dataclass(frozen=True)
class TimeReport:
    rows: Tuple[TimeRow, ...]
    checks: Tuple[Agreement, ...]
    warnings: Tuple[str, ...]
    device: str
    fastest: Tuple[str, ...] = ()  # per configuration timed under several runtimes

    def to_dict(self) -> Dict[str, object]:
        """The `jetbench time --json` document."""
        return {"schema": SCHEMA, "device": self.device,
                "results": [row.to_dict() for row in self.rows],
                "check": [a.to_dict() for a in self.checks],
                "warnings": list(self.warnings), "fastest": list(self.fastest)}


_BYTE_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 2**10, "m": 1e6, "mb": 1e6,
               "mib": 2**20, "g": 1e9, "gb": 1e9, "gib": 2**30}


def parse_bytes(text: str) -> int:
    """'512MiB', '2GB', '1.5GiB', '1000000' -> bytes."""
    import re

    match = re.match(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*([a-z]*)\s*$", text.lower())
    if not match or match.group(2) not in _BYTE_UNITS:
        raise UsageError(f"not a size: {text!r}", hint="use e.g. 512MiB or 2GB")
    return int(float(match.group(1)) * _BYTE_UNITS[match.group(2)])


def parse_batches(text: str, sweep: bool = True) -> Union[Tuple[int, ...], str]:
    """'1,32' -> (1, 32); 'sweep' -> 'sweep' (`time`'s alone: `sweep=False` for measure and
    sweep, whose hints then never offer it)."""
    if sweep and text.strip().lower() == SWEEP:
        return SWEEP
    hint = "use e.g. 1,32 or sweep" if sweep else "use e.g. 1,2,4,8"
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as err:
        if text.strip().lower() == SWEEP:
            raise UsageError("--batch sweep belongs to `jetbench time`; give sizes, e.g. "
                             "1,2,4,8") from err
        raise UsageError(f"not a batch list: {text!r}", hint=hint) from err
    if not sizes or min(sizes) < 1:
        raise UsageError(f"not a batch list: {text!r} (batch sizes start at 1)", hint=hint)
    return sizes


def time_models(request: TimeRequest, on_row: Optional[RowCallback] = None,
                progress: Optional[SessionProgress] = None) -> TimeReport:
    """Runs every configuration of `request` in order (model, then precision, then batch)."""
    kinds = {model_kind(m) for m in request.models}
    if SIM in kinds:
        raise UsageError("`time` runs networks on this machine; a sim:NAME network runs on a "
                         "simulated board", hint="use measure, sweep or demo with --root on a "
                         "board from `jetbench sim create`")
    if kinds != {PYTORCH} and (request.layers or request.check):
        raise UsageError("--layers and --check apply to PyTorch networks only",
                         hint="time ONNX models and TensorRT engines without them")
    if request.workload_python and (request.layers or request.check):
        raise UsageError("--workload-python times whole networks: not with --layers or --check")
    check_runtimes(request.runtimes, request.models, request.options.provider,
                   request.options.compile, request.workload_python)
    if request.layers and request.runtimes != DEFAULT:
        raise UsageError("--layers times PyTorch eager's layers: not with --runtime")
    # The child's torch resolves the device (this process may have no torch), and ONNX Runtime
    # picks its own from its providers.
    no_torch_here = request.workload_python or kinds == {ONNX}
    device = request.device if no_torch_here else resolve_device(request.device)
    rows: List[TimeRow] = []
    checks: List[Agreement] = []
    for model in request.models:
        if request.check:
            checks += _check(request, model, device)
        for runtime in request.runtimes:
            for precision in request.precisions:
                for batch in _batches(request.batches, request.sweep_max_batch):
                    row = _one(request, model, runtime, precision, batch, device, progress)
                    rows.append(row)
                    if on_row is not None:
                        on_row(row)
                    if row.status != "ok" and request.batches == SWEEP:
                        break  # the sweep's end: carry on with the next configuration
                    if row.status == "unavailable":
                        break  # same answer for every batch size
    if request.workload_python:  # the device the child resolved, where one row ran
        device = next((row.device for row in rows if row.status == "ok"), device)
    return TimeReport(tuple(rows), tuple(checks), tuple(precision_advice(rows)), device,
                      tuple(fastest_runtime(rows)))


def _batches(batches: Union[Tuple[int, ...], str], largest: int) -> Sequence[int]:
    if isinstance(batches, str):  # SWEEP
        sizes, b = [], 1
        while b <= largest:
            sizes.append(b)
            b *= 2
        return sizes
    return list(batches)


def _one(request: TimeRequest, model: str, runtime: str, precision: str, batch: int,
         device: str, progress: Optional[SessionProgress]) -> TimeRow:
    label = f"{model} {precision} b{batch}" + ("" if runtime == TORCH else f" {runtime}")
    options = request.options.for_runtime(runtime, model)
    report = None if progress is None else (lambda phase, f: progress(label, phase, f))
    workload = None
    try:
        if request.workload_python:
            work = ChildWorkload(request.workload_python, model, precision, batch, device,
                                 request.input_mode, request.options, request.input_shape)
            result = run_in_child(work, TimingPlan(iterations=request.iterations,
                                                   duration_s=request.duration_s,
                                                   warmup_s=request.warmup_s, progress=report))
            return TimeRow(model, precision, batch, str(result.workload["device"]), "ok", result)
        if report:
            report("build", 0.0)
        workload = build_workload(model, precision, batch, device, request.input_mode,
                                  options, request.input_shape)
        result = run_timed(workload, TimingPlan(iterations=request.iterations,
                                                duration_s=request.duration_s,
                                                warmup_s=request.warmup_s, progress=report))
        layers = time_layers(workload, request.layer_iterations) if request.layers else None
        return TimeRow(model, precision, batch, workload.device, "ok", result, layers,
                       runtime=runtime, mode=options.mode)
    except NOT_RUN as err:
        status, message = not_run(err)
        return TimeRow(model, precision, batch, device, status, message=message,
                       runtime=runtime, mode=options.mode)
    except UsageError:
        if runtime == TORCH:
            raise  # the reference itself cannot run: the same answer for every row
        return _failed(model, precision, batch, device, runtime, options.mode)
    except Exception:  # noqa: BLE001 - one runtime's failure is its row, never the run's end
        return _failed(model, precision, batch, device, runtime, options.mode)
    finally:
        del workload
        gc.collect()


def _failed(model: str, precision: str, batch: int, device: str, runtime: str,
            mode: str) -> TimeRow:
    """The row of a configuration whose build, load, check or run raised (the exception being
    handled): `failed`, with the first line of its reason."""
    err = sys.exc_info()[1]
    assert err is not None
    hint = getattr(err, "hint", None)
    named = first_line(err) if isinstance(err, JetbenchError) else \
        f"{type(err).__name__}: {first_line(err)}"  # a library's (or a bug's) own type
    message = named + (f" ({hint})" if hint else "")
    return TimeRow(model, precision, batch, device, "failed", message=message, runtime=runtime,
                   mode=mode)


def _check(request: TimeRequest, model: str, device: str) -> List[Agreement]:
    batch = 1 if isinstance(request.batches, str) else min(request.batches)  # str: SWEEP
    try:
        return check_precisions(model, request.precisions, batch, device, request.input_mode,
                                request.options, request.input_shape, skip_unavailable=True)
    except OutOfMemory:
        return []  # the timing rows say so


class SpeedRow(PointSpec, Protocol):
    """What the advice reads of a row: a TimeRow, or a measured result's (run/result.py)."""

    @property
    def device(self) -> str: ...
    @property
    def runtime(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def images_per_s(self) -> Optional[float]: ...


Group = Tuple[Union[str, int], ...]  # what rows are compared within (model, batch...)


def _cv_pct(row: SpeedRow) -> Optional[float]:
    """A row's latency CV in % (the spread its img/s is compared with), None if unknown."""
    cv = getattr(row, "cv", None)  # a measured result's; a TimeRow's is its TimingResult's
    if cv is None:
        cv = getattr(getattr(row, "result", None), "cv", None)
    return None if cv is None else float(cv) * 100


def _speeds(rows: Sequence[SpeedRow], group: Callable[[SpeedRow], Group],
            name: Callable[[SpeedRow], str]
            ) -> Dict[Group, Dict[str, Tuple[float, Optional[float]]]]:
    """(img/s, latency CV %) of the rows that ran, grouped by `group`, keyed within a group
    by `name`."""
    out: Dict[Group, Dict[str, Tuple[float, Optional[float]]]] = {}
    for row in rows:
        if row.status == "ok" and row.images_per_s:
            out.setdefault(group(row), {})[name(row)] = (row.images_per_s, _cv_pct(row))
    return out


NOISE_HINT = "lengthen --duration (and lock the clocks: `jetbench maxperf`)"


def within_noise(names: Sequence[str], figures: Sequence[Tuple[float, Optional[float]]],
                 what: str) -> str:
    """'fp16 and fp32 are within noise for ...: CV 69%, lengthen --duration': the line said
    instead of a comparison whose intervals overlap (digits.separated)."""
    worst = max((pct for _, pct in figures if pct is not None), default=None)
    listed = " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + \
        names[-1]
    return f"{listed} are within noise {what}: {noise_words(worst)}, {NOISE_HINT}"


def precision_advice(rows: Sequence[SpeedRow]) -> List[str]:
    """For each model/batch/device: every precision slower than FP32, how much slower, and
    the fastest choice measured (the seed's "FP16 is 15x slower on the CPU"); where the two
    figures' spreads overlap (digits.separated), that they are within noise instead."""
    groups = _speeds(rows, lambda r: (r.model, r.batch, r.device, r.runtime),
                     lambda r: r.precision)
    advice: List[str] = []
    for (model, batch, device, runtime), speeds in groups.items():
        where = device if runtime == TORCH else f"{device} under {runtime}"
        if "fp32" not in speeds:
            continue
        fp32, fp32_pct = speeds["fp32"]
        best = max(speeds, key=lambda p: speeds[p][0])
        for precision, (ips, pct) in speeds.items():
            if precision == "fp32" or ips >= fp32 * (1 - _ADVICE_MARGIN):
                continue
            apart = differ(ips, pct, fp32, fp32_pct)
            if apart is None:  # a spread unknown: no verdict (report/verdict.py)
                advice.append(f"no verdict on {precision} against fp32 for {model} batch "
                              f"{batch} on {where} ({ips:.1f} vs {fp32:.1f} img/s): their "
                              "spread is unknown (no timed iterations)")
                continue
            if not apart:
                advice.append(within_noise(
                    [precision, "fp32"], [speeds[precision], speeds["fp32"]],
                    f"for {model} batch {batch} on {where} ({ips:.1f} vs {fp32:.1f} img/s)"))
                continue
            tip = f"use {best} ({speeds[best][0]:.1f} img/s)"
            if best == "fp32" and "bf16" not in speeds and device == "cpu":
                tip += "; bf16 was not measured: try it"
            advice.append(
                f"{precision} is {fp32 / ips:.1f}x slower than fp32 for {model} batch {batch} "
                f"on {where} ({ips:.1f} vs {fp32:.1f} img/s): this device has no fast "
                f"{precision} kernels; {tip}"
            )
    return advice


def fastest_runtime(rows: Sequence[TimeRow]) -> List[str]:
    """For each model/precision/batch/device timed under several runtimes: the fastest, and
    how much faster than PyTorch eager (the Addfor table's question, one line each); where
    the fastest's spread overlaps another runtime's (digits.separated), which are within
    noise instead."""
    groups = _speeds(rows, lambda r: (r.model, r.precision, r.batch, r.device),
                     lambda r: r.runtime)
    lines: List[str] = []
    for (model, precision, batch, device), speeds in groups.items():
        if len(speeds) < 2:
            continue
        best = max(speeds, key=lambda r: speeds[r][0])
        others = ", ".join(f"{r} {significant(speeds[r][0])}" for r in speeds if r != best)
        what = f"for {model} {precision} batch {batch} on {device}"
        apart = {r: differ(*speeds[best], *speeds[r]) for r in speeds if r != best}
        if None in apart.values():  # a spread unknown: no verdict (report/verdict.py)
            lines.append(f"no verdict on the fastest {what}: a spread is unknown ({others}; "
                         f"{best} {significant(speeds[best][0])} img/s)")
            continue
        tied = [r for r, sep in apart.items() if not sep]
        if tied:
            lines.append(within_noise([best, *tied], [speeds[r] for r in [best, *tied]],
                                      f"{what} ({significant(speeds[best][0])} img/s; "
                                      f"{others})"))
            continue
        line = (f"fastest {what}: {best} ({significant(speeds[best][0])} img/s; {others})")
        if best != TORCH and TORCH in speeds:
            line += f", {speeds[best][0] / speeds[TORCH][0]:.2f}x PyTorch eager"
        lines.append(line)
    return lines
