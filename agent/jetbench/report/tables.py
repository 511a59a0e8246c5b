"""The whitepaper's Table 1, for any set of results: one column per configuration, rows
performance (img/s), power (W, with where it was measured) and performance/W (img/s/W), plus
latency, the applied GPU clock and, when present, the external meter, rails, energy above idle
and the (labelled) pre-regulation estimate.

`table_cells()` is pure (strings); `rich_table()` and `markdown()` only lay them out.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Literal, Optional, Sequence, Tuple

from ..documents import PowerModeDoc, ResultDoc, WallFigure
from ..hw.meters.base import scope_of
from ..units import format_hz
from ..work_units import common_unit, efficiency_label, per_j, rate_label
from ..workload.timing.stats import CV_NOISY
from . import schema
from .digits import plus_minus_pct

if TYPE_CHECKING:
    from rich.table import Table

Rows = List[Tuple[str, List[str]]]
UNCERTAINTY_BOUND_PCT = 1.0  # MLPerf Power's bound on the efficiency figure


def _num(x: Optional[float], digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _pm(x: Optional[float], pct: Optional[float], digits: int = 0) -> str:
    """'12.8 +- 0.6' (the uncertainty from its percentage, digits to match: digits.py);
    'unknown' when there is none. `digits` is ignored (kept for callers)."""
    return plus_minus_pct(x, pct)


def _ipj_pct(doc: ResultDoc, power_pct: Optional[float]) -> Optional[float]:
    """img/s/W's uncertainty (%) for a figure whose power has `power_pct`."""
    thr = ((doc.get("efficiency") or {}).get("uncertainty") or {}).get("throughput_pct")
    return None if power_pct is None or thr is None else power_pct + thr


def _header(doc: ResultDoc, extra: str = "") -> str:
    text = schema.label(doc, with_clock=False) + (f" {extra}" if extra else "")
    return text if schema.is_valid(doc) else f"{text} INVALID"


def _run_dir(doc: ResultDoc) -> str:
    path = doc.get("_path")
    return Path(path).parent.name if path else ""


# What can tell two results of the same network apart, in the order shown.
_DIFFERS = (
    ("board", lambda d: (d.get("board") or {}).get("model") or ""),
    ("clock", lambda d: f"@ {format_hz(schema.gpu_hz(d))}" if schema.gpu_hz(d) else ""),
    ("run", lambda d: f"[{_run_dir(d)}]" if _run_dir(d) else ""),
    ("date", lambda d: str(d.get("created") or "")[:16].replace("T", " ")),
)


def distinguishing(docs: Sequence[ResultDoc]) -> List[str]:
    """Per result, the attributes (board, clock, run directory, date) that differ between
    results of the same network/precision/batch: what a column or series must say."""
    groups: Dict[str, List[int]] = {}
    for i, d in enumerate(docs):
        groups.setdefault(schema.label(d, with_clock=False), []).append(i)
    out = [""] * len(docs)
    for members in groups.values():
        if len(members) < 2:
            continue
        parts: List[List[str]] = [[] for _ in members]
        for _name, get in _DIFFERS:
            values = [get(docs[i]) for i in members]
            if len(set(values)) > 1:
                for k, v in enumerate(values):
                    parts[k].append(v or "?")
            if len({tuple(p) for p in parts}) == len(members):
                break  # every column already distinct
        for k, i in enumerate(members):
            out[i] = " ".join(parts[k])
    if len({_run_dir(d) for d in docs}) > 1:  # from several directories: each says its own
        for i, d in enumerate(docs):
            run = f"[{_run_dir(d) or '?'}]"
            if run not in out[i]:
                out[i] = f"{out[i]} {run}".strip()
    return out


def title(docs: Sequence[ResultDoc], what: str = "jetbench results") -> str:
    boards = sorted({(d.get("board") or {}).get("model") or "?" for d in docs})
    text = f"{what}: {', '.join(boards)}"
    if schema.simulated_any(docs):
        text += " (SIMULATED board: not hardware)"
    return text


def _devices(doc: ResultDoc) -> str:
    rows = doc.get("devices") or []
    return " + ".join(f"{r['device']} {_num((r.get('throughput') or {}).get('images_per_s'))}"
                      for r in rows) or "-"


def _scaling(doc: ResultDoc) -> str:
    scaling = doc.get("scaling") or {}
    if scaling.get("efficiency") is None:
        return "-"
    return (f"{scaling['efficiency']:.1%} of {scaling.get('devices')} x "
            f"{_num(scaling.get('baseline_images_per_s'))} img/s")


