"""Tables for the terminal (rich). Pure rendering: no hardware access."""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Tuple

from ..report.digits import plus_minus, significant
from ..units import format_hz
from .common import console

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from ..documents import ResultDoc
    from ..hw.clocks.types import ClockReading


def sim_tag(simulated: bool) -> str:
    return " [bold magenta](SIMULATED board: not hardware)[/]" if simulated else ""


def _table_size(available: Sequence[int]) -> str:
    """How many entries a clock's table has ('-': none listed); `info --json` has them all."""
    return str(len(available)) if available else "-"


def _compact_table(title: str, *columns: str, header: bool = True) -> Table:
    """info's tables: no frame, cells never wrapped (a value split over two lines,
    `1.651 | GHz`, is worse than a narrow column), so `info` is about 30 lines at 80 columns,
    as `jetson_clocks --show` is about 15. A table without a header is key / value: the value
    may wrap at spaces (notes, channel lists)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_header=header, box=None,
                  pad_edge=False, header_style="bold underline")
    for k, col in enumerate(columns):
        wraps = not header and k == len(columns) - 1
        table.add_column(col, no_wrap=not wraps, overflow="fold" if wraps else "ellipsis",
                         style="bold" if not header and k == 0 else None)
    return table


def plan_lines(steps, title: str, simulated: bool, dry_run: bool) -> List[str]:
    """Each step, the folder its writes share on a line of its own, then one line per write
    (file, old value, new value): sysfs paths are up to 90 characters, so a write's whole path
    on one line would not fit an 80-column terminal."""
    verb = "planned (dry run: nothing written)" if dry_run else "written"
    lines = [f"[bold]{title}: {verb}[/]{sim_tag(simulated)}"]
    for step in steps:
        lines.append(f"  [cyan]{step.label}[/]")
        paths = [str(write.path) for write in step.writes]
        folder = posixpath.dirname(posixpath.commonprefix(paths)) if paths else ""
        folder = "" if folder in ("", "/") else folder
        if folder:
            lines.append(f"    {folder}/")
        for write, path in zip(step.writes, paths):
            name = path[len(folder) + 1:] if folder else path
            lines.append(f"      {name}: {write.old or '(empty)'} -> {write.value}")
    if not steps:
        lines.append("  nothing to change: already set")
    return lines


def requested_table(requested, applied, simulated: bool, dry_run: bool = False):
    """Requested values against what reads back from the board (after the writes; on a dry
    run, the board as it is: nothing was applied). Each read-back figure has a column of its
    own, so no clock is split from its unit at 80 columns; equal CPU policies are one row."""
    from rich.table import Table

    title = ("Requested (dry run: nothing applied) vs the board now" if dry_run
             else "Requested vs applied: what reads back")
    table = Table(title=title + sim_tag(simulated), title_justify="left")
    for col in ("knob", "requested", "resolved", "min", "max", "now"):
        table.add_column(col, no_wrap=col != "knob")
    by_domain: Dict[str, list] = {}
    for reading in applied:
        by_domain.setdefault(reading.domain, []).append(reading)
    for req in requested:
        readings = by_domain.get(req.domain, [])
        if req.setting == "governor":  # a governor reads back as a governor, not clocks
            back = [("", "", str(r.governor or "-")) for r in readings]
        else:
            back = [(format_hz(r.min_hz), format_hz(r.max_hz), format_hz(r.cur_hz))
                    for r in readings]
        counts: Dict[Tuple[str, str, str], int] = {}
        for figures in back:
            counts[figures] = counts.get(figures, 0) + 1
        resolved = format_hz(req.resolved_hz) if req.resolved_hz else "-"
        for i, (figures, n) in enumerate(counts.items() or [(("-", "-", "-"), 1)]):
            knob = f"{req.domain} {req.setting}" + (f" (x{n})" if n > 1 else "")
            if i:
                table.add_row(knob, "", "", *figures)
            else:
                table.add_row(knob, req.text, resolved, *figures)
    return table


def kv(console: Console, rows: Iterable[Tuple[object, object]], title: Optional[str] = None
       ) -> None:
    from rich.table import Table

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in rows:
        table.add_row(str(key), str(value))
    console.print(table)


def _watts_pm(watts: Optional[float], err_w: Optional[float]) -> str:
    """'6.86 +- 0.34 W' (the sensor's worst case on this reading, digits from it as every
    figure jetbench prints: report/digits.py), '2.35 W +- unknown'."""
    if watts is None:
        return "-"
    if err_w is None:
        return f"{significant(watts)} W +- unknown"
    return f"{plus_minus(watts, err_w)} W"


def monitor_table(row, board, simulated: bool):
    """One monitor reading: rails and total, clocks, each core's load, GPU load, RAM, fan,
    power mode, temperatures (what a piped monitor's line says)."""
    from rich.table import Table

    from ..monitor import cpu_part

    table = Table(title=f"jetbench monitor  t={row.t_s:7.1f} s{sim_tag(simulated)}",
                  title_justify="left")
    for col in ("what", "name", "value", "where"):
        table.add_column(col, overflow="fold" if col == "value" else "ellipsis")
    for channel, watts in row.channels:
        if channel.name == row.total_name:
            continue  # shown once, as the total
        table.add_row("power", channel.name,
                      _watts_pm(watts, row.channel_uncertainty_w(channel)),
                      f"{channel.point.replace('_', ' ')} ({channel.source})")
    if row.total_name:
        table.add_row("[bold]total[/]", row.total_name,
                      f"[bold]{_watts_pm(row.total_w, row.total_uncertainty_w)}[/]", "")
    for name, clock in _grouped_clocks(row.clocks):
        table.add_row("clock", f"{clock.domain} {name}", format_hz(clock.cur_hz),
                      clock.governor or "")
    cores = cpu_part(row, board)
    cores = cores[len("CPU "):] if cores.startswith("CPU ") else cores
    table.add_row("load", "cpu cores", cores.replace(",", ", "),  # wraps between cores
                  "% @ MHz" if row.cpu_load_pct else "")
    if row.gpu_load_pct is not None:
        table.add_row("load", "gpu", f"{row.gpu_load_pct:.1f} %", "")
    ram = "?" if row.memory_mb is None else f"{row.memory_mb[0]:.0f}/{row.memory_mb[1]:.0f} MB"
    table.add_row("memory", "RAM", ram, "used/total")
    if row.fan_pwm is not None:
        table.add_row("fan", "pwm", f"{row.fan_pwm}/255", "")
    if row.power_mode:
        table.add_row("mode", "nvpmodel", row.power_mode["text"], "")
    for name, temp in row.temps_c.items():
        table.add_row("temp", name, f"{temp:.1f} C", "")
    return table


def _grouped_clocks(clocks: Sequence[ClockReading]) -> List[Tuple[str, ClockReading]]:
    """(label, reading) with consecutive CPU policies at the same clock and governor merged
    ("policy0..13 (14)"), so a many-core board fits a screen."""
    out: List[Tuple[str, ClockReading]] = []
    run: List[ClockReading] = []

    def flush() -> None:
        if len(run) == 1:
            out.append((run[0].name, run[0]))
        elif run:
            first, last = run[0].name.split(" ")[0], run[-1].name.split(" ")[0]
            out.append((f"{first}..{last.replace('policy', '')} ({len(run)})", run[0]))
        run.clear()

    for c in clocks:
        same = run and c.domain == "cpu" and (c.cur_hz, c.governor) == \
            (run[-1].cur_hz, run[-1].governor)
        if c.domain == "cpu" and (not run or same):
            run.append(c)
            continue
        flush()
        if c.domain == "cpu":
            run.append(c)
        else:
            out.append((c.name, c))
    flush()
    return out


def _fits(con: Console, table: Table) -> bool:
    return con.measure(table, options=con.options.update_width(10_000)).maximum <= con.width


_WORDS_MIN = 10  # a column of words is not wrapped narrower than this


def _copy(table: Table, columns: Sequence[int], title: Optional[str], header_wrap: bool
          ) -> Table:
    """A compact copy of `table` with only `columns` (no box, one space between columns).
    header_wrap: each column exactly as wide as its widest cell (or its header's longest
    word), the header wrapped at spaces to that width; a cell is never wrapped or cut."""
    import textwrap

    from rich import box
    from rich.table import Table
    from rich.text import Text

    out = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                padding=(0, 1), show_edge=False)
    cells = [list(table.columns[i].cells) for i in columns]
    for i, column in zip(columns, cells):
        c = table.columns[i]
        if not header_wrap:
            out.add_column(c.header, justify=c.justify, style=c.style, no_wrap=c.no_wrap,
                           overflow="fold")
            continue
        head = " ".join(str(c.header).split())
        texts = [Text.from_markup(str(x)).plain for x in column]
        # a figure (starts with a digit or a sign) is never wrapped; words ('yes, noisy
        # (CV 13%)') may wrap at spaces, in a column at least _WORDS_MIN wide
        figures = [len(t) for t in texts if t[:1] and not t[:1].isalpha()]
        words = [len(w) for t in texts if t[:1].isalpha() for w in t.split()]
        wide_words = max((len(t) for t in texts if t[:1].isalpha()), default=0)
        width = max([1] + figures + words + [len(w) for w in head.split()]
                    + [min(wide_words, _WORDS_MIN)])
        out.add_column("\n".join(textwrap.wrap(head, width)) or head, justify=c.justify,
                       style=c.style, no_wrap=not words, width=width)
    for r in range(max((len(c) for c in cells), default=0)):
        out.add_row(*(c[r] if r < len(c) else "" for c in cells))
    return out


