"""Thermal zones, trip points and cooling devices: throttling is a claim that needs evidence.

Evidence, any one is enough:
- a thermal zone at or above a `passive`, `hot` or `critical` trip point (the kernel caps clocks
  there; `active` trips only start fans);
- a thermal cooling device (not a fan) with `cur_state` > 0 (the kernel is capping something);
- a driver's own throttle report, where the board has one (none of the supported layouts
  exposes one yet).
A clock running below the floor it is pinned to is *not* evidence: `cur_freq` files are
information, not a promise (a railgated GPU, a firmware cap, a counter-measured CPU clock). It is
reported as exactly that, "gpu below its pin, cause unknown" (run/validity.py, one rule for a
result and for the daemon).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

from .board import Board
from .clocks.types import ClockReading
from .fs import Root

THROTTLING_TRIPS = ("passive", "hot", "critical")


@dataclass(frozen=True)
class Trip:
    zone: str
    kind: str
    temp_c: float


@dataclass(frozen=True)
class CoolingDevice:
    name: str
    path: str


@dataclass(frozen=True)
class ThermalLayout:
    """Where to look, found once at start (trip points and cooling devices do not move)."""

    trips: Tuple[Trip, ...]
    cooling: Tuple[CoolingDevice, ...]


def read_temperatures_c(root: Root, board: Board) -> Dict[str, float]:
    """Each zone's temperature in degrees C; offline sensors (-256000 or similar) left out."""
    temps = {}
    for zone in board.thermal_zones:
        milli = root.read_int(f"{zone.path}/temp", default=None)
        if milli is not None and milli > -40000:
            temps[zone.name] = milli / 1000.0
    return temps


def scan(root: Root, board: Board) -> ThermalLayout:
    trips: List[Trip] = []
    for zone in board.thermal_zones:
        for type_file in root.glob(f"{zone.path}/trip_point_*_type"):
            kind = root.read(type_file, default="")
            milli = root.read_int(type_file[: -len("_type")] + "_temp", default=None)
            if kind in THROTTLING_TRIPS and milli is not None and milli > 0:
                trips.append(Trip(zone.name, kind, milli / 1000.0))
    cooling = []
    for path in root.glob("/sys/class/thermal/cooling_device*"):
        name = root.read(f"{path}/type", default="")
        if name and "fan" not in name.lower() and "pwm" not in name.lower():
            cooling.append(CoolingDevice(name, path))
    return ThermalLayout(tuple(trips), tuple(cooling))


def cooling_states(root: Root, layout: ThermalLayout) -> Dict[str, int]:
    out = {}
    for dev in layout.cooling:
        state = root.read_int(f"{dev.path}/cur_state", default=None)
        if state is not None:
            out[dev.name] = state
    return out


def assess(
    temps_c: Dict[str, float],
    trips: Sequence[Trip],
    cooling: Dict[str, int],
    clocks: Sequence[ClockReading] = (),
) -> Tuple[str, ...]:
    """The evidence that the board is throttling now (empty: none). Pure: tested without files.
    `clocks` is accepted for callers of the older signature and not used: a low clock is not
    evidence (run/validity.py's `below_pin` says it as a fact)."""
    reasons: List[str] = []
    for trip in trips:
        temp = temps_c.get(trip.zone)
        if temp is not None and temp >= trip.temp_c:
            reasons.append(f"{trip.zone} at {temp:.1f} C, at or above its {trip.kind} trip "
                           f"point {trip.temp_c:.1f} C")
    for name, state in sorted(cooling.items()):
        if state > 0:
            reasons.append(f"cooling device {name} active (state {state})")
    return tuple(reasons)
