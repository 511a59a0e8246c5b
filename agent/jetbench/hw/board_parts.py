"""Which module and which carrier board this is, from the device tree's first `compatible`
entry ("nvidia,p3768-0000+p3767-0005": carrier p3768-0000, module p3767-0005). A calibration
of wall power (run/calibration.py) holds for one module on one carrier."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .fs import Root


@dataclass(frozen=True)
class BoardParts:
    module: Optional[str]  # the module's part number; None: not named by the device tree
    carrier: Optional[str]  # the carrier's; None: not named (a bare module entry)


def board_parts(root: Root) -> BoardParts:
    compatible = root.read_strings("/proc/device-tree/compatible", default=[])
    if not compatible:
        return BoardParts(None, None)
    first = compatible[0].split(",", 1)[-1]
    if "+" in first:
        carrier, _, module = first.partition("+")
        return BoardParts(module or None, carrier or None)
    return BoardParts(first or None, None)
