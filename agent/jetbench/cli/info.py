"""`jetbench info`."""

from __future__ import annotations

import typer

from .common import console, open_root, print_json


def info(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Board, L4T release, clock domains, power rails, temperatures and current state."""
    from ..inventory import describe
    from ..session import open_board
    from .render import info_tables

    root = open_root(ctx)
    with open_board(root, simulate_power=False) as board:
        doc = describe(root, board)
    if as_json:
        print_json(doc)
        return
    out = console()
    for table in info_tables(doc):
        out.print(table)
