"""`jetbench report A.json --compare B.json`: the change per metric, for a regression check
between two boards or two software versions. Pure: dicts in, rows out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from ..documents import ResultDoc
from ..errors import UsageError
from ..work_units import efficiency_label, rate_label
from . import schema
from .verdict import (
    EFFICIENCY,
    LATENCY_P50,
    LATENCY_P99,
    POWER,
    RATE,
    Reading,
    Verdict,
    compared_pcts,
    reading_of,
)
from .verdict import compare as compare_readings


@dataclass(frozen=True)
class Change:
    metric: str
    ra: Reading
    rb: Reading
    higher_is_better: Optional[bool]  # None: a setting, not a result (no better or worse)

    @property
    def a(self) -> Optional[float]:
        return self.ra.value

    @property
    def b(self) -> Optional[float]:
        return self.rb.value

    @property
    def delta(self) -> Optional[float]:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def ratio(self) -> Optional[float]:
        """Relative change b/a - 1 (None when a is missing or zero)."""
        return None if self.a in (None, 0) or self.b is None else self.b / self.a - 1.0

    @property
    def noise(self) -> Tuple[Optional[float], Optional[float]]:
        """Each result's uncertainty (%) as the comparison counts it (report/verdict.py)."""
        return compared_pcts(self.ra, self.rb)

    @property
    def judged(self) -> Verdict:
        """The one rule's verdict (report/verdict.py)."""
        return compare_readings(self.ra, self.rb, self.higher_is_better)

    @property
    def verdict(self) -> str:
        return "-" if self.a is None or self.b is None else self.judged.word

    def to_dict(self) -> Dict[str, object]:  # as --compare --json prints it
        pa, pb = self.noise
        judged = self.judged
        return {"metric": self.metric, "a": self.a, "b": self.b, "delta": self.delta,
                "change": self.ratio, "a_pct": pa, "b_pct": pb, "verdict": self.verdict,
                "why": judged.why or None}


_Getter = Callable[[ResultDoc], Optional[float]]
# (name: 'rate'/'efficiency' take the unit's labels; the figure as report/verdict.py reads it;
# higher is better, None for a setting)
_METRICS: List[Tuple[str, str, Optional[bool]]] = [
    ("rate", RATE, True),
    ("latency p50 (ms)", LATENCY_P50, False),
    ("latency p99 (ms)", LATENCY_P99, False),
    ("power (W)", POWER, False),
    ("efficiency", EFFICIENCY, True),
]
_CLOCK: _Getter = lambda d: hz / 1e6 if (hz := schema.gpu_hz(d)) else None  # noqa: E731


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
    out = [Change(names.get(name, name), reading_of(a, figure), reading_of(b, figure), better)
           for name, figure, better in _METRICS]
    clock_a, clock_b = _float(_CLOCK(a)), _float(_CLOCK(b))
    out.append(Change("GPU clock (MHz)", Reading(clock_a, None), Reading(clock_b, None), None))
    return out


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
