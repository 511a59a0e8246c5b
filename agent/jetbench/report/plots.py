"""PNG plots (matplotlib, Agg backend, imported here only): the power trace of a run with the
warm-up and the measured window shaded; img/s and img/s/W against the GPU clock; throughput
against batch size (the Addfor/Dell minibatch curves). Titles say SIMULATED when it is. (tune's
Pareto plot: pareto_plot.py.)"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import (
    TYPE_CHECKING,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
    cast,
)

from ..documents import ResultDoc
from ..units import format_hz
from ..work_units import DEFAULT_UNIT, common_unit, efficiency_label, rate_label
from . import schema
from .io import read_trace_csv, trace_path
from .verdict import differ

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 100
SIZE_IN = (9.0, 5.0)


def _plt() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _suffix(simulated: bool) -> str:
    return " - SIMULATED board" if simulated else ""


def _board(docs: Sequence[ResultDoc]) -> str:
    return ", ".join(sorted({(d.get("board") or {}).get("model") or "?" for d in docs}))


def _legend_outside(ax: Axes) -> None:
    """The legend beside the axes (right), never over the data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small",
                  borderaxespad=0.0)


# When img/s comes from this machine's CPU on a simulated board it does not follow the
# simulated clock: said on the figure itself, which travels without the terminal's notes.
SIM_CAVEAT = ("SIMULATED board: img/s comes from this machine's CPU and does not follow the "
              "simulated GPU clock (only W does)")


def _caveat(fig: Figure, docs: Sequence[ResultDoc]) -> None:
    if any(d.get("simulated") and (d.get("workload") or {}).get("framework") != "sim"
           for d in docs):
        from matplotlib.layout_engine import ConstrainedLayoutEngine

        engine = fig.get_layout_engine()
        if isinstance(engine, ConstrainedLayoutEngine):  # room below the axes for the line
            engine.set(rect=(0.0, 0.035, 1.0, 0.965))
        fig.text(0.5, 0.008, SIM_CAVEAT, ha="center", va="bottom", fontsize="small",
                 color="darkred")


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=DPI)
    tmp.replace(path)
    _plt().close(fig)
    return path


def plot_trace(doc: ResultDoc, csv_path: Path, out: Path) -> Path:
    """Every channel's watts over the run; warm-up, idle baseline and window shaded; the
    window's mean W drawn across the window."""
    plt = _plt()
    trace = read_trace_csv(csv_path)
    fig, ax = plt.subplots(figsize=SIZE_IN, layout="constrained")
    for name, values in trace["channels"].items():
        pts = [(t, v) for t, v in zip(trace["t_s"], values) if v is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name, linewidth=1)
    phases = (doc.get("power") or {}).get("phases_s") or {}
    spans = [("warm-up", "warmup_start", "idle_start" if "idle_start" in phases
              else "timed_start", "0.85"),
             ("idle baseline", "idle_start", "timed_start", "#d0e8ff"),
             ("measured window", "timed_start", "timed_end", "#ffe9b0")]
    for name, a, b, colour in spans:
        if a in phases and b in phases and phases[b] > phases[a]:
            ax.axvspan(phases[a], phases[b], color=colour, alpha=0.6, label=name, zorder=0)
    total = (doc.get("power") or {}).get("total") or {}
    if total.get("mean_w") is not None and "timed_start" in phases and "timed_end" in phases:
        ax.hlines(total["mean_w"], phases["timed_start"], phases["timed_end"], colors="black",
                  linestyles="--", linewidth=1.5, zorder=5,
                  label=f"window mean {total.get('name', '')} {total['mean_w']:.2f} W")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("power (W)")
    bad = "" if schema.is_valid(doc) else " - INVALID"
    ax.set_title(f"Power trace: {schema.label(doc)}{bad}\n{_board([doc])}"
                 f"{_suffix(bool(doc.get('simulated')))}", fontsize="medium")
    _legend_outside(ax)
    ax.grid(True, alpha=0.3)
    _caveat(fig, [doc])
    return _save(fig, out)


class FreqPoint(TypedDict, total=False):
    """One point of a line of plot_vs_freq (freq_series)."""
    mhz: float
    images_per_s: Optional[float]
    images_per_s_err: Optional[float]
    watts: Optional[float]
    watts_err: Optional[float]
    images_per_j: Optional[float]
    images_per_j_err: Optional[float]
    images_per_j_range: Optional[Tuple[float, float]]  # repeats: their lowest and highest
    valid: bool
    repeats: int


