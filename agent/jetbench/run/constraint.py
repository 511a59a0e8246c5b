"""A requirement on a measured figure, `NAME>=VALUE` or `NAME<=VALUE`: one type, one parser and
one rule for "met", shared by `tune --constraint` and `daemon --tune --constraint`.

The vocabulary. The rate is `items_per_s` everywhere (items: what the workload counts); where
they are images or frames it may also be said `images_per_s` or `fps` (aliases). The names a
context takes are a `Vocabulary`: tune's are its objectives' (`tune_names`), the daemon's its
window's (`daemon_names`). A name the context does not have is answered by name with the names
it has; an operator other than >= and <= is answered as such.

The rule. A figure is read with an uncertainty (percent, one standard uncertainty; None:
unknown). A constraint is met only where the figure's whole interval, `sigmas` uncertainties
either side, lies on the right side of the limit, and broken only where it lies wholly on the
wrong side; a figure of unknown uncertainty is judged by its value alone, an unknown figure is
never met (nor broken). Tune judges a trial's figures at 1 uncertainty (a whole measured
window, joined by the study's read-to-read spread); the daemon judges one live window at
SIGMAS (online_tuner.py), so that one noisy window neither takes a step nor leaves a point.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

from ..errors import UsageError

RATE = "items_per_s"
PER_J = "items_per_j"
# the rate's (and per-joule figure's) other names, by the unit where they say the same thing
RATE_ALIASES: Dict[str, Tuple[str, ...]] = {"images": ("images_per_s",), "frames": ("fps",)}
PER_J_ALIASES: Dict[str, Tuple[str, ...]] = {"images": ("images_per_j",)}

_TEXT = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9]*)\s*([<>=!]*)\s*(.*?)\s*$")
_OPS = (">=", "<=")
UNKNOWN = 1e9  # the violation of a constraint on a figure that was not measured


@dataclass(frozen=True)
class Vocabulary:
    """The constraint names a context takes: each name said (a figure's name or an alias of it)
    -> the key its figure has in that context's figures; `shown`, the names as listed in an
    answer ('items_per_s (images_per_s)')."""

    keys: Mapping[str, str]
    shown: Tuple[str, ...]
    example: str = "items_per_s>=30"

    def listing(self) -> str:
        return ", ".join(self.shown)


def vocabulary(figures: Mapping[str, str], aliases: Mapping[str, Tuple[str, ...]],
               example: str = "items_per_s>=30") -> Vocabulary:
    """figure name -> its key in the context's figures; figure name -> its aliases here."""
    keys: Dict[str, str] = {}
    shown = []
    for name, key in figures.items():
        also = aliases.get(name, ())
        keys.update({n: key for n in (name, *also)})
        shown.append(name + (f" ({', '.join(also)})" if also else ""))
    return Vocabulary(keys, tuple(shown), example)


def tune_names(unit: str = "images") -> Vocabulary:
    """`tune --constraint`'s names for a workload counting `unit` (a trial's figures are keyed
    as tune.json's metrics: images_per_s is a trial's rate in whatever its unit is)."""
    return vocabulary({RATE: "images_per_s", PER_J: "images_per_j",
                       "latency_p99_ms": "latency_p99_ms", "power_w": "power_w"},
                      {RATE: RATE_ALIASES.get(unit, ()), PER_J: PER_J_ALIASES.get(unit, ())},
                      example=f"{RATE_ALIASES.get(unit, (RATE,))[0]}>=30")


def daemon_names(extra: Tuple[str, ...] = ()) -> Vocabulary:
    """`daemon --tune --constraint`'s names: a live window's figures (its workload's items may
    be images or frames: both aliases), and `extra` (the daemon's demand share)."""
    names = (RATE, "power_w", "latency_p99_ms", "latency_p50_ms", *extra)
    return vocabulary({n: n for n in names},
                      {RATE: tuple(a for unit in RATE_ALIASES.values() for a in unit)})


@dataclass(frozen=True)
class Constraint:
    name: str  # the figure's key in its context (tune: images_per_s; the daemon: items_per_s)
    op: str  # ">=" or "<="
    value: float
    # met where not broken (the daemon's demand share: a point that keeps up serves the demand,
    # not more, so its interval can never lie wholly above it)
    lenient: bool = field(default=False, compare=False)

    @staticmethod
    def parse(text: str, names: Optional[Vocabulary] = None) -> Constraint:
        """'items_per_s>=30' -> a Constraint on `names` (default: tune's for images); a
        UsageError that says which part is wrong otherwise."""
        names = names or tune_names()
        m = _TEXT.match(text)
        if not m:
            raise UsageError(f"--constraint {text!r}: expected NAME>=VALUE or NAME<=VALUE",
                             hint=f"NAME is one of {names.listing()}; e.g. --constraint "
                                  f"'{names.example}'")
        said, op, number = m.groups()
        if said not in names.keys:
            raise UsageError(f"--constraint {text!r}: unknown constraint name {said!r}: this "
                             f"workload has {names.listing()}",
                             hint=f"e.g. --constraint '{names.example}'")
        if op not in _OPS:
            raise UsageError(f"--constraint {text!r}: "
                             + (f"operator {op!r} is not one of >=, <=" if op else
                                "no operator: expected >= or <= after the name"),
                             hint=f"e.g. --constraint '{names.example}'")
        try:
            value = float(number)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise UsageError(f"--constraint {text!r}: {number!r} is not a number")
        return Constraint(names.keys[said], op, value)

    def _margin(self, got: float, pct: Optional[float], sigmas: float) -> float:
        return abs(got) * pct / 100.0 * sigmas if pct is not None and math.isfinite(pct) \
            else 0.0

    def excess(self, got: Optional[float], pct: Optional[float], sigmas: float = 1.0) -> float:
        """How far the figure's interval (`sigmas` uncertainties of `pct` percent either side)
        reaches past the limit: <= 0 where it lies wholly on the right side; UNKNOWN where the
        figure was not measured."""
        if got is None:
            return UNKNOWN
        margin = self._margin(got, pct, sigmas)
        return self.value - (got - margin) if self.op == ">=" else (got + margin) - self.value

    def met(self, got: Optional[float], pct: Optional[float], sigmas: float = 1.0) -> bool:
        """Met with the whole interval on the right side (a lenient one: where not broken)."""
        if got is None:
            return False
        if self.lenient:
            return not self.broken(got, pct, sigmas)
        return self.excess(got, pct, sigmas) <= 0

    def broken(self, got: Optional[float], pct: Optional[float], sigmas: float = 1.0) -> bool:
        """Broken with the whole interval on the wrong side (an unknown figure is not judged)."""
        if got is None:
            return False
        margin = self._margin(got, pct, sigmas)
        return got + margin < self.value if self.op == ">=" else got - margin > self.value

    def violation(self, metrics: Mapping[str, Optional[float]]) -> float:
        """`excess` of a tune trial's metrics (its figure and `NAME_uncertainty_pct`)."""
        return self.excess(metrics.get(self.name), metrics.get(f"{self.name}_uncertainty_pct"))

    def __str__(self) -> str:
        return f"{self.name}{self.op}{self.value:g}"
