"""The whitepaper's Table 1, for any set of results: one column per configuration, rows
performance (img/s), power (W, with where it was measured) and performance/W (img/s/W), plus
latency, the applied GPU clock and, when present, the external meter, rails, energy above idle
and the (labelled) pre-regulation estimate.

`table_cells()` is pure (strings); `rich_table()` and `markdown()` only lay them out.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..units import format_hz
from . import schema

Rows = List[Tuple[str, List[str]]]


def _num(x: Optional[float], digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def title(docs: Sequence[Dict[str, Any]], what: str = "jetbench results") -> str:
    boards = sorted({(d.get("board") or {}).get("model") or "?" for d in docs})
    text = f"{what}: {', '.join(boards)}"
    if schema.simulated_any(docs):
        text += " (SIMULATED board: not hardware)"
    return text


def table_cells(docs: Sequence[Dict[str, Any]]) -> Tuple[List[str], Rows]:
    """(column headers, [(row label, one cell per result)])."""
    headers = [schema.label(d, with_clock=False) for d in docs]
    rows: Rows = []

    def add(label: str, cells: List[str]) -> None:
        if any(c not in ("-", "") for c in cells):
            rows.append((label, cells))

    add("GPU clock (applied)", [format_hz(schema.gpu_hz(d)) if schema.gpu_hz(d) else "-"
                                for d in docs])
    add("Power mode (nvpmodel)", [((d.get("board") or {}).get("power_mode") or {}).get("text")
                                  or "-" for d in docs])
    add("Performance (img/s)", [_num(schema.images_per_s(d)) if schema.is_ok(d)
                                else str(d.get("status")) for d in docs])
    add("Latency p50 / p99 (ms)", [
        f"{_num(schema.latency_ms(d, 'p50'), 2)} / {_num(schema.latency_ms(d, 'p99'), 2)}"
        if schema.is_ok(d) else "-" for d in docs])
    totals = _labels(docs, "totals")
    for name, point, source in totals:
        add(f"Power (W): {name}, {point.replace('_', ' ')}",
            [_num(_find(d, "total", name, source, "mean_w"), 2) for d in docs])
        add(f"Performance/W (img/s/W): {name}",
            [_num(_find(d, "total", name, source, "images_per_j"), 1) for d in docs])
    total_names = {(n, s) for n, _, s in totals}
    for name, point, source in _labels(docs, "channels"):
        if (name, source) in total_names:
            continue  # VDD_IN is the total: already shown
        add(f"  {name} ({point.replace('_', ' ')}) W",
            [_num(_find(d, "channel", name, source, "mean_w"), 2) for d in docs])
    add("Energy above idle: W / img/s/W", [_above_idle(d) for d in docs])
    add("Pre-regulation W, ESTIMATE", [_pre(d, "mean_w", 2) for d in docs])
    add("img/s/W pre-regulation, ESTIMATE", [_pre(d, "images_per_j", 1) for d in docs])
    add("Throttled", ["yes" if (d.get("thermal") or {}).get("throttled") else
                      ("no" if d.get("thermal") else "-") for d in docs])
    return headers, rows


def _labels(docs: Sequence[Dict[str, Any]], key: str) -> List[Tuple[str, str, str]]:
    seen: Dict[Tuple[str, str, str], None] = {}
    for d in docs:
        power = d.get("power") or {}
        for item in power.get(key) or []:
            seen.setdefault((item["name"], item["point"], item["source"]), None)
    return list(seen)


def _find(doc: Dict[str, Any], kind: str, name: str, source: str, field: str) -> Any:
    for p in (doc.get("efficiency") or {}).get("by_point") or []:
        if p["kind"] == kind and p["name"] == name and p["source"] == source:
            return p.get(field)
    return None


def _above_idle(doc: Dict[str, Any]) -> str:
    a = (doc.get("efficiency") or {}).get("above_idle")
    if not a:
        return "-"
    return f"{_num(a.get('mean_w'), 2)} / {_num(a.get('images_per_j'), 1)}"


def _pre(doc: Dict[str, Any], field: str, digits: int) -> str:
    p = (doc.get("efficiency") or {}).get("pre_regulation_estimate")
    if not p:
        return "-"
    return f"{_num(p.get(field), digits)} ({p['regulator_efficiency']:.0%})"


def rich_table(docs: Sequence[Dict[str, Any]], what: str = "jetbench results") -> Any:
    from rich.table import Table

    headers, rows = table_cells(docs)
    table = Table(title=title(docs, what), title_justify="left")
    table.add_column("")
    for h in headers:
        table.add_column(h, justify="right")
    for label, cells in rows:
        table.add_row(label, *cells)
    return table


def markdown(docs: Sequence[Dict[str, Any]], what: str = "jetbench results") -> str:
    headers, rows = table_cells(docs)
    out = [f"**{title(docs, what)}**", "", "| | " + " | ".join(headers) + " |",
           "|---|" + "---:|" * len(headers)]
    out += [f"| {label.strip()} | " + " | ".join(cells) + " |" for label, cells in rows]
    return "\n".join(out) + "\n"


def long_table(docs: Sequence[Dict[str, Any]], what: str = "jetbench sweep") -> Any:
    """One row per result (a sweep has too many configurations for one column each)."""
    from rich.table import Table

    table = Table(title=title(docs, what), title_justify="left")
    for name in ("GPU clock", "model", "precision", "batch", "img/s", "W", "img/s/W",
                 "status"):
        table.add_column(name, justify="right" if name not in ("model", "precision", "status")
                         else "left")
    for d in docs:
        w = d.get("workload") or {}
        hz = schema.gpu_hz(d)
        status = str(d.get("status"))
        if (d.get("thermal") or {}).get("throttled"):
            status += " (throttled)"
        table.add_row(format_hz(hz) if hz else "-", str(w.get("model")),
                      str(w.get("precision")), str(w.get("batch")),
                      _num(schema.images_per_s(d)), _num(schema.total_w(d), 2),
                      _num(schema.images_per_j(d), 2), status)
    return table


def warnings_of(docs: Sequence[Dict[str, Any]]) -> List[str]:
    """Each result's warnings, prefixed with its configuration, de-duplicated."""
    seen: Dict[str, None] = {}
    for d in docs:
        for w in d.get("warnings") or []:
            seen.setdefault(f"{schema.label(d)}: {w}", None)
        if d.get("message"):
            seen.setdefault(f"{schema.label(d)}: {d['message']}", None)
    return list(seen)
