"""`measure --devices N`: the same command once per device, started by torch.distributed's
elastic launcher (what torchrun runs), each process told its rank by the environment.

The launcher forwards Ctrl-C (and SIGTERM) to every rank and waits for them; a rank that dies
makes it stop the others. Rank 0 prints the run's table, errors and notes; the launcher adds
only what it alone knows (a rank killed by a signal) and exits with rank 0's status. Each rank
reports its status as it leaves (teardown.leave): when every rank did, the run is rank 0's
status, whatever the launcher saw of the processes' last moments.
"""

from __future__ import annotations

import inspect
import logging
import os
import signal
import sys
import tempfile
from typing import Callable, Dict, List, Optional, TypeVar

from ..errors import EXIT_HARDWARE, HardwareError, RankFailed, set_interrupt_notes
from ..workload._torch import import_torch
from .teardown import DONE_DIR_ENV, reported

SHUTDOWN_TIMEOUT_S = 20  # after Ctrl-C: the ranks' time to restore and exit before SIGKILL


def launch_ranks(argv: List[str], count: int) -> int:
    """Run `python -m jetbench ARGV` as `count` ranks on this node; rank 0's exit status."""
    require_distributed()
    # The launcher's own log lines (workers closing, exit codes) repeat what rank 0 says.
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    os.environ["JETBENCH_LAUNCHER"] = "1"  # inherited by the ranks (launcher_name)
    try:
        return _launch(argv, count)
    finally:
        os.environ.pop("JETBENCH_LAUNCHER", None)


C = TypeVar("C")  # torch's LaunchConfig (its shape differs between torch versions)


def launch_config(config_class: Callable[..., C], logs_specs_class: Optional[Callable[..., object]],
                  log_dir: str, count: int) -> C:
    """The launcher's LaunchConfig from what the installed torch has: `logs_specs`
    (DefaultLogsSpecs, torch 2.3+) or `log_dir` (before), `shutdown_timeout` only where it
    exists (newest torch; before, the launcher's own grace applies). JetPack's torch wheels
    (1.x to 2.x) have the older shapes."""
    fields = set(inspect.signature(config_class).parameters)
    kwargs: Dict[str, object] = dict(
        min_nodes=1, max_nodes=1, nproc_per_node=count,
        rdzv_backend="c10d", rdzv_endpoint="localhost:0",  # a free port: runs never collide
        run_id=f"jetbench-{os.getpid()}", max_restarts=0, monitor_interval=0.1,
        start_method="spawn")
    if "logs_specs" in fields and logs_specs_class is not None:
        kwargs["logs_specs"] = logs_specs_class(log_dir=log_dir)
    elif "log_dir" in fields:
        kwargs["log_dir"] = log_dir
    if "shutdown_timeout" in fields:
        kwargs["shutdown_timeout"] = SHUTDOWN_TIMEOUT_S
    return config_class(**kwargs)


def _launch(argv: List[str], count: int) -> int:
    import torch.distributed.elastic.multiprocessing as elastic_mp
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    signal_exception = getattr(elastic_mp, "SignalException", None)
    if signal_exception is None:  # older torch: only in the api module
        from torch.distributed.elastic.multiprocessing.api import (
            SignalException as signal_exception,
        )

    with tempfile.TemporaryDirectory(prefix="jetbench-ranks-") as logs:
        done = os.path.join(logs, "done")  # each rank's status as it left (teardown.py)
        os.mkdir(done)
        os.environ[DONE_DIR_ENV] = done  # inherited by the ranks
        config = launch_config(LaunchConfig, getattr(elastic_mp, "DefaultLogsSpecs", None),
                               logs, count)
        try:
            elastic_launch(config, sys.executable)("-m", "jetbench", *argv)
            return 0
        except signal_exception as err:
            set_interrupt_notes([f"the {count} ranks were stopped ({err.sigval.name} "
                                 "forwarded); rank 0 reported the clocks above"])
            raise KeyboardInterrupt from None
        except ChildFailedError as err:
            return _run_status(done, count,
                               {rank: f.exitcode for rank, f in err.failures.items()})
        finally:
            os.environ.pop(DONE_DIR_ENV, None)


def require_distributed() -> None:
    """torch with torch.distributed, or a message saying what is missing."""
    if not import_torch().distributed.is_available():
        raise HardwareError("this PyTorch build has no torch.distributed: several devices "
                            "need it", hint="install a build with distributed support "
                            "(the PyPI and NVIDIA Jetson wheels have it)")


def _run_status(done: str, count: int, codes: Dict[int, int]) -> int:
    """The status of a run the launcher saw fail (`codes`: the failed ranks' exit codes).
    When every rank reported that it got to its end (teardown.leave), rank 0's reported status:
    a signal in a rank's last moments, or the launcher's SIGTERM to the others after it, does
    not turn a finished run into a failure. Otherwise, as the exit codes say."""
    reports = reported(done, count)
    return reports[0] if reports is not None else _exit_status(codes)


def _exit_status(codes: Dict[int, int]) -> int:
    """The run's status from the failed ranks' exit codes (negative: ended by that signal).
    Rank 0 speaks for the run when it could exit by itself (the launcher then stopped the
    others with SIGTERM, which says nothing); a rank killed by a signal could not say so."""
    first = codes.get(0)
    if first is None or first < 0:
        rank, code = (0, first) if first is not None else min(codes.items())
        if code < 0:
            raise RankFailed(f"rank {rank} was ended by {signal.Signals(-code).name}",
                             hint="if the clocks are still pinned, `jetbench restore` puts "
                                  "them back")
        return code or EXIT_HARDWARE
    return first or EXIT_HARDWARE