def _figure(point: FreqPoint, key: str) -> Optional[float]:
    value = cast(Mapping[str, object], point).get(key)
    return float(value) if isinstance(value, (int, float)) else None


def _batch(doc: ResultDoc) -> int:
    batch = doc.get("workload", {}).get("batch")
    return batch if isinstance(batch, int) else 0


def _groups(docs: Sequence[ResultDoc], key: Callable[[ResultDoc], str]
            ) -> Dict[str, List[ResultDoc]]:
    out: Dict[str, List[ResultDoc]] = {}
    for d in docs:
        if schema.is_ok(d):
            out.setdefault(key(d), []).append(d)
    return out


def _series_key_freq(docs: Sequence[ResultDoc]) -> Callable[[ResultDoc], str]:
    """Network/precision/batch, plus the board when the results come from several boards:
    results of one configuration on one board from several runs (directories, dates) are
    repeats of one series, never a second line."""
    boards_differ = len({(d.get("board") or {}).get("model") for d in docs}) > 1

    def key(d: ResultDoc) -> str:
        board = f" ({(d.get('board') or {}).get('model') or '?'})" if boards_differ else ""
        return schema.label(d, with_clock=False) + board

    return key


def _mean_of_repeats(pts: List[FreqPoint]) -> FreqPoint:
    """Valid points at one clock: the mean, with an error bar that covers both the spread of
    the repeats (sample standard deviation) and their own mean uncertainty."""
    import statistics

    def mean(key: str) -> Optional[float]:
        values = [v for v in (_figure(p, key) for p in pts) if v is not None]
        return statistics.fmean(values) if values else None

    ipj = [p["images_per_j"] for p in pts if p["images_per_j"] is not None]
    own = [p["images_per_j_err"] for p in pts if p["images_per_j_err"] is not None]
    spread = statistics.stdev(ipj) if len(ipj) >= 2 else 0.0
    err: Optional[float] = max(spread, statistics.fmean(own)) if own else (
        spread if len(ipj) >= 2 else None)
    return {"mhz": pts[0]["mhz"], "images_per_s": mean("images_per_s"),
            "images_per_s_err": mean("images_per_s_err"), "watts": mean("watts"),
            "watts_err": mean("watts_err"),
            "images_per_j": mean("images_per_j"), "images_per_j_err": err,
            "images_per_j_range": (min(ipj), max(ipj)) if ipj else None,
            "repeats": len(pts), "valid": True}


def _series_key_batch(d: ResultDoc) -> str:
    """Network, precision, runtime (when not torch) and clock: a series per runtime, so
    `--runtime torch,onnxruntime` over batches draws two lines, not one that zigzags."""
    w = d.get("workload") or {}
    hz = schema.gpu_hz(d)
    clock = f" @ {format_hz(hz)}" if hz else ""
    runtime = schema.runtime_label(w)
    ran = "" if runtime == "torch" else f", {runtime}"
    return f"{w.get('model')} {str(w.get('precision')).upper()}{ran}{clock}"


def freq_series(docs: Sequence[ResultDoc]) -> Dict[str, List[FreqPoint]]:
    """What `plot_vs_freq` draws, per series (pure, for tests): each point's clock (MHz), img/s,
    img/s/W, the img/s/W error bar (from `efficiency.uncertainty`; None = unknown) and whether
    the result is valid."""
    out: Dict[str, List[FreqPoint]] = {}
    for name, group in _groups(docs, _series_key_freq(docs)).items():
        pts: List[FreqPoint] = []
        for d in group:
            hz, ipj = schema.gpu_hz(d), schema.items_per_j(d)  # in the result's own unit
            if not hz:
                continue
            pct = schema.images_per_j_pct(d)
            ips = schema.items_per_s(d)
            cv = (d.get("throughput") or {}).get("cv")
            w = schema.total_w(d)
            w_pct = schema.total_w_pct(d)
            pts.append({"mhz": hz / 1e6, "images_per_s": ips,
                        "images_per_s_err": None if ips is None or cv is None else ips * cv,
                        "watts": w,
                        "watts_err": None if w is None or w_pct is None else w * w_pct / 100,
                        "images_per_j": ipj,
                        "images_per_j_err": None if ipj is None or pct is None
                        else ipj * pct / 100.0,
                        "valid": schema.is_valid(d), "repeats": 1})
        # Repeats (same clock, several runs): one point, their mean with its spread; invalid
        # results stay single points (drawn apart).
        by_clock: Dict[float, List[FreqPoint]] = {}
        for p in pts:
            if p["valid"]:
                by_clock.setdefault(p["mhz"], []).append(p)
        merged = [_mean_of_repeats(g) if len(g) > 1 else g[0] for g in by_clock.values()]
        merged += [p for p in pts if not p["valid"]]
        if merged:
            out[name] = sorted(merged, key=lambda p: p["mhz"])
    return out


