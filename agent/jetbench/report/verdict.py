"""The one comparison rule: whether two readings of a figure differ, and which way.

Every verdict jetbench prints goes through `compare` here: sweep's answer ("most efficient"),
`report --compare`, `report`'s peak and its `*`, the plots' stars, tune's "why this point" and
its ties, and the daemon's steps. Two readings differ only where their intervals do not overlap
(`digits.separated`: a spread p % is a factor, x / (1 + p/100) .. x * (1 + p/100)).

Which uncertainty counts: two readings taken on one board with the same meters share those
meters' datasheet limits (a gain error is the same factor in both and cancels in their ratio;
an offset of the same watts moves the ratio by at most that part times their powers' relative
difference), so such a pair is compared with each one's own part (what differs from one reading
to the next: the rate's standard error, the trace's integration and coverage) plus that bound.
Readings from two boards or two meters keep their whole stated uncertainty.

An unknown uncertainty gives no verdict ("better" from two numbers whose noise nobody knows is a
claim from noise): `compare` then says why it is unknown, as the reading states it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..documents import ResultDoc
from . import schema
from .digits import separated

BETTER, WORSE, WITHIN_NOISE, NO_VERDICT = "better", "worse", "within noise", "no verdict"


@dataclass(frozen=True)
class Reading:
    """One figure of one result, as a comparison needs it."""

    value: Optional[float]
    pct: Optional[float]  # its stated uncertainty, % of the value (None: unknown)
    sensor_pct: Optional[float] = None  # the part of `pct` that is the meters' datasheet limits
    power_w: Optional[float] = None  # the power it was read at (the offset bound)
    where: Optional[str] = None  # the board and meters it was read on (None: unknown)
    unknown_why: str = "its uncertainty is unknown"  # said when `pct` is None


@dataclass(frozen=True)
class Verdict:
    word: str  # BETTER, WORSE, WITHIN_NOISE (or "higher"/"lower" for a setting), NO_VERDICT
    why: str = ""  # for NO_VERDICT: the reason, as the reading states it

    @property
    def differs(self) -> Optional[bool]:
        return None if self.word == NO_VERDICT else self.word != WITHIN_NOISE

    def __str__(self) -> str:
        return f"{self.word}: {self.why}" if self.why else self.word


def compared_pcts(a: Reading, b: Reading) -> Tuple[Optional[float], Optional[float]]:
    """Each reading's uncertainty for comparing it with the other (module doc)."""
    if a.pct is None or b.pct is None:
        return a.pct, b.pct
    one_board = a.where is not None and a.where == b.where
    if not one_board or None in (a.sensor_pct, b.sensor_pct, a.power_w, b.power_w):
        return a.pct, b.pct
    assert a.sensor_pct is not None and b.sensor_pct is not None
    assert a.power_w is not None and b.power_w is not None
    common = max(a.sensor_pct, b.sensor_pct) * abs(a.power_w - b.power_w) / \
        max(a.power_w, b.power_w, 1e-12)
    return (max(a.pct - a.sensor_pct, 0.0) + common, max(b.pct - b.sensor_pct, 0.0) + common)


def compare(a: Reading, b: Reading, higher_is_better: Optional[bool] = True) -> Verdict:
    """B against A: BETTER or WORSE where their intervals separate, WITHIN_NOISE where they
    overlap, NO_VERDICT where a value or an uncertainty is unknown. `higher_is_better` None: a
    setting, said as higher or lower (no better or worse)."""
    if a.value is None or b.value is None:
        return Verdict(NO_VERDICT, "a figure is missing")
    if higher_is_better is None:
        return Verdict("same" if a.value == b.value else
                       ("higher" if b.value > a.value else "lower"))
    for r in (a, b):
        if r.pct is None:
            return Verdict(NO_VERDICT, r.unknown_why)
    pa, pb = compared_pcts(a, b)
    assert pa is not None and pb is not None
    if not separated(a.value, pa, b.value, pb):
        return Verdict(WITHIN_NOISE)
    return Verdict(BETTER if (b.value > a.value) == higher_is_better else WORSE)


