"""`jetbench sim`: simulated boards for demos, tests and CI."""

from __future__ import annotations

import time
from pathlib import Path
from typing import List

import typer

from .common import console

sim_app = typer.Typer(help="Simulated boards: a faithful sysfs/debugfs tree in a directory.",
                      no_args_is_help=True)


@sim_app.command("create")
def create(
    directory: Path = typer.Argument(..., help="New (or empty) directory for the tree."),
    board: str = typer.Option("tx1", "--board", "-b", help="tx1-r24, tx1, nano, tx2, "
                              "xavier-agx, xavier-nx, orin-agx, orin-agx-jp5, orin-agx-jp7, "
                              "orin-nano, orin-nano-super, thor (`jetbench sim list`)."),
    quirk: List[str] = typer.Option([], "--quirk", metavar="NAME",
                                    help="A real-kernel behaviour to show (repeatable): "
                                    "static-cur, amu-cpu, qos-cap, late-gpu, round-emc "
                                    "(see HARDWARE.md, What real kernels do)."),
) -> None:
    """Write a simulated board's tree. Use it with `jetbench --root DIR ...`."""
    from ..sim.create import create_board

    spec = create_board(board, directory, quirks=quirk)
    shown = f" with quirk(s) {', '.join(quirk)}" if quirk else ""
    console().print(f"Created simulated [bold]{spec.key}[/] ({spec.model}){shown} in {directory}\n"
                    f"Try: jetbench --root {directory} info")


@sim_app.command("list")
def list_boards() -> None:
    """The simulated boards available."""
    from ..sim.boards import BOARDS

    for key, spec in sorted(BOARDS.items()):
        typer.echo(f"{key:16} {spec.soc:9} {spec.model}")


@sim_app.command("run")
def run(
    directory: Path = typer.Argument(..., help="A simulated board's tree."),
    duration: float = typer.Option(0.0, "--duration", help="Seconds to run (0: until Ctrl-C)."),
) -> None:
    """Run the simulated kernel in the foreground: clocks follow writes, rails follow the power
    model, for tools other than jetbench that read the tree."""
    from ..errors import UsageError
    from ..sim.kernel import SimKernel

    if not (directory / "etc/jetbench/simulated.json").is_file():
        raise UsageError(f"not a simulated board: {directory}")
    with SimKernel(directory):
        end = time.monotonic() + duration if duration > 0 else None
        while end is None or time.monotonic() < end:
            time.sleep(0.1)
