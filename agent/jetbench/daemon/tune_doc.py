"""The status document's `tune` object (`daemon --tune`, live_tuning.py)."""

from __future__ import annotations

from typing import Dict, List, Optional, TypedDict

from .online_tuner import Point, Space, Window


class PointDoc(TypedDict):
    point_hz: Dict[str, int]
    items_per_s: float
    items_per_s_uncertainty_pct: Optional[float]
    power_w: float
    items_per_j: float
    busy_share: Optional[float]  # the share of its windows the workload was busy (--busy-from)


class TuneStatusDoc(TypedDict, total=False):
    """The status document's `tune` object."""
    phase: str
    source: str
    busy_source: Optional[str]  # --busy-from (None: not given)
    busy_unused: Optional[str]  # why its shares are not used (a counter of several servers)
    constraints: List[str]
    demand_per_s: Optional[float]  # demand>=SHARE: the rate measured at the top of the space
    window_s: float
    held: Optional[PointDoc]  # the point held (or searched from) and its last window there
    last: Optional[PointDoc]  # the last window, wherever it ran
    best: Optional[PointDoc]  # the best window that met the constraints
    why: str
    windows: int
    windows_breaking_constraints: int
    energy_saved_j: float
    items_total: float  # the workload's items since the daemon started (a counter)
    energy_saved_basis: str
    latency_ms: Dict[str, float]
    paused: Optional[str]
    stopped: Optional[str]  # why the operator stopped the tuning (restore, apply, maxperf)
    source_faults: int  # reads of the rate source that failed, answered wrong or too slowly
    source_fault: Optional[str]  # the latest of them
    quiet_windows: int  # windows a log said nothing new in (not judged)
    resumed_from_hz: Optional[Dict[str, int]]  # the point held before a restart, begun at
    space_hz: Dict[str, List[int]]  # each knob's candidates: the distinct rates the kernel runs
    controller: str  # "governor" (its models), or "first generation"
    tail_margin: Dict[str, str]  # a tail constraint's empirical margin, said (governor.py)


def point_doc(space: Space, point: Point, w: Window) -> PointDoc:
    return {"point_hz": space.hz(point), "items_per_s": w.items_per_s,
            "items_per_s_uncertainty_pct": w.items_per_s_uncertainty_pct,
            "power_w": w.power_w, "items_per_j": w.items_per_j, "busy_share": w.busy_share}
