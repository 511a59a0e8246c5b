"""`jetbench report A.json --compare B.json`: the change per metric, for a regression check
between two boards or two software versions. Pure: dicts in, rows out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from ..documents import ResultDoc
from ..errors import UsageError
from ..work_units import efficiency_label, rate_label
from . import schema


@dataclass(frozen=True)
class Change:
    metric: str
    a: Optional[float]
    b: Optional[float]
    higher_is_better: Optional[bool]  # None: a setting, not a result (no better or worse)
    noise_pct: Optional[float] = None  # the two results' spreads combined (root sum square)

    @property
    def delta(self) -> Optional[float]:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def ratio(self) -> Optional[float]:
        """Relative change b/a - 1 (None when a is missing or zero)."""
        return None if self.a in (None, 0) or self.b is None else self.b / self.a - 1.0

    @property
    def verdict(self) -> str:
        r = self.ratio
        if r is None:
            return "-"
        if abs(r) < 0.01:
            return "same"
        if self.higher_is_better is None:
            return "higher" if r > 0 else "lower"
        if self.noise_pct is not None and abs(r) * 100 <= self.noise_pct:
            return "within noise"
        return "better" if (r > 0) == self.higher_is_better else "worse"

    def to_dict(self) -> Dict[str, object]:  # as --compare --json prints it
        return {"metric": self.metric, "a": self.a, "b": self.b, "delta": self.delta,
                "change": self.ratio, "noise_pct": self.noise_pct, "verdict": self.verdict}




_Getter = Callable[[ResultDoc], Optional[float]]
# (name: 'rate'/'efficiency' take the unit's labels; figure; higher is better, None for a
# setting; its spread in % of itself: the latency CV for img/s and latency, the stated
# uncertainty for W and img/s/W)
_METRICS: List[Tuple[str, _Getter, Optional[bool], Optional[_Getter]]] = [
    ("rate", schema.items_per_s, True, schema.cv_pct),
    ("latency p50 (ms)", lambda d: schema.latency_ms(d, "p50"), False, schema.cv_pct),
    ("latency p99 (ms)", lambda d: schema.latency_ms(d, "p99"), False, schema.cv_pct),
    ("power (W)", schema.total_w, False, schema.total_w_pct),
    ("efficiency", schema.items_per_j, True, schema.images_per_j_pct),
    ("GPU clock (MHz)", lambda d: hz / 1e6 if (hz := schema.gpu_hz(d)) else None,
     None, None),
]


def _combined(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or b is None else (a * a + b * b) ** 0.5


def check_units(a: ResultDoc, b: ResultDoc) -> str:
    """The unit both results count; UsageError when they count different things (an img/s
    against a tokens/s is no regression check)."""
    ua, ub = schema.unit(a), schema.unit(b)
    if ua != ub:
        raise UsageError(f"cannot compare results in different units: A counts {ua} "
                         f"({efficiency_label(ua)}), B counts {ub} ({efficiency_label(ub)})",
                         hint="compare results of the same kind of work")
    return ua


def compare(a: ResultDoc, b: ResultDoc) -> List[Change]:
    unit = check_units(a, b)
    names = {"rate": rate_label(unit), "efficiency": efficiency_label(unit)}
    return [Change(names.get(name, name), _float(get(a)), _float(get(b)), better,
                   None if spread is None else _combined(spread(a), spread(b)))
            for name, get, better, spread in _METRICS]


def _float(x: Optional[float]) -> Optional[float]:
    return None if x is None else float(x)


def caveats(a: ResultDoc, b: ResultDoc) -> List[str]:
    """What makes the two results not like-for-like."""
    out = []
    wa, wb = a.get("workload") or {}, b.get("workload") or {}
    for key in ("model", "precision", "batch", "device"):
        if wa.get(key) != wb.get(key):
            out.append(f"different {key}: {wa.get(key)} vs {wb.get(key)}")
    if schema.total_label(a) != schema.total_label(b):
        out.append(f"power measured at different points: {schema.total_label(a)} vs "
                   f"{schema.total_label(b)}")
    mode_a, mode_b = _power_mode(a), _power_mode(b)
    if mode_a != mode_b:
        out.append(f"different power modes (nvpmodel): {mode_a or 'not recorded'} vs "
                   f"{mode_b or 'not recorded'}: the clocks' ceilings differ, results are not "
                   "comparable")
    if bool(a.get("simulated")) != bool(b.get("simulated")):
        out.append("one result is from a SIMULATED board")
    for name, doc in (("A", a), ("B", b)):
        if not schema.is_valid(doc):
            out.append(f"{name} is INVALID: " + "; ".join(schema.invalid_reasons(doc)))
    ea, eb = schema.items_per_j(a), schema.items_per_j(b)
    pa, pb = schema.images_per_j_pct(a), schema.images_per_j_pct(b)
    if ea and eb and pa is not None and pb is not None \
            and 0.01 <= abs(eb / ea - 1) <= (pa + pb) / 100:  # a verdict the figures cannot carry
        out.append(f"the {efficiency_label(schema.unit(a))} change ({eb / ea - 1:+.1%}) is "
                   "within the two results' "
                   f"uncertainties (+-{pa:.1f}% and +-{pb:.1f}%)")
    return out


def _power_mode(doc: ResultDoc) -> Optional[str]:
    """'1 5W', with ', caps lifted' for a run past the mode (--beyond-power-mode): within the
    mode and past it are not the same ceilings."""
    mode = (doc.get("board") or {}).get("power_mode")
    if not mode:
        return None
    text = mode.get("text") or str(mode.get("id"))
    return text + (", caps lifted" if mode.get("caps_lifted") else "")
