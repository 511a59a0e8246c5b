"""`jetbench tune`'s Pareto plot (plots.py's figure conventions): img/s against img/s/W of every
trial, each point labelled by what tells it from the others (its clocks; the title says what
they share)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from ..tune_documents import TrialDoc, TuneDoc
from ..units import format_hz
from ..work_units import DEFAULT_UNIT, efficiency_label, rate_label
from . import plots

if TYPE_CHECKING:
    from matplotlib.axes import Axes

LABEL_ALL_UP_TO = 12  # distinct points: each labelled; more, only the front and the best
SETTING_KEYS = ("model", "precision", "batch")  # beside the <knob>_hz clocks


def point_labels(trials: Sequence[TrialDoc]) -> Dict[Tuple[Tuple[str, object], ...], str]:
    """Each distinct point's label, by its settings (as `_point_key`): only what differs
    between the points ('768 MHz' where the GPU clock alone differs; 'gpu 768 MHz emc 1.6
    GHz' where two clocks do; 'b8 768 MHz'), never the full configuration name."""
    settings = [t.get("settings") or {} for t in trials]
    keys = [k for k in dict.fromkeys(k for s in settings for k in s)
            if k in SETTING_KEYS or k.endswith("_hz")]
    differ = [k for k in keys if len({repr(s.get(k)) for s in settings}) > 1]
    clocks = [k for k in differ if k.endswith("_hz")]
    out = {}
    for s in settings:
        parts: List[str] = []
        for k in differ:
            v = s.get(k)
            if k in clocks:
                hz = format_hz(v) if isinstance(v, int) else "?"
                parts.append(hz if len(clocks) == 1 else f"{k[:-3]} {hz}")
            else:
                parts.append(f"b{v}" if k == "batch" else str(v))
        out[_point_key(s)] = " ".join(parts)
    return out


def _label_points(ax: Axes, points: Sequence[Tuple[TrialDoc, Tuple[float, float]]],
                  shown: Sequence[TrialDoc]) -> None:
    """Each distinct point labelled once (where it was read more than once: at its readings'
    mean), by what differs; with more than LABEL_ALL_UP_TO points, only those of `shown`
    (the front and the best) are."""
    labels = point_labels([t for t, _ in points])
    at: Dict[Tuple[Tuple[str, object], ...], List[Tuple[float, float]]] = {}
    for t, xy in points:
        at.setdefault(_point_key(t.get("settings")), []).append(xy)
    keep = set(at) if len(at) <= LABEL_ALL_UP_TO else {
        _point_key(t.get("settings")) for t in shown}
    middle = sum(ax.get_xlim()) / 2
    for key in [k for k in at if k in keep and labels.get(k)]:
        xs, ys = zip(*at[key])
        x = sum(xs) / len(xs)
        right = x > middle  # (the label on the side towards the middle: inside the axes)
        ax.annotate(labels[key], (x, sum(ys) / len(ys)), fontsize=7, color="0.25",
                    xytext=(-5 if right else 5, 5), textcoords="offset points",
                    ha="right" if right else "left")


def _point_key(settings: object) -> Tuple[Tuple[str, object], ...]:
    return tuple(sorted((settings or {}).items())) if isinstance(settings, dict) else ()


def plot_pareto(doc: TuneDoc, path: Path,
                limits: Sequence[Tuple[str, float, str]] = ()) -> Optional[Path]:
    """`jetbench tune`'s study (tune.json's document): img/s against img/J of every trial,
    feasible ones filled, the front joined, the best marked, `limits` (metric, value, label:
    the constraints on these two axes) drawn; the caveat when simulated."""
    def xy(t: Optional[TrialDoc]) -> Optional[Tuple[float, float]]:  # (img/J, img/s)
        m = (t or {}).get("metrics") or {}
        ipj, ips = m.get("images_per_j"), m.get("images_per_s")
        return (ipj, ips) if ipj and ips else None

    points = [(t, at) for t in doc["trials"] for at in [xy(t)] if at is not None]
    if not points:
        return None
    unit = doc.get("unit", DEFAULT_UNIT)
    per_j = efficiency_label(unit)
    plt = plots._plt()
    fig, ax = plt.subplots(figsize=(7, 4.8))
    styles: Tuple[Tuple[bool, Dict[str, str]], ...] = (
        (False, dict(facecolors="none", edgecolors="0.6", label="infeasible or invalid")),
        (True, dict(color="tab:blue", label="feasible")))
    for ok, style in styles:
        drawn = [at for t, at in points if t.get("feasible") is ok]
        if drawn:
            ax.scatter([x for x, _ in drawn], [y for _, y in drawn], s=28, **style)
    # each point's per-joule uncertainty (the rule that calls two points a tie), where known
    known = [(x, y, x * pct / 100.0) for t, (x, y) in points
             for pct in [((t.get("metrics") or {}).get("images_per_j_uncertainty_pct"))]
             if isinstance(pct, (int, float)) and pct > 0]
    if known:
        ax.errorbar([x for x, _, _ in known], [y for _, y, _ in known],
                    xerr=[e for _, _, e in known], fmt="none", ecolor="0.45", elinewidth=0.8,
                    capsize=2, label=f"{per_j} uncertainty")
    front = sorted(at for at in map(xy, doc["pareto"]) if at is not None)
    if len(front) > 1:
        ax.plot([x for x, _ in front], [y for _, y in front], color="tab:orange", lw=1,
                label="Pareto front")
    for metric, value, label in limits:
        line = ax.axhline if metric == "images_per_s" else ax.axvline
        line(value, color="tab:red", ls="--", lw=1, label=label)
    best = doc.get("best")
    best_at = xy(best)
    if best_at is not None:
        ax.scatter([best_at[0]], [best_at[1]], marker="*", s=220, color="tab:green", zorder=5,
                   label="best")
    _label_points(ax, points, [*doc["pareto"], *([best] if best else [])])
    s = (best or points[0][0]).get("settings") or {}
    what = "a command" if s.get("model") == "command" else f"{s.get('model')} {s.get('precision')}"
    title = f"jetbench tune: {what} ({len(points)} trials)"
    ax.set_title(title + (" [SIMULATED]" if doc["simulated"] else ""))
    ax.set_xlabel(f"{per_j} ({unit} per joule)")
    ax.set_ylabel(rate_label(unit))
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    if doc["simulated"]:
        fig.text(0.01, 0.01, "simulated board: figures from jetbench's models, not hardware",
                 fontsize=7, color="0.4")
    fig.tight_layout()
    return plots._save(fig, path)


