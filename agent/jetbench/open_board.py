"""Opening a board: detect it under a root and, when it is a simulated board, run the simulated
kernel beside jetbench for as long as it works on it (so clocks and rails react as on a board)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from .hw.board import SIM_MARKER, Board, detect
from .hw.fs import Root
from .sim.file_kernel import FileKernel


def served_kernel(root: Root) -> bool:
    """True for a FUSE-served simulated board (`jetbench sim mount`): its server plays the
    kernel, so no file-based simulated kernel may run beside it."""
    import json


    try:
        return json.loads(root.read(SIM_MARKER, default="{}") or "{}").get("kernel") == "fuse"
    except ValueError:
        return False


@contextmanager
def open_board(root: Root, simulate_power: bool = True) -> Iterator[Board]:
    board = detect(root)
    if not board.simulated or served_kernel(root):
        yield board  # hardware, or a board whose kernel is its FUSE server (sim mount)
        return

    with FileKernel(root.base, power=simulate_power):
        yield board