def _pct(value: Optional[float], err: Optional[float]) -> Optional[float]:
    return None if err is None or not value else abs(err) / abs(value) * 100


def peak_point(points: Sequence[FreqPoint]) -> Optional[FreqPoint]:
    """The point of a series marked "peak": the most efficient, only where there is a
    series (two points or more) and its img/s/W stands apart from every other point's by the
    rule of every comparison jetbench makes (digits.separated); else None: a single-point
    series has no peak, and neither has one whose best is within noise of the next."""
    rated = [(ipj, p) for p in points for ipj in [p.get("images_per_j")] if ipj is not None]
    if len(rated) < 2 or len(rated) < len(points):
        return None
    best_ipj, best = max(rated, key=lambda r: r[0])
    pct = _pct(best_ipj, best.get("images_per_j_err"))
    # an unknown spread is no verdict, so no peak (report/verdict.py)
    if all(differ(best_ipj, pct, ipj, _pct(ipj, p.get("images_per_j_err"))) is True
           for ipj, p in rated if p is not best):
        return best
    return None


def plot_vs_freq(docs: Sequence[ResultDoc], out: Path) -> Path:
    """img/s (top, error bars from the latency CV), W (middle, the stated uncertainty) and
    img/s/W (bottom, error bars) against the applied GPU clock, one line per
    model/precision/batch; the most efficient valid point of a line is marked where it stands
    apart from the others (peak_point). Invalid
    results are drawn apart (red crosses), never joined to the lines."""
    plt = _plt()
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(SIZE_IN[0], 9.0), sharex=True,
                                              layout="constrained")
    invalid_labelled = False
    series = freq_series(docs)
    for name, pts in series.items():
        if any(p.get("repeats", 1) > 1 for p in pts):
            name += f" (mean of up to {max(p.get('repeats', 1) for p in pts)} runs)"
        good = [p for p in pts if p["valid"]]
        bad = [p for p in pts if not p["valid"]]
        colour = None
        if good:
            line = top.errorbar([p["mhz"] for p in good], [p["images_per_s"] for p in good],
                                yerr=[p.get("images_per_s_err") or 0.0 for p in good],
                                marker="o", capsize=3, label=name)
            colour = line[0].get_color()
        watts = [p for p in good if p.get("watts") is not None]
        if watts:
            middle.errorbar([p["mhz"] for p in watts], [p["watts"] for p in watts],
                            yerr=[p.get("watts_err") or 0.0 for p in watts], marker="o",
                            capsize=3, color=colour, label=name)
        eff = [p for p in good if p["images_per_j"] is not None]
        if eff:
            errs = [p["images_per_j_err"] or 0.0 for p in eff]
            line = bottom.errorbar([p["mhz"] for p in eff], [p["images_per_j"] for p in eff],
                                   yerr=errs, marker="o", capsize=3, color=colour, label=name)
            best = peak_point(eff)
            if best is not None:
                bottom.plot([best["mhz"]], [best["images_per_j"]], marker="*", markersize=16,
                            color=line[0].get_color())
                bottom.annotate(f"peak {format_hz(best['mhz'] * 1e6)}",
                                (best["mhz"], best["images_per_j"]),
                                textcoords="offset points", xytext=(6, 6), fontsize="small")
        for ax, key in ((top, "images_per_s"), (bottom, "images_per_j")):
            shown = [(p["mhz"], v) for p in bad for v in [_figure(p, key)] if v is not None]
            if shown:
                ax.plot([x for x, _ in shown], [y for _, y in shown], linestyle="none",
                        marker="x", markersize=10, color="red",
                        label=None if invalid_labelled else "INVALID (clock not as applied)")
                invalid_labelled = invalid_labelled or ax is top
    unit = common_unit(schema.unit(d) for d in docs) or "items"
    top.set_ylabel(f"{rate_label(unit)}\n(bars: latency CV)")
    middle.set_ylabel("power (W)\n(bars: uncertainty)")
    bottom.set_ylabel(f"{efficiency_label(unit)}\n(bars: uncertainty)")
    bottom.set_xlabel("GPU clock (MHz, the clock that ran)")
    sim = schema.simulated_any(list(docs))
    what = next(iter(series)) if len(series) == 1 else f"{len(series)} configurations"
    top.set_title(f"Throughput, power and efficiency vs GPU clock: {what}\n{_board(docs)}"
                  f"{_suffix(sim)}", fontsize="medium")
    for ax in (top, middle, bottom):
        ax.grid(True, alpha=0.3)
    _legend_outside(top)
    _caveat(fig, docs)
    return _save(fig, out)


