"""The workload child: builds a built-in network and times it under another interpreter
(JetPack 4: Python 3.6 and NVIDIA's torch 1.10 wheels), for a parent jetbench that owns the
clocks and the power window (`--workload-python`, parent side in workload/child/parent.py).

Run as a script: `PYTHON child/runner.py PROTOCOL_FD PARENT_PID`. It loads only this package's
3.6-clean modules (jetbench/__init__.py, workload/__init__.py, workload/timing/loop.py,
device_facts.py and the network definitions in models/), by file location, so nothing else of
the parent's environment is put on this interpreter's path. Keep this file to Python 3.6 syntax
(no dataclasses, no walrus, no `from __future__ import annotations`):
tests/test_workload_child.py runs vermin.

The protocol, one JSON object a line. The parent writes the request on stdin, then `go` when
its power window is open. The child writes on PROTOCOL_FD:
  {"event": "ready", ...}         built and on the device (python, torch, device)
  {"event": "progress", ...}      warm-up/timed progress (phase, fraction)
  {"event": "timed_start"}        the next iteration is the first timed one: waits for `go`
  {"event": "timed_end"}          the last timed iteration has been synchronised
  {"event": "result", ...}        latencies (s) of warm-up and timed iterations, wall s, warnings
  {"event": "error", ...}         kind (oom, unavailable, usage, torch, failed), message, hint
"""

import contextlib
import importlib
import importlib.util
import json
import os
import platform
import signal
import sys
import traceback
from types import ModuleType
from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple

if TYPE_CHECKING:  # annotations only: this file runs under Python 3.6, without typing's newer parts
    from torch import Tensor
    from torch.nn import Module

    from ..timing.loop import Done, Progress
    from .parent import ChildRequest

# (warm-up latencies, timed latencies, wall s, warnings), as timing/loop.warm_then_time gives them
Timed = Tuple[List[float], List[float], float, List[str]]

PACKAGE = "jetbench"
# What the child imports from the package: the vermin test checks exactly these (and models/).
PORTABLE_MODULES = ("jetbench.workload.timing.loop", "jetbench.workload.device_facts",
                    "jetbench.procs")


class ChildFailure(Exception):
    """A failure the parent turns into one of its errors (`kind` says which)."""

    def __init__(self, kind: str, message: str, hint: Optional[str] = None):
        Exception.__init__(self, message)
        self.kind = kind
        self.message = message
        self.hint = hint


class Channel:
    """The protocol: JSON lines out on the protocol fd, `go` in on stdin."""

    def __init__(self, fd: int):
        self.out = os.fdopen(fd, "w", buffering=1)

    def send(self, event: str, **fields: object) -> None:
        fields["event"] = event
        self.out.write(json.dumps(fields) + "\n")
        self.out.flush()

    def wait_go(self) -> None:
        line = sys.stdin.readline()
        if line.strip() != "go":
            raise SystemExit(3)  # the parent went away: nothing to report to


def load_package() -> None:
    """Registers the `jetbench` package from its directory (above workload/child/, here),
    without putting that directory's parent (perhaps a site-packages of another Python) on
    sys.path; submodules then import through the package's own __path__."""
    if PACKAGE in sys.modules:
        return
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
        del sys.path[0]  # the script's directory: its modules would shadow top-level ones
    root = os.path.dirname(os.path.dirname(here))  # workload/child/ -> jetbench/
    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(root, "__init__.py"), submodule_search_locations=[root])
    if spec is None or spec.loader is None:
        raise ChildFailure("failed", "jetbench's package does not load from " + root)
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    spec.loader.exec_module(module)


def import_torch() -> ModuleType:
    try:
        import torch
    except ImportError as err:
        raise ChildFailure("torch", f"PyTorch does not import under {sys.executable} "
                           f"({type(err).__name__}: {err})") from err
    return torch


def build_network(request: "ChildRequest") -> "Module":
    """The registry's factory ("module:function" in jetbench.workload.models) with its kwargs."""
    module_name, func_name = request["factory"].split(":")
    module = importlib.import_module("jetbench.workload.models." + module_name)
    return getattr(module, func_name)(seed=request["seed"], **request["kwargs"])


def to_precision(torch: ModuleType, portable: ModuleType, net: "Module", example: "Tensor",
                 precision: str, device: str) -> "Tuple[Module, Tensor]":
    if precision == "fp32":
        return net, example
    if precision == "tf32":
        reason = portable.tf32_unavailable_reason(torch, device)
        if reason is not None:
            raise ChildFailure("unavailable", reason, "tf32 on Ampere or newer (Orin, Thor)")
        return net, example
    if precision in ("fp16", "bf16"):
        if precision == "bf16" and portable.is_cuda(device):
            reason = portable.bf16_unavailable_reason(torch, device)
            if reason is not None:
                raise ChildFailure("unavailable", reason, "Ampere (Orin) or newer has bf16")
        dtype = torch.float16 if precision == "fp16" else torch.bfloat16
        return net.to(dtype), example.to(dtype)
    raise ChildFailure("unavailable", f"{precision} is not offered through --workload-python "
                       "(fp32, tf32, fp16 and bf16 are)", "measure int8 without --workload-python")


