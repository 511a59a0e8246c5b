"""The unit of work a result counts (`throughput.unit`): one row per unit, the labels every
table, plot and comparison prints. Results written before units existed count images.

img/s/W and images/J are the same figure; images keep the whitepaper's "img/s/W", the other
units say "/J" (tokens/J), as the people who use them do."""

from __future__ import annotations

from typing import Dict, Tuple

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
