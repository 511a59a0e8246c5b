"""The unit of work a result counts (`throughput.unit`): one row per unit, the labels every
table, plot and comparison prints. Results written before units existed count images.

img/s/W and images/J are the same figure; images keep the whitepaper's "img/s/W", the other
units say "/J" (tokens/J), as the people who use them do."""

from __future__ import annotations

from typing import Dict, Iterable, Mapping, Optional, Tuple

DEFAULT_UNIT = "images"

# unit -> (rate label, efficiency label)
_LABELS: Dict[str, Tuple[str, str]] = {
    "images": ("img/s", "img/s/W"),
    "tokens": ("tokens/s", "tokens/J"),
    "frames": ("frames/s", "frames/J"),
    "queries": ("queries/s", "queries/J"),
}
UNITS: Tuple[str, ...] = tuple(_LABELS)


def rate_label(unit: str) -> str:
    """'img/s', 'tokens/s' (an unknown unit from a newer jetbench: 'UNIT/s')."""
    return _LABELS.get(unit, (f"{unit}/s", ""))[0]


def efficiency_label(unit: str) -> str:
    """'img/s/W', 'tokens/J' (an unknown unit: 'UNIT/J')."""
    return _LABELS.get(unit, ("", f"{unit}/J"))[1]


def common_unit(units: Iterable[str]) -> Optional[str]:
    """The one unit all results count, or None when they count different things."""
    found = set(units)
    return found.pop() if len(found) == 1 else None if found else DEFAULT_UNIT


def per_j(item: Mapping[str, object]) -> Optional[float]:
    """A per-joule figure of a result's efficiency entry (`items_per_j`; `images_per_j` in
    results written before units); None where it was not measured."""
    value = item.get("items_per_j", item.get("images_per_j"))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None
