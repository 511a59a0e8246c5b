"""What `jetbench info` reports: the board, its clock domains, sensors and current state, as one
JSON-ready document (also served by the daemon's status)."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from .hw.board import Board
from .hw.clocks.fan import read_pwm
from .hw.fs import Root
from .hw.thermal import read_temperatures_c
from .tuning import journal
from .tuning.apply import read_clocks


def describe_sources(sources: Sequence[Any]) -> List[Dict[str, Any]]:
    """The power sources a measurement would record (constructed, not opened)."""
    out = []
    for source in sources:
        total = source.total()
        out.append({
            "name": source.name,
            "period_s": source.period_s,
            "channels": [{"name": c.name, "point": c.point, "unit": c.unit}
                         for c in source.channels()],
            "total": total.describe() if total else None,
        })
    return out


def describe(root: Root, board: Board, sources: Sequence[Any] = ()) -> Dict[str, Any]:
    clocks: List[Dict[str, Any]] = []
    for r in read_clocks(root, board):
        clocks.append({
            "domain": r.domain,
            "name": r.name,
            "governor": r.governor,
            "min_hz": r.min_hz,
            "max_hz": r.max_hz,
            "cur_hz": r.cur_hz,
            "available_hz": list(r.available_hz),
            "locked": r.locked,
        })
    rails = [
        {
            "name": rail.name,
            "sensor": rail.sensor,
            "channel": rail.channel,
            "layout": rail.layout,
            "point": rail.point,
            "device": rail.device,
            "is_total": rail.name == board.total_rail,
        }
        for rail in board.rails
    ]
    temps = read_temperatures_c(root, board)
    return {
        "schema": "jetbench.info/1",
        "simulated": board.simulated,
        "board": {
            "model": board.model,
            "family": board.family,
            "soc": board.soc,
            "l4t": board.l4t,
            "simulated": board.simulated,
            "root": str(root.base),
        },
        "clocks": clocks,
        "cpu": {
            "online_files": len(board.cpu.online_files),
            "idle_states": len(board.cpu.idle_files),
            "cpuquiet": board.cpu.cpuquiet_enable is not None,
        },
        "gpu": None if board.gpu is None else {
            "kind": board.gpu.kind, "control": board.gpu.control,
            "railgate": root.read_int(board.gpu.railgate, default=None)
            if board.gpu.railgate else None,
        },
        "emc": None if board.emc is None else {
            "kind": board.emc.kind, "max_hz": board.emc.max_hz,
            "iso_cap_hz": board.emc.iso_cap_hz,
        },
        "fan": None if board.fan is None else {"pwm_file": board.fan.pwm,
                                                "pwm": read_pwm(root, board)},
        "thermal": [{"name": z.name, "temp_c": temps.get(z.name)} for z in board.thermal_zones],
        "rails": rails,
        "total_rail": board.total_rail,
        "total": (board.total_rail or ("sum of " + ", ".join(r.name for r in board.rails)))
        if board.rails else None,
        "sources": describe_sources(sources),
        "restore_pending": bool(journal.load(root)),
        "notes": list(board.notes),
    }
