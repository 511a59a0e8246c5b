"""The clock knobs as the kernel kept them: what a result calls `settings.applied`.

Not the current-frequency files (those are *observed*: HARDWARE.md, "What real kernels do").
Per clock: governor, min/max (cpufreq/devfreq knobs, kHz converted to Hz) and, where the clock is
pinned by an override (tegra210 GPU `override.gbus`, the EMC override or BPMP rate lock), the
override rate read back from its file.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from . import nvml
from .board import Board
from .clocks import cpu, emc, gpu
from .fs import Root


def read_applied(root: Root, board: Board) -> List[Dict[str, Any]]:
    """One document per clock: domain, name, governor, min_hz, max_hz, override_hz, locked,
    table_hz (the table the clock runs from; empty when the kernel lists none). min/max are
    None where no knob holds the clock (an override switched off)."""
    out: List[Dict[str, Any]] = []
    for r in cpu.read(root, board):
        out.append(_doc(r, r.min_hz, r.max_hz, None))
    for r in gpu.read(root, board):
        if r.locked is None:  # devfreq: min_freq/max_freq are knobs
            out.append(_doc(r, r.min_hz, r.max_hz, None))
        elif r.locked:  # override on: its rate, read back (gpu.read puts it in min/max)
            out.append(_doc(r, r.min_hz, r.max_hz, r.min_hz))
        else:  # override off: no knob holds the clock (the board's limits are no pin)
            out.append(_doc(r, None, None, None))
    for r in emc.read(root, board):
        info = board.emc
        assert info is not None
        # Locked: the override/BPMP rate as kept. Unlocked: no knob (the EMC governor's).
        override = root.read_int(info.rate, default=None) if r.locked else None
        out.append(_doc(r, override, override, override))
    # NVML cannot read a lock back: the supported range and the running clock only (observed).
    for r in nvml.read_clocks(board.nvml_gpus):
        out.append(_doc(r, None, None, None))
    return out


def _doc(r: Any, lo: Optional[int], hi: Optional[int], override: Optional[int]) -> Dict[str, Any]:
    return {"domain": r.domain, "name": r.name, "governor": r.governor, "min_hz": lo,
            "max_hz": hi, "override_hz": override, "locked": r.locked,
            "table_hz": list(r.available_hz)}