def run(request: "ChildRequest", channel: Channel) -> None:
    load_package()
    loop = importlib.import_module(PORTABLE_MODULES[0])
    portable = importlib.import_module(PORTABLE_MODULES[1])
    torch = import_torch()
    try:
        device = portable.resolve_device(torch, request["device"])
    except portable.DeviceProblem as problem:
        raise ChildFailure("usage", f"{problem.message} (torch {torch.__version__} under "
                           f"{sys.executable})", problem.hint) from None
    cuda = portable.is_cuda(device)
    threads = request.get("threads")
    if threads:
        torch.set_num_threads(int(threads))
    torch.backends.cudnn.enabled = request["cudnn"]
    torch.backends.cudnn.benchmark = request["cudnn_benchmark"]
    portable.set_fp32_math(torch, request["precision"] == "tf32")  # fp32 is IEEE fp32
    index = portable.cuda_index(torch, device) if cuda else None
    on_device = torch.cuda.device(index) if cuda else _nothing()
    try:
        with on_device:
            net = build_network(request).eval().to(device)
            example = portable.make_input(torch, request["input_mode"], request["batch"],
                                          request["input_shape"], request["seed"]).to(device)
            if request["channels_last"] and example.dim() == 4:
                # torch's stubs leave out Module.to's memory_format (its documentation has it)
                net = net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
                example = example.contiguous(memory_format=torch.channels_last)
            net, example = to_precision(torch, portable, net, example, request["precision"],
                                        device)
            channel.send("ready", device=device, python=platform.python_version(),
                         executable=sys.executable, torch=str(torch.__version__))
            timed = _time(torch, loop, net, example, index, request, channel)
    except (RuntimeError, MemoryError, ValueError) as err:
        if portable.is_missing_kernel(err):
            raise ChildFailure("unavailable", f"{request['precision']} has no kernel for this "
                               f"network on {device} in torch {torch.__version__} "
                               f"({_first_line(err)})") from err
        if not portable.is_out_of_memory(torch, err):
            raise
        raise ChildFailure("oom", f"out of memory ({_first_line(err)})",
                           "use a smaller --batch") from err
    warm, times, wall_s, warnings = timed
    channel.send("result", warm_s=warm, timed_s=times, wall_s=wall_s, warnings=warnings)


def _time(torch: ModuleType, loop: ModuleType, net: "Module", example: "Tensor",
          index: Optional[int], request: "ChildRequest", channel: Channel) -> Timed:
    """(warm-up latencies, timed latencies, wall s, warnings); `index` the CUDA device or None."""
    if index is not None:
        def sync() -> None:
            torch.cuda.synchronize(index)

        def run_loop(done: "Done", phase: str, progress: "Optional[Progress]"
                     ) -> Tuple[List[float], float]:
            return loop.cuda_loop(torch, step, sync, done, phase, progress)
    else:
        def run_loop(done: "Done", phase: str, progress: "Optional[Progress]"
                     ) -> Tuple[List[float], float]:
            return loop.host_loop(step, _nothing_to_sync, done, phase, progress)

    def step() -> object:
        return net(example)

    def timed_start() -> None:
        channel.send("timed_start")
        channel.wait_go()

    def progress(phase: str, fraction: float) -> None:
        channel.send("progress", phase=phase, fraction=fraction)

    with torch.inference_mode():
        return loop.warm_then_time(
            run_loop, request["iterations"], request["duration_s"], request["warmup_s"],
            request["warmup_iterations"],
            loop.warmup_cap_s(request["warmup_s"], request["max_warmup_s"]),
            timed_start, lambda: channel.send("timed_end"), progress)


def _nothing_to_sync() -> None:
    return None


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def main(argv: List[str]) -> int:
    fd, parent_pid = int(argv[1]), int(argv[2])
    load_package()
    procs = importlib.import_module(PACKAGE + ".procs")
    if not procs.die_with_parent(signal.SIGKILL, parent_pid):  # with no prctl, the closed
        raise SystemExit(3)  # stdin ends the child at its next `go`
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # so is a SIGTERM sent to the group
    channel = Channel(fd)
    try:
        run(json.loads(sys.stdin.readline()), channel)
    except ChildFailure as failure:
        channel.send("error", kind=failure.kind, message=failure.message, hint=failure.hint)
        return 1
    except Exception as err:  # noqa: BLE001 - any other failure goes back as a message
        traceback.print_exc()
        channel.send("error", kind="failed", message=f"{type(err).__name__}: {_first_line(err)}",
                     hint=None)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