def print_table(con: Console, table: Table, key_columns: int = 1) -> None:
    """Print a rich table whole, one row per row, at any width from 80 columns: as it is when
    it fits; else compact (no box), with the columns whose cells are all the same said once
    above it; else with cells wrapped at spaces; else split into several tables side by side
    in time (the first `key_columns` repeated in each). Only when even one column and its key
    do not fit, one block per row (`column  value`). No number is ever cut to `12…`."""
    if _fits(con, table):
        con.print(table)
        return
    n = len(table.columns)
    rows = max((len(list(c.cells)) for c in table.columns), default=0)
    # a column whose every cell is the same is said once above (a key column too, but never
    # the first)
    same = [i for i in range(1, n) if rows > 1 and
            len({str(x) for x in table.columns[i].cells}) == 1 and
            str(list(table.columns[i].cells)[0]) not in ("", "-")]
    keep = [i for i in range(n) if i not in same]
    title = table.title
    if same:
        common = "; ".join(f"{' '.join(str(table.columns[i].header).split())} "
                           f"{list(table.columns[i].cells)[0]}" for i in same)
        title = f"{title or ''}\n{common}".strip("\n")
    def head() -> None:  # the title at the terminal's width, not the narrow table's
        if title:
            con.print(title, style="italic")

    for wrap in (False, True):
        compact = _copy(table, keep, None, header_wrap=wrap)
        if _fits(con, compact):
            head()
            con.print(compact)
            return
    # what tells the rows apart (time's model, runtime, precision, batch, device) starts every
    # part of a split table (else its second part is rows of one model name, nothing more)
    keys = [i for i in keep if i < key_columns]
    rest = [i for i in keep if i >= key_columns]
    chunks: List[List[int]] = []
    for i in rest:
        trial = (chunks[-1] + [i]) if chunks else [i]
        if chunks and _fits(con, _copy(table, keys + trial, None, True)):
            chunks[-1] = trial
        else:
            chunks.append([i])
    if chunks and all(_fits(con, _copy(table, keys + c, None, True)) for c in chunks):
        head()
        for k, chunk in enumerate(chunks):
            if k:
                con.print()
            con.print(_copy(table, keys + chunk, None, header_wrap=True))
        return
    _blocks(con, table)