def table_cells(docs: Sequence[ResultDoc]) -> Tuple[List[str], Rows]:
    """(column headers, [(row label, one cell per result)])."""
    headers = [_header(d, extra) for d, extra in zip(docs, distinguishing(docs))]
    rows: Rows = []

    def add(label: str, cells: List[str]) -> None:
        if any(c not in ("-", "") for c in cells):
            rows.append((label, cells))

    add("GPU clock (runs)", [format_hz(schema.gpu_hz(d)) if schema.gpu_hz(d) else "-"
                                for d in docs])
    add("Power mode (nvpmodel)", [_mode_text((d.get("board") or {}).get("power_mode"))
                                  for d in docs])
    unit = common_unit(schema.unit(d) for d in docs)
    rate = rate_label(unit) if unit else "per s: see Unit"
    eff = efficiency_label(unit) if unit else "per J: see Unit"
    if unit is None:  # mixed units: each column says what it counts
        add("Unit", [schema.unit(d) for d in docs])
    add(f"Performance ({rate})", [_num(schema.items_per_s(d)) if schema.is_ok(d)
                                  else str(d.get("status")) for d in docs])
    add("Devices (img/s each)", [_devices(d) for d in docs])  # measure --devices
    add("Scaling efficiency", [_scaling(d) for d in docs])
    add("Latency p50 / p99 (ms)", [
        f"{_num(schema.latency_ms(d, 'p50'), 2)} / {_num(schema.latency_ms(d, 'p99'), 2)}"
        if schema.is_ok(d) else "-" for d in docs])
    totals = _labels(docs, "totals")
    for name, point, source in totals:
        scope = f"{scope_of(point)}, measured"
        add(f"Power (W): {name}, {point.replace('_', ' ')}; {scope}",
            [_pm(_find(d, "total", name, source, "mean_w"),
                 _find(d, "total", name, source, "mean_w_uncertainty_pct"), 2) for d in docs])
        add(f"Performance/W ({eff}): {name}; {scope}",
            [_pm(_find(d, "total", name, source, "items_per_j"),
                 _ipj_pct(d, _find(d, "total", name, source, "mean_w_uncertainty_pct")), 1)
             for d in docs])
    add("Power (W): wall, from the board's sensors; wall, calibrated",
        [_wall(d, "power") for d in docs])
    add(f"Performance/W ({eff}): wall; wall, calibrated", [_wall(d, "efficiency") for d in docs])
    total_names = {(n, s) for n, _, s in totals}
    for name, point, source in _labels(docs, "channels"):
        if (name, source) in total_names:
            continue  # VDD_IN is the total: already shown
        add(f"  {name} ({point.replace('_', ' ')}) W",
            [_pm(_find(d, "channel", name, source, "mean_w"),
                 _find(d, "channel", name, source, "mean_w_uncertainty_pct"), 2)
             for d in docs])
    add(f"Energy above idle: W / {eff}", [_above_idle(d) for d in docs])
    add("Idle W, as pinned (active idle)", [_idle(d, "idle") for d in docs])
    add("Idle W, board governors (unpinned)", [_idle(d, "idle_unpinned") for d in docs])
    add("Pre-regulation W, ESTIMATE", [_pre(d, "mean_w", 2) for d in docs])
    add(f"{eff} pre-regulation, ESTIMATE", [_pre(d, "items_per_j", 1) for d in docs])
    add("Throttled", [_throttled(d) for d in docs])
    add("Valid", [validity(d) for d in docs])
    return headers, rows


def validity(doc: ResultDoc) -> str:
    """'yes'; 'yes, noisy (CV 16%)' when the latency varies more than CV_NOISY between
    iterations (valid, but one number hides a spread); 'NO: n reason(s)'."""
    if not schema.is_valid(doc):
        return f"NO: {len(schema.invalid_reasons(doc))} reason(s)"
    cv = (doc.get("throughput") or {}).get("cv")
    if cv is not None and cv > CV_NOISY:
        return f"yes, noisy (CV {cv:.0%})"
    return "yes"


def _throttled(doc: ResultDoc) -> str:
    """'yes' only with evidence; a clock below its pin without evidence says exactly that."""
    thermal = doc.get("thermal") or {}
    if not thermal:
        return "-"
    if thermal.get("throttled"):
        return "yes"
    below = thermal.get("below_pin") or []
    return "no" + (f" ({'; '.join(below)})" if below else "")


