"""`jetbench info`."""

from __future__ import annotations

from typing import List, Optional

import typer

from .common import console, open_root, print_json


def info(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    meter: Optional[List[str]] = typer.Option(
        None, "--meter", "-m",
        metavar="SPEC", help="Also list these power sources (repeatable; see `monitor`)."),
) -> None:
    """Board, L4T release, clock domains, power rails and sources, temperatures, current state."""
    from ..hw.meters.registry import open_sources
    from ..inventory import describe
    from ..open_board import open_board
    from .info_render import info_tables

    root = open_root(ctx)
    with open_board(root, simulate_power=False) as board:
        sources = open_sources(meter or ["auto"], root, board.rails, board.total_rail)
        doc = describe(root, board, sources)
    if as_json:
        print_json(doc)
        return
    out = console()
    for table in info_tables(doc):
        out.print(table)