def plot_vs_batch(docs: Sequence[ResultDoc], out: Path) -> Path:
    """img/s against batch size (log2 axis, error bars from the latency CV), one line per
    model/precision/clock."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=SIZE_IN, layout="constrained")
    groups = _groups(docs, _series_key_batch)
    for name, group in groups.items():
        pts: List[Tuple[int, Optional[float], float]] = []  # (batch, img/s, its spread)
        for d in group:
            ips = schema.items_per_s(d)
            cv = (d.get("throughput") or {}).get("cv")
            pts.append((_batch(d), ips,
                        0.0 if ips is None or cv is None else ips * cv))
        pts.sort(key=lambda p: p[0])
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts],
                    marker="o", capsize=3, label=name)
    ax.set_xscale("log", base=2)
    batches = sorted({b for b in ((d.get("workload") or {}).get("batch") for d in docs)
                      if isinstance(b, int)})
    ax.set_xticks(batches, [str(b) for b in batches])  # 1, 8, 32: not 2^0, 2^3, 2^5
    ax.minorticks_off()
    ax.set_xlabel("batch size")
    unit = common_unit(schema.unit(d) for d in docs) or "items"
    ax.set_ylabel(f"{rate_label(unit)}\n(bars: latency CV)")
    sim = schema.simulated_any(list(docs))
    what = next(iter(groups)) if len(groups) == 1 else f"{len(groups)} configurations"
    ax.set_title(f"Throughput vs batch size: {what}\n{_board(docs)}{_suffix(sim)}",
                 fontsize="medium")
    ax.grid(True, alpha=0.3)
    _legend_outside(ax)
    _caveat(fig, docs)
    return _save(fig, out)


def _distinct(docs: Sequence[ResultDoc], key: Callable[[ResultDoc], str],
              get: Callable[[ResultDoc], object]) -> bool:
    """True when some series has at least two distinct values of `get`."""
    return any(len({get(d) for d in group}) >= 2 for group in _groups(docs, key).values())


def report_plots(docs: Sequence[ResultDoc], out_dir: Path,
                 traces: bool = True) -> List[Path]:
    """Every plot the results support: vs clock (when a series has 2+ clocks), vs batch
    (2+ batches), and a trace per run whose CSV is beside its JSON."""
    out_dir = Path(out_dir)
    written: List[Path] = []
    by_unit: Dict[str, List[ResultDoc]] = {}
    for d in docs:  # one axis counts one thing: a plot per unit (images keep the old names)
        by_unit.setdefault(schema.unit(d), []).append(d)
    for unit, group in by_unit.items():
        tag = "" if unit == DEFAULT_UNIT else f"-{unit}"
        if _distinct(group, _series_key_freq(group), schema.gpu_hz):
            written.append(plot_vs_freq(group, out_dir / f"efficiency_vs_gpu_clock{tag}.png"))
        if _distinct(group, _series_key_batch, _batch):
            written.append(plot_vs_batch(group, out_dir / f"throughput_vs_batch{tag}.png"))
    if traces:
        for d in docs:
            csv = trace_path(d)
            if schema.is_ok(d) and csv.is_file():
                written.append(plot_trace(d, csv, _unused(out_dir, csv, written)))
    return written


def _unused(out_dir: Path, csv: Path, written: List[Path]) -> Path:
    """`stem.trace.png`; when another result of this call took that name (same stem from
    another directory), `dirname-stem.trace.png`, then `-2`, `-3`...: never overwritten."""
    taken = set(written)
    path = out_dir / f"{csv.stem}.trace.png"
    if path not in taken:
        return path
    stem = f"{csv.parent.name}-{csv.stem}"
    path = out_dir / f"{stem}.trace.png"
    n = 2
    while path in taken:
        path = out_dir / f"{stem}-{n}.trace.png"
        n += 1
    return path


def png_size(path: Path) -> Tuple[int, int]:
    """(width, height) from a PNG's header, without matplotlib (for tests and checks)."""
    head = Path(path).read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
