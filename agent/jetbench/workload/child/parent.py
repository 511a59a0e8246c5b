"""`--workload-python PYTHON`: the workload timed in a child process under another interpreter
(JetPack 4's Python 3.6 with NVIDIA's torch 1.10 wheel), while this process keeps the clocks,
the sampler and the power window.

`run_in_child()` is `run_timed()` for that case: same arguments, same callbacks (the window
opens in `on_timed_start` before the child starts its first timed iteration, and closes in
`on_timed_end` as soon as the child says the last one has been synchronised), same
TimingResult. The child is child/runner.py; the protocol is described there.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Dict, List, Optional, Tuple, TypedDict

from ...errors import HardwareError, JetbenchError, OutOfMemory, UsageError
from ..base import RunOptions
from ..custom import looks_custom
from ..model_arg import InputShape, torch_shape
from ..precision import PrecisionUnavailable
from ..registry import get_spec, is_builtin
from ..timing.plan import TimingPlan
from ..timing.runner import TimingResult, timing_result

RUNNER_PATH = Path(__file__).with_name("runner.py")
TORCH_HINT = ("install PyTorch for that interpreter: on JetPack 4.6, NVIDIA's torch 1.10 wheel "
              "for Python 3.6 (https://developer.nvidia.com/embedded/downloads, "
              "'PyTorch for Jetson')")
_STDERR_TAIL_LINES = 6
_EXIT_WAIT_S = 10.0


@dataclass(frozen=True)
class ChildWorkload:
    """What the child builds: a built-in network, as `build_workload()` takes it."""

    python: str
    model: str
    precision: str = "fp32"
    batch: int = 1
    device: str = "auto"
    input_mode: str = "constant"
    options: RunOptions = field(default_factory=RunOptions)
    input_shape: Optional[InputShape] = None  # named inputs are refused (check_child)

    @property
    def label(self) -> str:
        return f"{self.model} {self.precision} batch {self.batch}"


def check_child_workload(work: ChildWorkload) -> None:
    """What the child cannot do is refused before anything starts."""
    what = f"--workload-python {work.python}"
    if not is_builtin(work.model):
        if not looks_custom(work.model):
            get_spec(work.model)  # a misspelt name: "unknown model", with its suggestion
        raise UsageError(f"{what} runs the built-in networks only, not {work.model!r}",
                         hint="`jetbench models` lists them")
    if work.input_shape is not None and not isinstance(work.input_shape, tuple):
        raise UsageError(f"{what}: a built-in network takes one --input-shape (C,H,W), not "
                         "named inputs")
    opts = work.options
    refused = [name for name, on in (("--mode train", opts.mode != "inference"),
                                     ("--cuda-graph", opts.cuda_graph),
                                     ("--compile", opts.compile),
                                     ("--memory-limit", opts.memory_limit_bytes is not None))
               if on]
    if refused:
        raise UsageError(f"{what}: not with {', '.join(refused)}",
                         hint="run without --workload-python for these")


class ChildRequest(TypedDict):
    """The request line the child reads (child/runner.py): its network and how to time it."""
    factory: str  # "module:function" in workload/models
    kwargs: Dict[str, object]
    seed: int
    input_shape: List[int]
    precision: str
    batch: int
    device: str
    input_mode: str
    threads: Optional[int]
    cudnn: bool
    cudnn_benchmark: bool
    channels_last: bool
    iterations: int
    duration_s: float
    warmup_s: float
    warmup_iterations: int
    max_warmup_s: Optional[float]


class ChildEvent(TypedDict, total=False):
    """A line the child writes (child/runner.py's protocol), as json.loads reads it."""
    event: str
    phase: str  # progress
    fraction: float
    device: str  # ready
    python: str
    executable: str
    torch: str
    warm_s: List[float]  # result
    timed_s: List[float]
    wall_s: float
    warnings: List[str]
    kind: str  # error: oom, unavailable, usage, torch, failed
    message: str
    hint: Optional[str]


def child_request(work: ChildWorkload, plan: TimingPlan) -> ChildRequest:
    """The request line: the registry's factory for the network (the one place that names it)."""
    spec = get_spec(work.model)
    opts = work.options
    return {"factory": spec.factory, "kwargs": dict(spec.kwargs), "seed": opts.seed,
            "input_shape": list(torch_shape(work.input_shape) or spec.input_shape),
            "precision": work.precision, "batch": work.batch, "device": work.device,
            "input_mode": work.input_mode, "threads": opts.threads, "cudnn": opts.cudnn,
            "cudnn_benchmark": opts.cudnn_benchmark, "channels_last": opts.channels_last,
            "iterations": plan.iterations, "duration_s": plan.duration_s,
            "warmup_s": plan.warmup_s, "warmup_iterations": plan.warmup_iterations,
            "max_warmup_s": plan.max_warmup_s}


def run_in_child(work: ChildWorkload, plan: TimingPlan = TimingPlan()) -> TimingResult:
    """`run_timed()` of `work` in a child under `work.python`. Raises OutOfMemory,
    PrecisionUnavailable, UsageError or HardwareError with the child's message; the child is
    killed whenever this returns or raises (and dies with this process: PR_SET_PDEATHSIG)."""
    plan.check()
    check_child_workload(work)
    request = child_request(work, plan)
    with tempfile.TemporaryFile() as output:
        proc, events = _start(work.python, output)
        doc: ChildEvent = {}
        try:
            _send(proc, json.dumps(request))
            ready, doc = _converse(proc, events, plan)
        except BrokenPipeError:  # the child died before reading: its exit says why
            ready, doc = {}, {"event": "exit"}
        finally:
            events.close()
            _stop(proc, graceful=bool(doc))
        if doc.get("event") == "result":
            return _result(work, request, ready, doc)
        raise _failure(work, doc, proc.returncode, _tail(output))


def _start(python: str, output: IO[bytes]) -> Tuple[subprocess.Popen, IO[str]]:
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            [python, str(RUNNER_PATH), str(write_fd), str(os.getpid())],
            stdin=subprocess.PIPE, stdout=output, stderr=output, pass_fds=(write_fd,),
            start_new_session=True,  # Ctrl-C reaches jetbench only; it ends the child
            universal_newlines=True)
    except OSError as err:
        os.close(read_fd)
        raise UsageError(f"--workload-python {python}: cannot start it "
                         f"({err.strerror or err})",
                         hint="give the path of a Python interpreter, e.g. /usr/bin/python3"
                         ) from err
    finally:
        os.close(write_fd)
    return proc, os.fdopen(read_fd, "r")