def _labels(docs: Sequence[ResultDoc], key: Literal["channels", "totals"]
            ) -> List[Tuple[str, str, str]]:
    seen: Dict[Tuple[str, str, str], None] = {}
    for d in docs:
        power = d.get("power") or {}
        for item in power.get(key) or []:
            seen.setdefault((item["name"], item["point"], item["source"]), None)
    return list(seen)


def _wall(doc: ResultDoc, part: Literal["power", "efficiency"]) -> str:
    """The calibrated wall figure (run/calibration.py), or why there is none."""
    holder = doc.get("power") if part == "power" else doc.get("efficiency")
    figure: WallFigure = (holder or {}).get("wall") or {}
    if part == "power" and figure.get("refused"):
        return "not calibrated here"
    value = figure.get("mean_w") if part == "power" else figure.get("images_per_j")
    return "-" if value is None else _pm(value, figure.get("u95_pct"), 2 if part == "power" else 1)


def _find(doc: ResultDoc, kind: str, name: str, source: str, field: str) -> Optional[float]:
    for p in (doc.get("efficiency") or {}).get("by_point") or []:
        if p["kind"] == kind and p["name"] == name and p["source"] == source:
            return per_j(p) if field == "items_per_j" else schema.number(p, field)
    return None


def _above_idle(doc: ResultDoc) -> str:
    a = (doc.get("efficiency") or {}).get("above_idle")
    if not a:
        return "-"
    pct = a.get("mean_w_uncertainty_pct")
    return (f"{_pm(a.get('mean_w'), pct, 2)} / "
            f"{_pm(per_j(a), _ipj_pct(doc, pct), 1)}")


def _idle(doc: ResultDoc, key: Literal["idle", "idle_unpinned"]) -> str:
    total = (((doc.get("power") or {}).get(key)) or {}).get("total") or {}
    return "-" if total.get("mean_w") is None else \
        _pm(total.get("mean_w"), total.get("mean_w_uncertainty_pct"), 2)


def _pre(doc: ResultDoc, field: str, digits: int) -> str:
    p = (doc.get("efficiency") or {}).get("pre_regulation_estimate")
    if not p:
        return "-"
    pct = schema.total_w_pct(doc)  # the measured part's; the assumed efficiency is not included
    if field == "items_per_j":
        pct = _ipj_pct(doc, pct)
    value = per_j(p) if field == "items_per_j" else schema.number(p, field)
    return f"{_pm(value, pct, digits)} ({p['regulator_efficiency']:.0%})"


_SHORT = (  # a row label as a column header of the one-row-per-configuration table
    (re.compile(r"^GPU clock \(runs\)$"), "GPU clock"),
    (re.compile(r"^Power mode \(nvpmodel\)$"), "mode"),
    (re.compile(r"^Performance \((.+)\)$"), r"\1"),
    (re.compile(r"^Latency p50 / p99 \(ms\)$"), "p50/p99 ms"),
    (re.compile(r"^Power \(W\): (\S+), .*$"), r"\1 W"),
    (re.compile(r"^Performance/W \((.+)\): (\S+?)(?:;.*)?$"), r"\1 (\2)"),
    (re.compile(r"^(\S+) \(.*\) W$"), r"\1 W"),
    (re.compile(r"^Energy above idle: W / (.+)$"), r"above idle: W / \1"),
    (re.compile(r"^Idle W, as pinned \(active idle\)$"), "idle W (pinned)"),
    (re.compile(r"^Idle W, board governors \(unpinned\)$"), "idle W (unpinned)"),
    (re.compile(r"^Pre-regulation W, ESTIMATE$"), "pre-regulation W ESTIMATE"),
    (re.compile(r"^(.+) pre-regulation, ESTIMATE$"), r"\1 pre-regulation ESTIMATE"),
)


def short_label(label: str) -> str:
    """'Power (W): VDD_IN, module input' -> 'VDD_IN W': the same row, fewer columns."""
    text = label.strip()
    for pattern, repl in _SHORT:
        if pattern.match(text):
            return pattern.sub(repl, text)
    return text


def rich_table(docs: Sequence[ResultDoc], what: str = "jetbench results") -> Table:
    from rich.markup import escape
    from rich.table import Table

    headers, rows = table_cells(docs)
    table = Table(title=title(docs, what), title_justify="left")
    table.add_column("")
    for h in headers:
        # escaped: a run directory is said as `[r1]`, which rich would take for a style tag
        # and drop (`report r1 r2` would print two identical rows)
        table.add_column(escape(h), justify="right")
    for label, cells in rows:
        table.add_row(label, *cells)
    return table