def differ(a: Optional[float], a_pct: Optional[float], b: Optional[float],
           b_pct: Optional[float]) -> Optional[bool]:
    """Two plain figures (no meters shared): True where their intervals separate, False where
    they overlap, None where a value or a spread is unknown (no verdict)."""
    if a is None or b is None or a_pct is None or b_pct is None:
        return None
    return separated(a, a_pct, b, b_pct)


def best_of(readings: Sequence[Reading], higher_is_better: bool = True
            ) -> Tuple[Optional[int], List[int], Optional[str]]:
    """The index of the best reading, the indices within noise of it, and why no verdict
    could be given (then the best index is None). The best is the highest (lowest) value; it
    is *the* best only where every other reading compares worse than it."""
    known = [(i, r) for i, r in enumerate(readings) if r.value is not None]
    if not known:
        return None, [], "no figure to compare"
    sign = 1 if higher_is_better else -1
    top_i, top = max(known, key=lambda ir: sign * (ir[1].value or 0.0))
    ties = []
    for i, r in known:
        if i == top_i:
            continue
        v = compare(top, r, higher_is_better)
        if v.word == NO_VERDICT:
            return None, [], v.why
        if v.word == WITHIN_NOISE:
            ties.append(i)
    return top_i, ties, None


# The figures a comparison reads from a result: (value, its spread in %, whether the meters'
# datasheet part applies)
RATE, LATENCY_P50, LATENCY_P99, POWER, EFFICIENCY = ("rate", "latency p50", "latency p99",
                                                     "power", "efficiency")
ONE_RATE_WHY = ("the command reports one rate: no spread; print per-iteration times or repeat "
                "it")


def where(doc: ResultDoc) -> Optional[str]:
    """The board and meters a result was read on (two results with the same share the meters'
    datasheet error); None where the result does not say."""
    board = doc.get("board") or {}
    total = (doc.get("power") or {}).get("total") or {}
    if not board.get("model") or not total.get("source"):
        return None
    return "|".join(str(x) for x in (board.get("model"), board.get("root"), total.get("source"),
                                     total.get("name")))


def _spread_why(doc: ResultDoc) -> str:
    basis = str(((doc.get("efficiency") or {}).get("uncertainty") or {}).get("basis") or "")
    if "no per-iteration times" in basis:
        return ONE_RATE_WHY
    return "its throughput's spread is unknown (no timed iterations recorded)"


def reading_of(doc: ResultDoc, figure: str) -> Reading:
    """A result's `figure` (RATE, LATENCY_P50/P99, POWER, EFFICIENCY) as a comparison reads it."""
    if figure == RATE:  # the latency CV: a rate is compared on its iterations' spread
        return Reading(schema.items_per_s(doc), schema.cv_pct(doc),
                       unknown_why=_spread_why(doc))
    if figure in (LATENCY_P50, LATENCY_P99):
        return Reading(schema.latency_ms(doc, figure.split()[1]), schema.cv_pct(doc),
                       unknown_why=_spread_why(doc))
    power, sensor = schema.total_w(doc), schema.total_sensor_pct(doc)
    if figure == POWER:
        total = (doc.get("power") or {}).get("total") or {}
        basis = (total.get("uncertainty") or {}).get("basis") if isinstance(total, dict) else None
        return Reading(power, schema.total_w_pct(doc), sensor, power, where(doc),
                       f"the power's uncertainty is unknown ({basis or 'no stated accuracy'})")
    why = _spread_why(doc) if schema.throughput_pct(doc) is None else \
        "the power's uncertainty is unknown (its meter states no accuracy)"
    return Reading(schema.items_per_j(doc), schema.images_per_j_pct(doc), sensor, power,
                   where(doc), why)