def _blocks(con: Console, table: Table) -> None:
    """One block per row (`column  value`)."""
    from rich.table import Table

    if table.title:
        con.print(table.title, soft_wrap=not con.is_terminal)
    headers = [" ".join(str(c.header).split()) for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    rows = max((len(c) for c in cells), default=0)
    for r in range(rows):
        block = Table(box=None, show_header=False, pad_edge=False)
        block.add_column(no_wrap=True, style="bold")
        block.add_column(overflow="fold")
        for header, column in zip(headers, cells):
            block.add_row(header, column[r] if r < len(column) else "")
        con.print(block)
        if r < rows - 1:
            con.print()


def transposed(table: Table, short: Optional[Dict[str, str]] = None) -> Table:
    """A table whose columns are configurations (first column: row labels) turned into one row
    per configuration; `short` abbreviates the row labels that become headers."""
    from rich.markup import escape
    from rich.table import Table

    labels = [str(x) for x in table.columns[0].cells]
    names = [str(col.header) for col in table.columns[1:]]
    first = {n.split(" ", 1)[0] for n in names}
    title = table.title
    if len(names) > 1 and len(first) == 1 and all(" " in n for n in names):
        common = first.pop()  # the same network in every configuration: said once
        title = f"{title or ''}\n{common}".strip("\n")
        names = [n.split(" ", 1)[1] for n in names]
    if any(label.strip().startswith("GPU clock") for label in labels):
        names = [_AT_CLOCK.sub("", n) for n in names]  # the clock has its column: said once
    runs = [m.group(1) if m else "" for m in (_RUN_DIR.search(n) for n in names)]
    out = Table(title=title, title_justify="left")
    out.add_column("configuration", no_wrap=True)
    if any(runs):  # results from several directories (`report r1 r2`): a column of its own
        names = [_RUN_DIR.sub("", n) for n in names]
        out.add_column("dir", no_wrap=True)
    for label in labels:
        text = (short or {}).get(label.strip(), label.strip())
        out.add_column(text, justify="right", no_wrap=True)
    for name, run, col in zip(names, runs, table.columns[1:]):
        out.add_row(name, *([escape(run)] if any(runs) else []), *(str(x) for x in col.cells))
    return out


_AT_CLOCK = re.compile(r" @ \d+(?:\.\d+)? [kMG]?Hz")
_RUN_DIR = re.compile(r" \\?\[([^\]\[]+)\]")  # ' [r1]', escaped for rich or not


def print_results_table(con: Console, table: Table, short: Optional[Dict[str, str]] = None) -> None:
    """A results table (one column per configuration): as it is when it fits, else one row per
    configuration (print_table's ways to fit)."""
    if _fits(con, table) or len(table.columns) < 2:
        con.print(table)
        return
    rows = transposed(table, short)
    # what tells the rows apart (the configuration, its directory, the clock that ran, the
    # power mode: the table's first columns) starts every part of a split table (its second
    # part was rows all `FP16 b1 (sim)`: no clock, no directory)
    keys = 0
    while keys < len(rows.columns) and str(rows.columns[keys].header) in _ROW_KEYS:
        keys += 1
    print_table(con, rows, key_columns=max(keys, 1))


# the columns of a one-row-per-configuration table that say which result a row is
_ROW_KEYS = ("configuration", "dir", "GPU clock", "mode")


def print_note(con: Console, tag: str, text: str) -> None:
    """'tag: text', wrapped at spaces on a terminal (never a word split at the edge), one line
    when piped (greppable)."""
    from rich.markup import escape

    con.print(f"[yellow]{tag}:[/] {escape(text)}", soft_wrap=not con.is_terminal,
              highlight=False)


def print_results(con: Console, table: Table) -> None:
    """Table 1 as it is when it fits, else one row per configuration (short headers)."""
    from ..report.tables import short_label

    labels = [str(x) for x in table.columns[0].cells] if table.columns else []
    print_results_table(con, table, {lb.strip(): short_label(lb) for lb in labels})


def print_invalid(docs: Sequence[ResultDoc]) -> None:
    """Each invalid result's reasons, in red, on stderr (wrapped as one paragraph each)."""
    from rich.text import Text

    from ..report import schema

    err = console(stderr=True)
    for d in docs:
        for reason in (d.get("validity") or {}).get("reasons") or []:
            err.print(Text.assemble(("INVALID", "bold red"), f" {schema.label(d)}: ",
                                    (reason, "red")), highlight=False,
                      soft_wrap=not err.is_terminal)
