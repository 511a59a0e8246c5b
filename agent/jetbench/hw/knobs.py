"""The clock knobs as the kernel kept them: what a result calls `settings.applied`.

Not the current-frequency files (those are *observed*: HARDWARE.md, "What real kernels do").
Per clock: governor, min/max (cpufreq/devfreq knobs, kHz converted to Hz) and, where the clock is
pinned by an override (tegra210 GPU `override.gbus`, the EMC override or BPMP rate lock), the
override rate read back from its file.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .board import Board
from .clocks import cpu, emc, gpu
from .fs import Root


def read_applied(root: Root, board: Board) -> List[Dict[str, Any]]:
    """One document per clock: domain, name, governor, min_hz, max_hz, override_hz, locked,
    table_hz (the table the clock runs from; empty when the kernel lists none)."""
    out: List[Dict[str, Any]] = []
    for r in cpu.read(root, board) + gpu.read(root, board):
        override: Optional[int] = None
        if r.domain == "gpu" and r.locked:
            override = r.min_hz  # the override rate, read back (gpu.read puts it in min/max)
        out.append(_doc(r, r.min_hz, r.max_hz, override))
    for r in emc.read(root, board):
        info = board.emc
        assert info is not None
        override = root.read_int(info.rate, default=None) if r.locked else None
        lo = override
        hi = override if override is not None else r.max_hz
        out.append(_doc(r, lo, hi, override))
    return out


def _doc(r: Any, lo: Optional[int], hi: Optional[int], override: Optional[int]) -> Dict[str, Any]:
    return {"domain": r.domain, "name": r.name, "governor": r.governor, "min_hz": lo,
            "max_hz": hi, "override_hz": override, "locked": r.locked,
            "table_hz": list(r.available_hz)}