def _send(proc: subprocess.Popen, line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def _converse(proc: subprocess.Popen, events: IO[str],
              plan: TimingPlan) -> Tuple[ChildEvent, ChildEvent]:
    """Follows the child's lines to its result or error: (its `ready` line, the last line)."""
    ready: ChildEvent = {}
    for line in events:
        try:
            doc: ChildEvent = json.loads(line)
            event = doc.get("event")
        except (ValueError, AttributeError):
            return ready, {"event": "exit", "message": f"not the protocol: {line.strip()[:80]!r}"}
        if event == "ready":
            ready = doc
        elif event == "progress":
            if plan.progress is not None:
                plan.progress(doc["phase"], doc["fraction"])
        elif event == "timed_start":
            if plan.on_timed_start is not None:
                plan.on_timed_start()
            _send(proc, "go")
        elif event == "timed_end":
            if plan.on_timed_end is not None:
                plan.on_timed_end()
        elif event in ("result", "error"):
            return ready, doc
    return ready, {"event": "exit"}


def _stop(proc: subprocess.Popen, graceful: bool) -> None:
    """Lets a child that has said its last line exit; kills one interrupted mid-run at once."""
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:
            pass
    if graceful:
        try:
            proc.wait(timeout=_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _result(work: ChildWorkload, request: ChildRequest, ready: ChildEvent,
            doc: ChildEvent) -> TimingResult:
    spec = get_spec(work.model)
    shape = tuple(request["input_shape"])
    macs = spec.macs_per_image if shape == spec.input_shape and spec.macs_per_image else None
    describe: Dict[str, object] = {
                "model": work.model, "precision": work.precision, "batch": work.batch,
                "device": ready.get("device", work.device), "mode": "inference",
                "input": work.input_mode, "input_shape": list(shape),
                "gmacs_per_image": None if macs is None else macs / 1e9,
                "params": spec.params,
                "child": {"python": ready.get("executable"),
                          "python_version": ready.get("python"), "torch": ready.get("torch")}}
    flops = None if macs is None else 2.0 * macs * work.batch
    return timing_result(describe, work.batch, flops, doc["timed_s"], doc["wall_s"],
                         doc["warm_s"], doc.get("warnings", []))


def _failure(work: ChildWorkload, doc: ChildEvent, returncode: Optional[int],
             output: str) -> JetbenchError:
    """The jetbench error for the child's `error` line, or for a child that ended without one."""
    where = f"--workload-python {work.python}"
    kind, message, hint = doc.get("kind"), doc.get("message", ""), doc.get("hint")
    if kind == "oom":
        return OutOfMemory(f"{work.label}: {message}", hint=hint)
    if kind == "unavailable":
        return PrecisionUnavailable(message, hint=hint)
    if kind == "usage":
        return UsageError(message, hint=hint)
    if kind == "torch":
        return HardwareError(f"{where}: {message}", hint=TORCH_HINT)
    if kind == "failed":
        return UsageError(f"{work.label}: the network failed in the child under {where} "
                          f"({message})",
                          hint="check --input-shape and --batch for this network")
    detail = f"; {message}" if message else ""
    detail += f"; its output ends: {output}" if output else ""
    return HardwareError(f"{work.label}: the workload child under {where} ended without a "
                         f"result (exit status {returncode}){detail}",
                         hint="is it Python 3.6 or newer?")


def _tail(output: IO[bytes]) -> str:
    output.seek(0)
    lines = output.read().decode("utf-8", "replace").strip().splitlines()
    return " | ".join(line.strip() for line in lines[-_STDERR_TAIL_LINES:])