def markdown(docs: Sequence[ResultDoc], what: str = "jetbench results") -> str:
    headers, rows = table_cells(docs)
    out = [f"**{title(docs, what)}**", "", "| | " + " | ".join(headers) + " |",
           "|---|" + "---:|" * len(headers)]
    out += [f"| {label.strip()} | " + " | ".join(cells) + " |" for label, cells in rows]
    bad = invalid_lines(docs)
    if bad:
        out += ["", "INVALID results (kept, not comparable):"] + [f"- {line}" for line in bad]
    return "\n".join(out) + "\n"


def long_table(docs: Sequence[ResultDoc], what: str = "jetbench sweep") -> Table:
    """One row per result (a sweep has too many configurations for one column each)."""
    from rich.table import Table

    table = Table(title=title(docs, what), title_justify="left")
    unit = common_unit(schema.unit(d) for d in docs)
    names = ["GPU clock", "model", "precision", "batch",
             rate_label(unit) if unit else "per s", "W",
             efficiency_label(unit) if unit else "per J", "status"]
    if unit is None:  # mixed units: each row says what it counts
        names.insert(4, "unit")
    runtimes = {schema.runtime_label(d.get("workload") or {}) for d in docs}
    if runtimes != {"torch"}:  # --runtime: each row says what ran it
        names.insert(2, "runtime")
    for name in names:
        table.add_column(name, justify="right" if name not in ("model", "runtime", "precision",
                                                               "status", "unit") else "left")
    for d in docs:
        w = d.get("workload") or {}
        hz = schema.gpu_hz(d)
        status = str(d.get("status"))
        if (d.get("thermal") or {}).get("throttled"):
            status += " (throttled)"
        if not schema.is_valid(d):
            status += " INVALID"
        power_pct = schema.total_w_pct(d)
        cells = [format_hz(hz) if hz else "-", str(w.get("model")), str(w.get("precision")),
                 str(w.get("batch")), _num(schema.items_per_s(d)),
                 _pm(schema.total_w(d), power_pct, 2),
                 _pm(schema.items_per_j(d), _ipj_pct(d, power_pct), 2), status]
        if unit is None:
            cells.insert(4, schema.unit(d))
        if runtimes != {"torch"}:
            cells.insert(2, schema.runtime_label(w))
        table.add_row(*cells)
    return table




def invalid_lines(docs: Sequence[ResultDoc]) -> List[str]:
    """'<label>: <reason>' for every reason of every invalid result."""
    return [f"{schema.label(d)}: {r}" for d in docs for r in schema.invalid_reasons(d)]


def named(docs: Sequence[ResultDoc]) -> List[str]:
    """Each result's label as a warning names it: with its directory where the results come
    from several (`report r1 r2`: '408 MHz (r1)' beside '408 MHz (r2)', not '408 MHz' twice)."""
    several = len({_run_dir(d) for d in docs}) > 1
    return [schema.label(d) + (f" ({_run_dir(d) or '?'})" if several else "") for d in docs]


def warnings_of(docs: Sequence[ResultDoc]) -> List[str]:
    """Each kind of warning once, with the configurations it applies to (grouped())."""
    pairs: List[Tuple[str, str]] = []
    for d, label in zip(docs, named(docs)):
        for w in d.get("warnings") or []:
            pairs.append((label, w))
        if d.get("message"):
            pairs.append((label, d["message"]))
    return grouped(pairs, len(docs), named(docs))


_NUMBER = re.compile(r"\d+(?:\.\d+)?%?")


