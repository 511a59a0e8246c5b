"""`jetbench info`'s tables: the board (with its power mode, what is not in force, the EMC's
limit and the caps between table entries), its clocks, rails and power sources."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterable, List, Tuple

from ..units import format_hz
from .render import _compact_table, _table_size, _watts_pm, sim_tag

if TYPE_CHECKING:
    from rich.table import Table

    from ..inventory import InfoDoc, InfoEmcDoc


def emc_limit_text(emc: InfoEmcDoc) -> str:
    """'2.133 GHz: the power mode's cap (/sys/kernel/nvpmodel_clk_cap/emc); table top 3.199
    GHz' and/or the firmware's ceiling this boot."""
    parts = []
    if emc.get("cap_hz"):
        parts.append(f"{format_hz(emc['cap_hz'])}: the power mode's cap ({emc['cap_file']})")
    if emc.get("ceiling_hz"):
        parts.append(f"{format_hz(emc['ceiling_hz'])}: the firmware's ceiling this boot "
                     f"({emc['ceiling_why']})")
    return "; ".join(parts) + f"; table top {format_hz(emc['table_max_hz'])}"


def _runs_under(doc: InfoDoc) -> List[str]:
    """Each max that is no table entry (a power mode's cap between two) and the entry that runs
    under it: 'gpu max 800 MHz runs 675.8 MHz'."""
    out = []
    rows = [(c["name"] if c["name"] == c["domain"] else f"{c['domain']} {c['name']}",
             c["max_hz"], c["available_hz"]) for c in doc["clocks"]]
    for name, max_hz, table in rows:
        if max_hz is None or not table or max_hz in table:
            continue
        below = [hz for hz in table if hz <= max_hz]
        if below:
            out.append(f"{name} max {format_hz(max_hz)} runs {format_hz(max(below))}")
    return out


def info_tables(doc: InfoDoc) -> Iterable[Table]:
    from ..inventory import cpu_label

    board = doc["board"]
    head = _compact_table("Board" + sim_tag(doc["simulated"]), "key", "value", header=False)
    head.add_row("model", str(board.get("model") or "-"))
    head.add_row("release", ", ".join(f"{key} {board.get(key) or '-'}"
                                      for key in ("family", "soc", "l4t")))
    head.add_row("root", str(board.get("root") or "-"))
    mode = board.get("power_mode")
    head.add_row("power mode", mode["text"] if mode else "- (no nvpmodel)")
    for differ in (mode or {}).get("not_in_force", []):
        head.add_row("[yellow]not in force[/]", differ)
    gpu = []
    if doc["gpu"] and doc["gpu"].get("load_pct") is not None:
        gpu.append(f"load {doc['gpu']['load_pct']:.1f} %")
    if doc["gpu"] and doc["gpu"]["railgate"] is not None:
        gpu.append(f"railgate {doc['gpu']['railgate']} ({doc['gpu']['railgate_file']})")
    if gpu:
        head.add_row("gpu", ", ".join(gpu))
    if doc["fan"]:
        head.add_row("fan pwm", str(doc["fan"]["pwm"]))
    emc = doc.get("emc")
    if emc and (emc.get("cap_hz") or emc.get("ceiling_hz")):
        head.add_row("emc limit", emc_limit_text(emc))
    runs = _runs_under(doc)
    if runs:  # a cap between two table entries: the entry below it is what runs
        head.add_row("caps", "; ".join(runs))
    for g in doc.get("nvml_gpus", ()):
        limit = "-" if g["power_limit_mw"] is None else f"{g['power_limit_mw'] / 1000:g} W"
        bounds = g["power_limits_mw"]
        if bounds:
            limit += f" (settable {bounds[0] / 1000:g} .. {bounds[1] / 1000:g} W)"
        head.add_row(f"gpu {g['bus_id']}", f"{g['name']} via NVML; power limit {limit}")
    cpu = doc.get("cpu") or {}
    if cpu.get("offline"):
        head.add_row("cpus online", f"{cpu_label(cpu['online'])} ({cpu_label(cpu['offline'])} "
                                    "offline)")
    if cpu.get("idle_disabled"):
        by_states: Dict[Tuple[str, ...], List[int]] = {}
        for name, states in cpu["idle_disabled"].items():
            by_states.setdefault(tuple(states), []).append(int(name[3:]))
        head.add_row("idle disabled", "; ".join(
            f"{cpu_label(cpus)}: {', '.join(states)}" for states, cpus in by_states.items()))
    live = doc.get("power_now")
    if live:  # one reading of the board's own rails now, digits from its uncertainty
        parts = live["channels"]  # a sum: its rails are named in the rails table below
        what = live["name"] if len(parts) == 1 else f"sum of {len(parts)} rails"
        head.add_row("power now", f"{_watts_pm(live['power_w'], live['power_w_uncertainty_w'])}"
                                  f": {what} at {live['point'].replace('_', ' ')} "
                                  f"({live['source']})")
    if doc["thermal"]:
        head.add_row("temperatures", ", ".join(
            f"{z['name']} {'-' if z['temp_c'] is None else format(z['temp_c'], '.1f') + ' C'}"
            for z in doc["thermal"]))
    for note in doc["notes"]:
        head.add_row("note", note)
    if doc["restore_pending"]:
        head.add_row("state", "[yellow]clocks changed by jetbench: `jetbench restore` undoes[/]")
    yield head

    clocks = _compact_table("Clocks", "clock", "governor", "min", "max", "current", "steps")
    # one row per cluster, with its cores; clusters whose every cell reads the same are one
    # row on the screen (Xavier's four: `cpu0-7 (4 policies)`; `info --json` keeps each)
    rows: Dict[Tuple[str, ...], Tuple[List[int], int]] = {}
    for cluster in doc.get("cpu_clusters", []):
        cur = [c for c in cluster["cur_hz"] if c is not None]
        now = format_hz(cur[0]) if cur and min(cur) == max(cur) else \
            (f"{format_hz(min(cur))}..{format_hz(max(cur))}" if cur else "-")
        cells: Tuple[str, ...] = (
            str(cluster["governor"] or "-"), format_hz(cluster["min_hz"]),
            format_hz(cluster["max_hz"]), now, _table_size(cluster["available_hz"]))
        if cluster.get("offline") or not cluster.get("cpus"):
            cells = (str(cluster["name"]),) + cells  # its own row: its name says what is offline
        cpus, policies = rows.get(cells, ([], 0))
        rows[cells] = (cpus + list(cluster.get("cpus") or []),
                       policies + len(cluster["policies"]))
    for cells, (cpus, policies) in rows.items():
        name = cells[0] if len(cells) == 6 else cpu_label(cpus)
        clocks.add_row(f"{name} ({policies} polic{'y' if policies == 1 else 'ies'})",
                       *cells[-5:])
    for c in doc["clocks"]:
        if c["domain"] == "cpu" and "cpu_clusters" in doc:
            continue
        name = c["name"] if c["name"] == c["domain"] else f"{c['domain']} {c['name']}"
        clocks.add_row(name, c["governor"] or "-", format_hz(c["min_hz"]),
                       format_hz(c["max_hz"]), format_hz(c["cur_hz"]),
                       _table_size(c["available_hz"]))
    if not doc["clocks"]:
        clocks.add_row("nothing to pin here", "", "", "", "", "")
    yield clocks

    if doc["rails"]:
        total = doc["total"] if len(str(doc["total"])) <= 40 else "a sum (sources, below)"
        rails = _compact_table(f"Power rails - total: {total}",
                               "rail", "sensor", "channel", "driver", "measures")
        for r in doc["rails"]:
            rails.add_row(r["name"] + (" (total)" if r["is_total"] else ""), r["sensor"],
                          str(r["channel"]), f"{r.get('chip', 'ina3221')} {r['layout']}",
                          r["point"].replace("_", " "))
        yield rails
    if doc.get("sources"):
        sources = _compact_table("Power sources (what a measurement records)", "source",
                                 "what", header=False)
        for src in doc["sources"]:
            chans = ", ".join(f"{c['name']} ({c['point'].replace('_', ' ')})"
                              for c in src["channels"]) or "none: power is not measured"
            sources.add_row(src["name"], f"{chans}; total {src['total'] or '-'}; every "
                                         f"{src['period_s']:g} s")
        yield sources
