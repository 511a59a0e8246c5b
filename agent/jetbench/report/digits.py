"""How a measured figure is written for a reader: significant digits that match its
uncertainty (the one formatter of measure's table, sweep and report), and the rounding of the
numbers a result file stores.

    plus_minus(0.0656, 0.017)  -> '0.066 +- 0.017'   (the uncertainty to 2 significant digits,
    plus_minus(12.56, 0.38)    -> '12.6 +- 0.4'       the value to the same decimal place, but
    plus_minus(365.1, 0.38)    -> '365 +- 0.4'        never more than 3 significant digits)
    significant(0.06561)       -> '0.0656'

An uncertainty that is not zero is never printed as 0."""

from __future__ import annotations

import math
from typing import Optional

SIGNIFICANT = 3       # digits of a value shown alone, and at most beside its uncertainty
ERR_SIGNIFICANT = 2   # digits of an uncertainty
STORED_SIGNIFICANT = 9  # result files: removes float noise (12.514999999999999 -> 12.515),
#                         far finer than any instrument jetbench reads
CSV_DECIMALS = 6      # trace CSV: 1 uW / 1 uJ, the resolution of a mV x mA product


def _exponent(x: float) -> int:
    return math.floor(math.log10(abs(x)))


def _fixed(x: float, decimals: int) -> str:
    if decimals <= 0:
        return f"{round(x, decimals):.0f}"
    return f"{x:.{decimals}f}"


def significant(x: Optional[float], digits: int = SIGNIFICANT) -> str:
    """`x` with `digits` significant digits, in fixed notation ('-' for none)."""
    if x is None:
        return "-"
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    return _fixed(x, digits - 1 - _exponent(x))


def plus_minus(x: Optional[float], err: Optional[float]) -> str:
    """'value +- uncertainty' with digits that match (see the module docstring); 'x +- unknown'
    without an uncertainty; '-' without a value."""
    if x is None:
        return "-"
    if err is None:
        return f"{significant(x)} +- unknown"
    err = abs(err)
    if err == 0 or not math.isfinite(err):
        return f"{significant(x)} +- {err:g}"
    decimals = ERR_SIGNIFICANT - 1 - _exponent(err)
    if x != 0 and math.isfinite(x):
        decimals = min(decimals, SIGNIFICANT - 1 - _exponent(x))
    err_text = _fixed(err, decimals)
    if float(err_text) == 0:  # the value's digits would round the uncertainty away
        err_text = significant(err, 1)
    return f"{_fixed(x, decimals)} +- {err_text}"


def plus_minus_pct(x: Optional[float], pct: Optional[float]) -> str:
    """plus_minus with the uncertainty given in percent of the value."""
    return plus_minus(x, None if pct is None or x is None else abs(x) * pct / 100.0)


def stored(doc: object) -> object:
    """`doc` with every float rounded to STORED_SIGNIFICANT digits (what a result file keeps)."""
    if isinstance(doc, float):
        return float(f"{doc:.{STORED_SIGNIFICANT}g}") if math.isfinite(doc) else doc
    if isinstance(doc, dict):
        return {k: stored(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [stored(v) for v in doc]
    return doc


def csv_cell(x: float) -> str:
    """A trace CSV cell: the value to CSV_DECIMALS decimals, shortest form."""
    return repr(round(float(x), CSV_DECIMALS))


def separated(a: float, a_pct: Optional[float], b: float, b_pct: Optional[float]) -> bool:
    """The one rule behind every comparison jetbench prints ("fp16 is 1.5x slower", "most
    efficient", "fastest", "1.22x PyTorch eager", tune's best): `a` and `b` differ only when
    their intervals do not overlap. A spread p % is taken as a factor: x reaches from
    x / (1 + p/100) to x * (1 + p/100), which for a few percent is x +- p % and for a latency
    CV near or above 100% still says something (a rate is never within noise of zero). An
    unknown uncertainty (None) cannot make a tie: the figures are then compared as they are."""
    if a_pct is None or b_pct is None:
        return a != b
    (lo, lo_pct), (hi, hi_pct) = sorted(((a, a_pct), (b, b_pct)))
    return hi / (1 + hi_pct / 100) > lo * (1 + lo_pct / 100)


def noise_words(pct: Optional[float], what: str = "CV") -> str:
    """'CV 69%': the spread that made two figures a tie, as the tie's message says it."""
    return f"{what} {pct:.0f}%" if pct is not None and pct >= 1 else f"{what} {pct or 0:.1g}%"
