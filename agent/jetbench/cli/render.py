"""Tables for the terminal (rich). Pure rendering: no hardware access."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..units import format_hz


def sim_tag(simulated: bool) -> str:
    return " [bold magenta](SIMULATED board: not hardware)[/]" if simulated else ""


def _table_range(available: Sequence[int]) -> str:
    if not available:
        return "-"
    return f"{format_hz(min(available))} .. {format_hz(max(available))} ({len(available)})"


def info_tables(doc: Dict[str, Any]) -> Iterable[Any]:
    from rich.table import Table

    board = doc["board"]
    head = Table(title="Board" + sim_tag(doc["simulated"]), show_header=False, title_justify="left")
    head.add_column("key", style="bold")
    head.add_column("value")
    for key in ("model", "family", "soc", "l4t", "root"):
        head.add_row(key, str(board.get(key) or "-"))
    mode = board.get("power_mode")
    head.add_row("power mode", mode["text"] if mode else "- (no nvpmodel)")
    if doc["fan"]:
        head.add_row("fan pwm", str(doc["fan"]["pwm"]))
    if doc["gpu"] and doc["gpu"]["railgate"] is not None:
        head.add_row("gpu railgate", f"{doc['gpu']['railgate']} ({doc['gpu']['railgate_file']})")
    if doc["gpu"] and doc["gpu"].get("load_pct") is not None:
        head.add_row("gpu load", f"{doc['gpu']['load_pct']:.1f} %")
    for g in doc.get("nvml_gpus", ()):
        limit = "-" if g["power_limit_mw"] is None else f"{g['power_limit_mw'] / 1000:g} W"
        bounds = g["power_limits_mw"]
        if bounds:
            limit += f" (settable {bounds[0] / 1000:g} .. {bounds[1] / 1000:g} W)"
        head.add_row(f"gpu {g['bus_id']}", f"{g['name']} via NVML; power limit {limit}")
    cpu = doc.get("cpu") or {}
    from ..inventory import cpu_label

    if cpu.get("offline"):
        head.add_row("cpus online", f"{cpu_label(cpu['online'])} ({cpu_label(cpu['offline'])} "
                                    "offline)")
    if cpu.get("idle_disabled"):
        by_states: Dict[Tuple[str, ...], List[int]] = {}
        for name, states in cpu["idle_disabled"].items():
            by_states.setdefault(tuple(states), []).append(int(name[3:]))
        head.add_row("idle disabled", "; ".join(
            f"{cpu_label(cpus)}: {', '.join(states)}" for states, cpus in by_states.items()))
    for note in doc["notes"]:
        head.add_row("note", note)
    if doc["restore_pending"]:
        head.add_row("state", "[yellow]clocks changed by jetbench: `jetbench restore` undoes[/]")
    yield head

    clocks = Table(title="Clocks", title_justify="left")
    for col in ("domain", "name", "governor", "min", "max", "current", "table"):
        clocks.add_column(col)
    for g in doc.get("cpu_clusters", []):  # one row per cluster, with its cores
        cur = [c for c in g["cur_hz"] if c is not None]
        now = format_hz(cur[0]) if cur and min(cur) == max(cur) else \
            (f"{format_hz(min(cur))} .. {format_hz(max(cur))}" if cur else "-")
        clocks.add_row("cpu", f"{g['name']} ({len(g['policies'])} "
                       f"polic{'y' if len(g['policies']) == 1 else 'ies'})", g["governor"] or "-",
                       format_hz(g["min_hz"]), format_hz(g["max_hz"]), now,
                       _table_range(g["available_hz"]))
    for c in doc["clocks"]:
        if c["domain"] == "cpu" and "cpu_clusters" in doc:
            continue
        clocks.add_row(c["domain"], c["name"], c["governor"] or "-", format_hz(c["min_hz"]),
                       format_hz(c["max_hz"]), format_hz(c["cur_hz"]),
                       _table_range(c["available_hz"]))
    if not doc["clocks"]:
        clocks.add_row("-", "nothing to pin here", "", "", "", "", "")
    yield clocks

    if doc["rails"]:
        rails = Table(title=f"Power rails - total: {doc['total']}", title_justify="left")
        for col in ("rail", "sensor", "channel", "driver", "measures"):
            rails.add_column(col)
        for r in doc["rails"]:
            rails.add_row(r["name"] + (" (total)" if r["is_total"] else ""), r["sensor"],
                          str(r["channel"]), f"{r.get('chip', 'ina3221')} {r['layout']}",
                          r["point"].replace("_", " "))
        yield rails
    if doc.get("sources"):
        sources = Table(title="Power sources (what a measurement records)", title_justify="left")
        for col in ("source", "channels (measurement point)", "total", "period"):
            sources.add_column(col, overflow="fold")
        for src in doc["sources"]:
            chans = ", ".join(f"{c['name']} ({c['point'].replace('_', ' ')})"
                              for c in src["channels"]) or "none: power is not measured"
            sources.add_row(src["name"], chans, src["total"] or "-", f"{src['period_s']:g} s")
        yield sources
    if doc["thermal"]:
        thermal = Table(title="Thermal zones", title_justify="left")
        thermal.add_column("zone")
        thermal.add_column("temp")
        for z in doc["thermal"]:
            thermal.add_row(z["name"], "-" if z["temp_c"] is None else f"{z['temp_c']:.1f} C")
        yield thermal


def plan_lines(steps, title: str, simulated: bool, dry_run: bool) -> List[str]:
    """One line per write (path, old value, new value): readable, greppable, never folded."""
    verb = "planned (dry run: nothing written)" if dry_run else "written"
    lines = [f"[bold]{title}: {verb}[/]{sim_tag(simulated)}"]
    for step in steps:
        lines.append(f"  [cyan]{step.label}[/]")
        for write in step.writes:
            lines.append(f"    {write.path}: {write.old or '(empty)'} -> {write.value}")
    if not steps:
        lines.append("  nothing to change: already set")
    return lines


def requested_table(requested, applied, simulated: bool):
    """Requested values against what reads back from the board."""
    from rich.table import Table

    table = Table(title="Requested vs applied" + sim_tag(simulated), title_justify="left")
    for col in ("domain", "setting", "requested", "resolved", "reads back (min / max / cur)"):
        table.add_column(col)
    by_domain: Dict[str, list] = {}
    for reading in applied:
        by_domain.setdefault(reading.domain, []).append(reading)
    for req in requested:
        back = "; ".join(_counted(
            f"{format_hz(r.min_hz)} / {format_hz(r.max_hz)} / {format_hz(r.cur_hz)}"
            for r in by_domain.get(req.domain, [])
        ))
        table.add_row(req.domain, req.setting, req.requested,
                      format_hz(req.resolved_hz) if req.resolved_hz else "-", back or "-")
    return table


def kv(console, rows: Iterable[Any], title: Optional[str] = None) -> None:
    from rich.table import Table

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in rows:
        table.add_row(str(key), str(value))
    console.print(table)


def _watts_pm(watts: Optional[float], err_w: Optional[float]) -> str:
    """'2.345 +- 0.052 W' (the sensor's worst case on this reading), '2.345 W +- unknown'."""
    if watts is None:
        return "-"
    if err_w is None:
        return f"{watts:.3f} W +- unknown"
    return f"{watts:.3f} +- {err_w:.3f} W"


def monitor_table(row, simulated: bool):
    """One monitor reading: rails and total, clocks, temperatures."""
    from rich.table import Table

    table = Table(title=f"jetbench monitor  t={row.t_s:7.1f} s{sim_tag(simulated)}",
                  title_justify="left")
    for col in ("what", "name", "value", "where"):
        table.add_column(col)
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
    if row.gpu_load_pct is not None:
        table.add_row("load", "gpu", f"{row.gpu_load_pct:.1f} %", "")
    if row.power_mode:
        table.add_row("mode", "nvpmodel", row.power_mode["text"], "")
    for name, temp in row.temps_c.items():
        table.add_row("temp", name, f"{temp:.1f} C", "")
    return table


def _counted(items: Iterable[str]) -> List[str]:
    """Identical entries once, with their count: 14 equal CPU policies are one entry."""
    counts: Dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return [f"{k} (x{n})" if n > 1 else k for k, n in counts.items()]


def _grouped_clocks(clocks: Sequence[Any]) -> List[Any]:
    """(label, reading) with consecutive CPU policies at the same clock and governor merged
    ("policy0..13 (14)"), so a many-core board fits a screen."""
    out: List[Any] = []
    run: List[Any] = []

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


def print_table(con: Any, table: Any) -> None:
    """Print a rich table whole: if its natural width does not fit the terminal, one block per
    row instead (`column  value`), so no number is ever cut to `12…`."""
    from rich.table import Table

    natural = con.measure(table, options=con.options.update_width(10_000)).maximum
    if natural <= con.width:
        con.print(table)
        return
    if table.title:
        con.print(table.title, soft_wrap=True)
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