def grouped(pairs: Sequence[Tuple[str, str]], total: int = 0,
            labels_of_all: Sequence[str] = ()) -> List[str]:
    """(configuration, text) pairs as one line per kind of text: texts that differ only in
    their numbers are one kind; a number that differs is said as its range in the text and
    listed per configuration, each configuration named by what tells it from the others
    (`short_labels`, over `labels_of_all`: every configuration of the output).

        clocks not pinned (...) [all 4 configurations]
        latency varies 5.3%..15.6% between iterations (over 2.5%): ... [b1 5.3%, b8 15.6%]
    """
    kinds: Dict[str, List[Tuple[str, str]]] = {}
    for label, text in pairs:
        kinds.setdefault(_NUMBER.sub("#", text), [])
        if (label, text) not in kinds[_NUMBER.sub("#", text)]:
            kinds[_NUMBER.sub("#", text)].append((label, text))
    out: List[str] = []
    short = short_labels(labels_of_all) if labels_of_all else {}
    for members in kinds.values():
        labels = list(dict.fromkeys(label for label, _ in members))
        texts = [t for _, t in members]
        if len(set(texts)) == 1:
            where = (", ".join(short.get(lb, lb) for lb in labels)
                     if total < 2 or len(labels) != total
                     else "both configurations" if total == 2
                     else f"all {total} configurations")
            out.append(f"{texts[0]} [{where}]" if len(labels) > 1 or total > 1 else
                       f"{labels[0]}: {texts[0]}")
            continue
        split = [_NUMBER.split(t) for t in texts]
        nums = [_NUMBER.findall(t) for t in texts]
        differ = [k for k in range(len(nums[0])) if len({tuple(n)[k] for n in nums}) > 1]
        parts: List[str] = []
        for k, piece in enumerate(split[0]):
            parts.append(piece)
            if k < len(nums[0]):
                parts.append(_range([n[k] for n in nums]) if k in differ else nums[0][k])
        values = ", ".join(f"{short.get(label, label)} {' / '.join(n[k] for k in differ)}"
                           for (label, _), n in zip(members, nums))
        out.append(f"{''.join(parts)} [{values}]")
    return out


def _range(numbers: Sequence[str]) -> str:
    """'2.9%..4.7%': the smallest and the largest of numbers that differ."""
    ordered = sorted(numbers, key=lambda n: float(n.rstrip("%")))
    return f"{ordered[0]}..{ordered[-1]}"


_UNIT_AFTER = re.compile(r" (MHz|GHz)\b")


def short_labels(labels: Sequence[str]) -> Dict[str, str]:
    """Each configuration label without the words every label shares at its start or its end
    (the network, the clock of a measure, said above the table): 'sim:resnet18 FP16 b1 (sim)
    @ 625 MHz' -> 'FP16 b1' beside 'sim:resnet18 FP32 b8 (sim) @ 625 MHz'. A clock keeps its
    unit; a label is never emptied."""
    words = {lb: _UNIT_AFTER.sub("\u00a0\\1", lb).split(" ") for lb in labels}
    if len(set(labels)) < 2:
        return {lb: lb for lb in labels}
    shortest = min(len(w) for w in words.values())
    head = 0
    while head < shortest - 1 and len({w[head] for w in words.values()}) == 1:
        head += 1
    tail = 0
    while (tail < shortest - head - 1
           and len({w[len(w) - 1 - tail] for w in words.values()}) == 1):
        tail += 1
    out = {}
    for lb, w in words.items():
        kept = w[head:len(w) - tail]
        if kept and kept[0] == "@" and len(kept) > 1:
            kept = kept[1:]
        out[lb] = " ".join(kept).replace("\u00a0", " ")
    return out


def uncertainty_advice(docs: Sequence[ResultDoc]) -> List[str]:
    """Where img/s/W's uncertainty exceeds 1% (MLPerf Power's bound), say so and what would
    lower it: once per kind, with the configurations (grouped())."""
    pairs: List[Tuple[str, str]] = []
    for d, label in zip(docs, named(docs)):
        unc = (d.get("efficiency") or {}).get("uncertainty") or {}
        pct = unc.get("images_per_j_pct")
        if schema.items_per_j(d) is None or (pct is not None and pct <= UNCERTAINTY_BOUND_PCT):
            continue
        eff = efficiency_label(schema.unit(d))
        if pct is None:
            # why, once: the reason every power cell above reads `+- unknown`
            why = (((d.get("power") or {}).get("total") or {}).get("uncertainty")
                   or {}).get("basis")
            text = (f"{eff} uncertainty is unknown"
                    + (f" (so every power figure reads +- unknown: {why})" if why else "")
                    + f", so it cannot be shown within {UNCERTAINTY_BOUND_PCT:g}% "
                    "(MLPerf Power's bound)")
        else:
            text = (f"{eff} uncertainty {pct:.1f}% exceeds "
                    f"{UNCERTAINTY_BOUND_PCT:g}% (MLPerf Power's bound)")
        lower = unc.get("lower_it") or []
        pairs.append((label, text + (": lower it with " + "; or ".join(lower) if lower
                                     else "")))
    return grouped(pairs, len(docs), named(docs))


def _mode_text(mode: Optional[PowerModeDoc]) -> str:
    """'1 5W', or '1 5W, caps lifted' for a point run with --beyond-power-mode."""
    if not mode:
        return "-"
    return str(mode.get("text") or "-") + (", caps lifted" if mode.get("caps_lifted") else "")
