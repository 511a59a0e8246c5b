"""`jetbench report`: the table across results, plots, --compare, --by runtime. Parse, call
the report library, render.

Module level imports typer and the stdlib only; matplotlib loads inside the calls."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from ..errors import UsageError
from .common import console, print_json
from .render import print_invalid, print_note, print_results, print_table

if TYPE_CHECKING:  # types only: --help never loads them
    from ..documents import ResultDoc


def report(
    results: List[Path] = typer.Argument(...,
                                         metavar="RESULTS",
                                         help="Result JSON files or directories (with --by "
                                         "runtime, `jetbench time` output too)."),
    plot: Optional[Path] = typer.Option(None, "--plot",
                                        metavar="DIR", help="Write PNG plots into DIR."),
    markdown: bool = typer.Option(False, "--markdown", help="Print the table as Markdown."),
    compare: Optional[Path] = typer.Option(None, "--compare",
                                           metavar="RESULT", help="Another result: print "
                                           "the change per metric (B against A)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    by: Optional[str] = typer.Option(
        None, "--by", metavar="WHAT",
        help="Group the results by WHAT instead: `runtime` (the only value) prints a table per "
             "pass, precision and batch with a row per network and a column per runtime "
             "(torch, torchscript, compile, onnxruntime per provider, tensorrt): img/s, img/J "
             "where measured, the fastest marked. Reads `jetbench time` output too; with "
             "--plot, time per image against batch size, one PNG per runtime."),
) -> None:
    """The whitepaper-style table across results; plots (img/s and img/s/W vs GPU clock,
    img/s vs batch, each run's power trace); --compare for a regression check; --by runtime
    for the runtimes side by side."""
    from ..report import by_runtime, tables
    from ..report.io import load_results

    if by is not None:
        if compare is not None:
            raise UsageError("--by and --compare do not go together",
                             hint="jetbench report DIR --by runtime, or A.json --compare B.json")
        by_runtime.check_by(by)
        _by_runtime(results, plot, markdown, as_json)
        return
    skipped: List[Path] = []
    docs = load_results(results, skipped=skipped)
    for path in skipped:
        print_note(console(stderr=True), "skipped", f"{path}: not a regular file (a FIFO, a "
                   "device or a socket)")
    if not docs:
        raise UsageError("no jetbench results found in " + ", ".join(map(str, results)))
    if compare is not None:
        if len(docs) != 1:
            raise UsageError("--compare takes one result on each side",
                             hint="jetbench report A.json --compare B.json")
        _compare(docs[0], _one_result(compare), as_json, results[0], compare)
        return
    written: List[Path] = []
    if plot is not None:
        from ..report.plots import report_plots

        written = report_plots(docs, plot)
    if as_json:
        headers, rows = tables.table_cells(docs)
        print_json({"title": tables.title(docs), "columns": headers,
                    "rows": [{"label": lb, "cells": c} for lb, c in rows],
                    "plots": [str(p) for p in written]})
        return
    if markdown:
        typer.echo(tables.markdown(docs), nl=False)
    else:
        out = console()
        if not out.is_terminal:
            out.width = max(out.width, 140)
        print_results(out, tables.rich_table(docs))
        err = console(stderr=True)
        for line in tables.uncertainty_advice(docs):
            print_note(err, "uncertainty", line)
        print_invalid(docs)
    for p in written:
        typer.echo(f"plot: {p}")


def _by_runtime(results: List[Path], plot: Optional[Path], markdown: bool,
                as_json: bool) -> None:
    """`report --by runtime`: the library's tables, printed."""
    from ..report import by_runtime

    records = by_runtime.load_records(results)
    if not records:
        raise UsageError("no jetbench results or `jetbench time` documents found in "
                         + ", ".join(map(str, results)),
                         hint="give the --out directories of measure, sweep or time")
    written = by_runtime.plot_batch_efficiency(records, plot) if plot is not None else []
    if as_json:
        print_json(by_runtime.to_dict(records, written))
        return
    if markdown:
        typer.echo(by_runtime.markdown(records), nl=False)
    else:
        out = console()
        out.print(by_runtime.title(records), markup=False, highlight=False,
                  soft_wrap=not out.is_terminal)
        tables = by_runtime.tables_of(records)
        for title, table in by_runtime.rich_tables(tables):
            out.print(title, style="italic", markup=False, highlight=False)
            print_table(out, table)
        for line in by_runtime.legend(tables):
            out.print(line, markup=False, highlight=False, soft_wrap=not out.is_terminal)
    for p in written:
        typer.echo(f"plot: {p}")


def _one_result(path: Path) -> ResultDoc:
    """--compare's B: a result file, or a directory that holds exactly one (else it says what
    the directory holds)."""
    from ..report import schema
    from ..report.io import load_result, load_results

    if not path.is_dir():
        return load_result(path)
    docs = load_results([path])
    if len(docs) == 1:
        return docs[0]
    held = ", ".join(schema.label(d) for d in docs[:4]) + (
        f" and {len(docs) - 4} more" if len(docs) > 4 else "")
    raise UsageError(f"--compare {path}: a directory holding {len(docs)} results"
                     + (f" ({held})" if docs else ""),
                     hint="give one result file (DIR/NAME.json), or a directory with one")


def _compare(a: ResultDoc, b: ResultDoc, as_json: bool, pa: Path, pb: Path) -> None:
    from ..report.compare import caveats, compare
    from ..report.tables import title

    changes = compare(a, b)
    notes = caveats(a, b)
    if as_json:
        print_json({"a": str(pa), "b": str(pb), "changes": [c.to_dict() for c in changes],
                    "caveats": notes})
        return
    from rich.table import Table

    from ..report.digits import plus_minus_pct, significant

    table = Table(title=title([a, b], "jetbench compare"), title_justify="left")
    for name in ("metric", "A", "B", "change", "noise", "verdict"):
        table.add_column(name, justify="left" if name in ("metric", "verdict") else "right")

    def fmt(x: Optional[float], pct: Optional[float] = None) -> str:
        """A figure to the digits its uncertainty gives (report/digits.py), 3 where unknown."""
        if x is None:
            return "-"
        return plus_minus_pct(x, pct).split(" +- ")[0] if pct else significant(x, 3)

    whys = []
    for c in changes:
        change = "-" if c.ratio is None else f"{c.ratio:+.1%}"
        na, nb = c.noise
        noise = "-" if c.higher_is_better is None else (
            "unknown" if na is None or nb is None else f"+-{na:.1f}% / {nb:.1f}%")
        table.add_row(c.metric, fmt(c.a, c.ra.pct), fmt(c.b, c.rb.pct), change, noise,
                      c.verdict)
        if c.judged.why and c.a is not None and c.b is not None and \
                c.judged.why not in whys:
            whys.append(c.judged.why)
    con = console()
    con.print(f"A: {pa}", soft_wrap=True, highlight=False)
    con.print(f"B: {pb}", soft_wrap=True, highlight=False)
    print_table(con, table)
    con.print("noise: each result's uncertainty as the comparison counts it (the latency CV "
              "for the rate and the latency; for power and efficiency the stated uncertainty, "
              "less the meters' shared part where both were read on one board: "
              "docs/measure.md, Comparing); a change whose intervals overlap is no finding",
              highlight=False)
    for why in whys:
        con.print(f"no verdict: {why}", highlight=False)
    for note in notes:
        err = console(stderr=True)
        err.print(f"[yellow]note:[/] {note}", soft_wrap=not err.is_terminal)
