"""What every command shares: the global options, consoles, JSON output."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List

import typer


@dataclass(frozen=True)
class GlobalOptions:
    root: Path


# The command line as given (after `jetbench`): `measure --devices N` runs it again per rank.
_INVOCATION: List[str] = []


def set_invocation(argv: List[str]) -> None:
    _INVOCATION[:] = list(argv)


def invocation() -> List[str]:
    return list(_INVOCATION)


def global_options(ctx: typer.Context) -> GlobalOptions:
    obj = ctx.find_root().obj
    if isinstance(obj, GlobalOptions):
        return obj
    return GlobalOptions(root=Path("/"))


def open_root(ctx: typer.Context):
    """The filesystem root every hardware access goes through."""
    from ..hw.fs import Root

    path = global_options(ctx).root
    check_root(path)
    return Root(path)


def check_root(path: Path) -> None:
    """A mistyped --root/JETBENCH_ROOT is an error naming it, not an empty "Linux host"."""
    import os

    from ..errors import UsageError

    given = "JETBENCH_ROOT" if os.environ.get("JETBENCH_ROOT") == str(path) else "--root"
    hint = "a board root has sys/ under it: `jetbench sim create --board tx1 DIR` makes one"
    if not path.is_dir():
        raise UsageError(f"{given} {path}: no such directory", hint=hint)
    if not (path / "sys").is_dir():
        raise UsageError(f"{given} {path}: has no sys/ directory (not a board root)", hint=hint)


class ReaderGone(BrokenPipeError):
    """The reader of jetbench's output went away (`jetbench sweep | head`): main exits 0."""


def console(stderr: bool = False):
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich's own exits 1: a closed pipe is no error
            self.quiet = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, (sys.stderr if stderr else sys.stdout).fileno())
            os.close(devnull)
            raise ReaderGone()

    return _Console(stderr=stderr, highlight=False, soft_wrap=False)


def print_json(document: object) -> None:
    """JSON on stdout, its floats rounded as in a result file (report/digits.py: stored)."""
    from ..report.digits import stored

    sys.stdout.write(json.dumps(stored(document), indent=2, sort_keys=False) + "\n")


# time, measure and sweep: the workload in a child under another interpreter (workload/child/)
_WORKLOAD_PYTHON_HELP = (
    "JetPack 4: run the built-in network in a child under this interpreter "
    "(/usr/bin/python3); {keeps} (docs/workloads.md).")
WORKLOAD_PYTHON = typer.Option(
    None, "--workload-python", metavar="PYTHON", rich_help_panel="Workload",
    help=_WORKLOAD_PYTHON_HELP.format(keeps="jetbench keeps clocks and power"))
# `time` pins nothing and samples no power: only the timing is the child's
WORKLOAD_PYTHON_TIME = typer.Option(
    None, "--workload-python", metavar="PYTHON", rich_help_panel="Workload",
    help=_WORKLOAD_PYTHON_HELP.format(keeps="jetbench reads its timings"))


BEYOND_POWER_MODE_HELP = (
    "Go past the power mode's caps (nvpmodel): max becomes the hardware's; warned and "
    "recorded (docs/clocks.md).")

RUNTIME = typer.Option(
    None, "--runtime", "-r", rich_help_panel="Workload", metavar="RUNTIMES",
    help="torch (default), torchscript, compile, onnxruntime, tensorrt: a row per runtime, "
    "outputs checked first (docs/workloads.md).")


def beyond_power_mode_option() -> Any:  # typer.Option's own type: an OptionInfo default
    return typer.Option(False, "--beyond-power-mode", rich_help_panel="Clocks",
                        help=BEYOND_POWER_MODE_HELP)
