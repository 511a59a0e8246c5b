"""Opening a board: detect it under a root and, when it is a simulated board, run the simulated
kernel beside jetbench for as long as it works on it (so clocks and rails react as on a board)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from .hw.board import Board, detect
from .hw.fs import Root


@contextmanager
def open_board(root: Root, simulate_power: bool = True) -> Iterator[Board]:
    board = detect(root)
    if not board.simulated:
        yield board
        return
    from .sim.kernel import SimKernel

    with SimKernel(root.base, power=simulate_power):
        yield board
