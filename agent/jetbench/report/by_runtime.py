"""`jetbench report DIR --by runtime`: which runtime runs each network fastest.

The Addfor framework benchmark's tables, from jetbench's own documents: one table per pass
(forward for inference, forward+backward for training), precision and batch size; a row per
network, a column per runtime (torch, torchscript, compile, onnxruntime per execution
provider, tensorrt); each cell img/s (and img/J where power was measured), the fastest runtime
of each network marked. Why a module of its own: the whitepaper table (tables.py) has a column
per result; here results are *grouped*, and `jetbench time` documents (no power) count too.

Both document kinds are read: measure/sweep results (`jetbench.result/1`, schema.py) and
`jetbench time --json` / `time --out` documents (`jetbench.time/1`, one row per
configuration). A result without `workload.runtime` ran under torch (or, older, its
`workload.framework`). Pure: cells, Markdown and JSON are built here; the CLI prints them
(`rich_tables` only lays the cells out) and `plot_batch_efficiency` writes the PNGs.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..documents import ResultDoc
from ..errors import UsageError
from ..workload.runtimes import RUNTIMES  # their order is the columns'
from . import schema
from .digits import significant
from .io import PathLike, expand, read_json
from .plots import SIZE_IN, _caveat, _legend_outside, _plt, _save, _suffix
from .schema import TIME_SCHEMA
from .verdict import differ

if TYPE_CHECKING:
    from rich.table import Table as RichTable

BY_VALUES = ("runtime",)  # what `report --by` groups by
PASSES = {"inference": "forward", "train": "forward+backward"}
FASTEST = "*"
# How a cell that has no figure reads; also the order in which one status wins over another
# when a cell has several results and none is usable (mismatch wins over everything: a runtime
# that computed other outputs than PyTorch is never anyone's fastest).
STATUS_TEXT = {"mismatch": "differs", "oom": "OOM", "failed": "failed",
               "unavailable": "n/a", "invalid": "invalid"}
NOT_RUN = "-"


@dataclass(frozen=True)
class Record:
    """One configuration from either document kind."""

    model: str
    runtime: str  # the column: 'torch', 'onnxruntime (cpu)'
    mode: str  # 'inference' or 'train'
    precision: str
    batch: int
    status: str  # ok, oom, unavailable, failed, mismatch; 'invalid': ok but not valid
    images_per_s: Optional[float]
    images_per_j: Optional[float]  # None: power not measured (every `time` row)
    where: str  # the board's model; for a `time` row: 'device cpu', 'device cuda:0'
    simulated: bool
    framework: str  # workload.framework ('sim' for a simulated network)
    cv_pct: Optional[float] = None  # the rate's spread (latency CV), for the fastest mark


@dataclass(frozen=True)
class Cell:
    """A table cell: the mean over its usable results, or the status that stands instead."""

    status: str
    images_per_s: Optional[float] = None
    images_per_j: Optional[float] = None
    repeats: int = 0  # results averaged (0: none usable)
    fastest: bool = False
    cv_pct: Optional[float] = None  # the largest spread of the results averaged

    def text(self) -> str:
        """'1230* / 45.6' (img/s, the fastest mark, img/J); 'OOM', 'n/a', 'differs'..."""
        if self.status != "ok":
            return STATUS_TEXT.get(self.status, self.status)
        out = significant(self.images_per_s) + (FASTEST if self.fastest else "")
        if self.images_per_j is not None:
            out += f" / {significant(self.images_per_j)}"
        return out

    def to_dict(self) -> Dict[str, object]:  # a cell of `report --by runtime --json`
        return {"status": self.status, "images_per_s": self.images_per_s,
                "images_per_j": self.images_per_j, "repeats": self.repeats,
                "fastest": self.fastest, "text": self.text()}


@dataclass(frozen=True)
class Table:
    """One (board or device, mode, precision, batch) group: rows of networks, a column per
    runtime present. `where` is '' when every record comes from one board or device (the
    overall title says it)."""

    where: str
    mode: str
    precision: str
    batch: int
    columns: Tuple[str, ...]
    rows: Tuple[Tuple[str, Tuple[Optional[Cell], ...]], ...]  # None: not run

    @property
    def title(self) -> str:
        return (f"{PASSES.get(self.mode, self.mode)}: {self.precision.upper()}, "
                f"batch {self.batch}" + (f" ({self.where})" if self.where else ""))

    def repeated(self) -> List[str]:
        """'resnet18 torch (3)' for each cell that is a mean of several results."""
        return [f"{network} {column} ({cell.repeats})" for network, cells in self.rows
                for column, cell in zip(self.columns, cells)
                if cell is not None and cell.repeats > 1]

    def to_dict(self) -> Dict[str, object]:
        return {"title": self.title, "pass": PASSES.get(self.mode, self.mode),
                "where": self.where, "mode": self.mode, "precision": self.precision,
                "batch": self.batch,
                "columns": list(self.columns),
                "rows": [{"network": network,
                          "cells": [None if c is None else {**c.to_dict(), "runtime": col}
                                    for col, c in zip(self.columns, cells)]}
                         for network, cells in self.rows]}


def check_by(by: str) -> str:
    """`by` if `report --by` knows it; else a UsageError listing what it knows."""
    if by not in BY_VALUES:
        raise UsageError(f"--by {by!r}: not one of {', '.join(BY_VALUES)}",
                         hint="jetbench report DIR --by runtime")
    return by


# -- reading --------------------------------------------------------------------------------
def _record(work: object, status: str, ips: Optional[float], ipj: Optional[float], where: str,
            simulated: bool, cv_pct: Optional[float] = None) -> Optional[Record]:
    if not isinstance(work, dict) or not work.get("model"):
        return None
    try:
        batch = int(work.get("batch", 1))
    except (TypeError, ValueError):
        return None
    if status == "ok" and ips is None:
        return None  # nothing to show
    return Record(str(work["model"]), schema.runtime_label(work),
                  str(work.get("mode") or "inference"), str(work.get("precision") or "?"),
                  batch, status, ips, ipj, where, simulated,
                  str(work.get("framework") or "pytorch"), cv_pct)


def _from_result(doc: ResultDoc) -> List[Record]:
    status = str(doc.get("status"))
    if status == "ok" and not schema.is_valid(doc):
        status = "invalid"
    where = doc.get("board", {}).get("model") or \
        f"device {doc.get('workload', {}).get('device') or '?'}"
    record = _record(doc.get("workload"), status, schema.images_per_s(doc),
                     schema.images_per_j(doc), where, bool(doc.get("simulated")),
                     schema.cv_pct(doc))
    return [record] if record else []


def _from_time(doc: Mapping[str, object]) -> List[Record]:
    out: List[Record] = []
    rows = doc.get("results")
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        work = row.get("workload") or {}
        ips = schema.images_per_s(row)
        where = f"device {doc.get('device') or work.get('device') or '?'}"
        record = _record(work, str(row.get("status")), ips, None, where, False,
                         schema.cv_pct(row))
        if record:
            out.append(record)
    return out


def records_of(doc: object, where: str = "document") -> List[Record]:
    """The records of one parsed document; a UsageError naming `where` if it is neither
    kind."""
    if isinstance(doc, dict) and doc.get("schema") == TIME_SCHEMA:
        return _from_time(doc)
    return _from_result(schema.check(doc, where))


def load_records(paths: Iterable[PathLike]) -> List[Record]:
    """Every record under `paths` (files and directories, as `report` takes them). In a
    directory, JSON that is neither kind (a sweep's summary) is skipped; a file named
    explicitly must be one."""
    out: List[Record] = []
    for path in map(Path, paths):
        for file in expand([path]):
            try:
                doc = read_json(file)
                out += records_of(doc, str(file))
            except (OSError, ValueError, UsageError) as err:
                if not path.is_dir():
                    if isinstance(err, UsageError):
                        raise
                    raise UsageError(f"{file}: unreadable ({err})") from err
    return out


# -- the tables -----------------------------------------------------------------------------
def _column_order(label: str) -> Tuple[int, str]:
    runtime = label.split(" ", 1)[0]
    return (RUNTIMES.index(runtime) if runtime in RUNTIMES else len(RUNTIMES), label)


def _cell(records: Sequence[Record]) -> Cell:
    """Usable results averaged; else the status that wins (STATUS_TEXT's order)."""
    statuses = {r.status for r in records}
    if "mismatch" in statuses:
        return Cell("mismatch")
    ok = [r for r in records if r.status == "ok" and r.images_per_s is not None]
    if ok:
        per_j = [r.images_per_j for r in ok if r.images_per_j is not None]
        spreads = [r.cv_pct for r in ok]
        return Cell("ok", statistics.fmean(r.images_per_s for r in ok),  # type: ignore[misc]
                    statistics.fmean(per_j) if per_j else None, len(ok),
                    cv_pct=None if None in spreads else max(spreads))  # type: ignore[type-var]
    for status in STATUS_TEXT:
        if status in statuses:
            return Cell(status)
    return Cell(sorted(statuses)[0])


def _mark_fastest(cells: List[Optional[Cell]]) -> List[Optional[Cell]]:
    """The highest img/s of a row marked, when at least two runtimes ran it and it stands
    apart from every other by their spreads (report/digits.separated): no mark from noise."""
    ok = [c for c in cells if c is not None and c.status == "ok" and c.images_per_s is not None]
    if len(ok) < 2:
        return cells
    best = max(ok, key=lambda c: c.images_per_s or 0.0)
    if not all(differ(best.images_per_s, best.cv_pct, c.images_per_s, c.cv_pct) is True
               for c in ok if c is not best):  # an unknown spread: no mark (verdict.py)
        return cells
    return [dataclasses.replace(c, fastest=True) if c is best else c for c in cells]


def tables_of(records: Sequence[Record]) -> List[Table]:
    """One Table per (board or device, mode, precision, batch): results of two boards are
    never averaged together. Ordered by board, inference first, then precision, batch."""
    several = len({r.where for r in records}) > 1
    groups: Dict[Tuple[str, str, str, int], List[Record]] = {}
    for r in records:
        groups.setdefault((r.where if several else "", r.mode, r.precision, r.batch),
                          []).append(r)
    out: List[Table] = []
    modes = list(PASSES)
    for key in sorted(groups, key=lambda k: (
            k[0], modes.index(k[1]) if k[1] in modes else len(modes), k[1], k[2], k[3])):
        where, mode, precision, batch = key
        group = groups[key]
        columns = tuple(sorted({r.runtime for r in group}, key=_column_order))
        rows = []
        for network in sorted({r.model for r in group}):
            cells: List[Optional[Cell]] = []
            for column in columns:
                mine = [r for r in group if r.model == network and r.runtime == column]
                cells.append(_cell(mine) if mine else None)
            rows.append((network, tuple(_mark_fastest(cells))))
        out.append(Table(where, mode, precision, batch, columns, tuple(rows)))
    return out


def title(records: Sequence[Record]) -> str:
    return "jetbench runtimes: " + _where_title(records)


def legend(tables: Sequence[Table]) -> List[str]:
    """What the cells mean (only the marks that appear), and which cells are means."""
    lines = ["cells: img/s, then img/J where power was measured (img/s / img/J)"]
    texts = {c.text() for t in tables for _, cells in t.rows for c in cells if c is not None}
    if any(c.fastest for t in tables for _, cells in t.rows for c in cells if c is not None):
        lines.append(f"{FASTEST}: the fastest runtime for that network (highest img/s, apart "
                     "from the others beyond their latency CV)")
    meaning = {"OOM": "out of memory", "n/a": "the runtime or precision is unavailable",
               "differs": "outputs differ from PyTorch's: refused",
               "failed": "the run failed", "invalid": "clocks or window did not hold: left out",
               NOT_RUN: "not run"}
    lines += [f"{text}: {what}" for text, what in meaning.items()
              if text in texts or (text == NOT_RUN and _any_not_run(tables))]
    for t in tables:
        if t.repeated():
            lines.append(f"{t.title}: mean of several results for "
                         + ", ".join(t.repeated()))
    return lines


def _any_not_run(tables: Sequence[Table]) -> bool:
    return any(c is None for t in tables for _, cells in t.rows for c in cells)


def _texts(t: Table) -> List[List[str]]:
    return [[network] + [NOT_RUN if c is None else c.text() for c in cells]
            for network, cells in t.rows]


def markdown(records: Sequence[Record]) -> str:
    tables = tables_of(records)
    out = [f"**{title(records)}**", ""]
    for t in tables:
        out += [f"*{t.title}*", "", "| network | " + " | ".join(t.columns) + " |",
                "|---|" + "---:|" * len(t.columns)]
        out += ["| " + " | ".join(row) + " |" for row in _texts(t)]
        out.append("")
    out += [f"- {line}" for line in legend(tables)]
    return "\n".join(out) + "\n"


def to_dict(records: Sequence[Record], plots: Sequence[Path] = ()) -> Dict[str, object]:
    tables = tables_of(records)
    return {"by": "runtime", "title": title(records),
            "simulated": any(r.simulated for r in records),
            "tables": [t.to_dict() for t in tables], "legend": legend(tables),
            "plots": [str(p) for p in plots]}


def rich_tables(tables: Sequence[Table]) -> List[Tuple[str, RichTable]]:
    """(title, rich Table) per table of `tables_of`, for cli/render.py's print_table: the
    title is printed apart, at the terminal's width (a narrow table would wrap it)."""
    from rich.markup import escape
    from rich.table import Table as RichTable

    out = []
    for t in tables:
        table = RichTable()
        table.add_column("network", no_wrap=True)
        for column in t.columns:
            table.add_column(escape(column), justify="right")
        for row in _texts(t):
            table.add_row(*map(escape, row))
        out.append((t.title, table))
    return out


# -- the minibatch-efficiency plot ----------------------------------------------------------
def batch_series(records: Sequence[Record],
                 runtime: str) -> Dict[str, List[Tuple[int, float, float]]]:
    """Per line (network, plus precision, board or device when several, plus the pass when
    training), (batch, ms per image, its spread in ms) for `runtime`'s usable results; repeats
    averaged, the spread the largest latency CV among them (0 where none is known; pure, for
    tests)."""
    mine = [r for r in records if r.runtime == runtime and r.status == "ok"
            and r.images_per_s]
    precisions = len({r.precision for r in mine}) > 1
    wheres = len({r.where for r in mine}) > 1
    points: Dict[str, Dict[int, List[Record]]] = {}
    for r in mine:
        name = r.model + (f" {r.precision.upper()}" if precisions else "") + \
            (f" {PASSES.get(r.mode, r.mode)}" if r.mode != "inference" else "") + \
            (f" ({r.where})" if wheres else "")
        points.setdefault(name, {}).setdefault(r.batch, []).append(r)
    out: Dict[str, List[Tuple[int, float, float]]] = {}
    for name, by_batch in sorted(points.items()):
        out[name] = []
        for batch, rs in sorted(by_batch.items()):
            ms = statistics.fmean(1000.0 / (r.images_per_s or 1.0) for r in rs)
            cv = max((r.cv_pct for r in rs if r.cv_pct is not None), default=0.0)
            out[name].append((batch, ms, ms * cv / 100.0))
    return out


def plot_file(out_dir: Path, runtime: str) -> Path:
    """`batch-efficiency-onnxruntime-cpu.png` for 'onnxruntime (cpu)'."""
    slug = re.sub(r"[^a-z0-9.]+", "-", runtime.lower()).strip("-") or "runtime"
    return Path(out_dir) / f"batch-efficiency-{slug}.png"


def _where_title(records: Sequence[Record]) -> str:
    """'TX1 - SIMULATED board' when all are simulated; else each simulated one said
    ('TX1 (SIMULATED), device cpu')."""
    places = sorted({(r.where, r.simulated) for r in records})
    if all(sim for _, sim in places):
        return ", ".join(w for w, _ in places) + _suffix(True)
    return ", ".join(w + (" (SIMULATED)" if sim else "") for w, sim in places)


def plot_batch_efficiency(records: Sequence[Record], out_dir: Path) -> List[Path]:
    """Per runtime with usable results: time per image (ms) against batch size (log2 axis,
    error bars from the latency CV), one line per network; titled with the boards/devices;
    SIMULATED said where it is."""
    written: List[Path] = []
    for runtime in sorted({r.runtime for r in records}, key=_column_order):
        series = batch_series(records, runtime)
        if not series:
            continue
        mine = [r for r in records if r.runtime == runtime]
        plt = _plt()
        fig, ax = plt.subplots(figsize=SIZE_IN, layout="constrained")
        batches = sorted({p[0] for pts in series.values() for p in pts})
        for name, pts in series.items():
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts],
                        marker="o", capsize=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.set_xlabel("batch size")
        ax.set_ylabel("time per image (ms)\n(bars: latency CV)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"Minibatch efficiency: {runtime}\n{_where_title(mine)}",
                     fontsize="medium")
        _legend_outside(ax)
        _caveat(fig, [{"simulated": r.simulated, "workload": {"framework": r.framework}}
                      for r in mine])
        written.append(_save(fig, plot_file(out_dir, runtime)))
    return written
