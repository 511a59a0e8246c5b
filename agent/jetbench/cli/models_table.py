"""The `jetbench models` table: one line per network, within the terminal's width.

Names and figures are never cut; the description takes what is left of the line and ends in
an ellipsis where it does not fit (`--json` has every field whole). Below a usable description
width the table becomes one block per network, as every other table does (render.print_table).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Sequence

from .render import print_table

if TYPE_CHECKING:
    from rich.console import Console

    from ..workload.models_info import ModelDoc

_HEADERS = ("model", "input", "params", "GMACs", "description")
_RIGHT = ("params", "GMACs")
_MIN_DESCRIPTION_CHARS = 12


def model_cells(row: ModelDoc) -> List[str]:
    params = "-" if row["params"] is None else f"{row['params'] / 1e6:.2f}M"
    return [row["name"], "x".join(map(str, row["input_shape"])), params,
            f"{row['gmacs_per_image']:.3f}", row["description"]]


def print_models(con: Console, rows: Sequence[ModelDoc]) -> None:
    from rich.table import Table

    cells = [model_cells(row) for row in rows]
    fixed = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(_HEADERS[:-1])]
    # box=None without edge padding: one space of padding either side of a cell, so two
    # between neighbouring columns and none at the ends
    room = con.width - sum(fixed) - 2 * (len(_HEADERS) - 1)
    table = Table(box=None, pad_edge=False)
    for title in _HEADERS:
        if title != "description":
            table.add_column(title, justify="right" if title in _RIGHT else "left", no_wrap=True)
        elif room >= _MIN_DESCRIPTION_CHARS:
            table.add_column(title, no_wrap=True, overflow="ellipsis", max_width=room)
        else:
            table.add_column(title)
    for row in cells:
        table.add_row(*row)
    if room < _MIN_DESCRIPTION_CHARS:
        print_table(con, table)  # too narrow for a line per network: a block per network
        return
    con.print(table)
