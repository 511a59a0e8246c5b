"""Thermal zones, trip points and cooling devices: throttling is reported, never fought.

Three signs, any one is enough:
- a thermal zone at or above a `passive`, `hot` or `critical` trip point (the kernel caps clocks
  there; `active` trips only start fans);
- a cooling device other than a fan with `cur_state` > 0 (the kernel is capping something);
- a clock running below the floor it is pinned to (min_hz): the kernel's cap wins over the
  floor, as on L4T R32 where throttling lowers the rate without touching the knobs.
While any holds, the daemon does not re-pin (a re-pin would only fight the cap, or be refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .board import Board
from .clocks.common import ClockReading
from .fs import Root

THROTTLING_TRIPS = ("passive", "hot", "critical")
FLOOR_TOLERANCE = 0.02  # a clock 2% under its floor is a table rounding, not a cap


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
    clocks: Sequence[ClockReading],
) -> Tuple[str, ...]:
    """Why the board is throttling now (empty: it is not). Pure: tested without files."""
    reasons: List[str] = []
    for trip in trips:
        temp = temps_c.get(trip.zone)
        if temp is not None and temp >= trip.temp_c:
            reasons.append(f"{trip.zone} at {temp:.1f} C, at or above its {trip.kind} trip "
                           f"point {trip.temp_c:.1f} C")
    for name, state in sorted(cooling.items()):
        if state > 0:
            reasons.append(f"cooling device {name} active (state {state})")
    for clock in clocks:
        if _below_floor(clock):
            reasons.append(f"{clock.domain} {clock.name} runs at {clock.cur_hz} Hz, below its "
                           f"pinned floor {clock.min_hz} Hz (capped by the kernel)")
    return tuple(reasons)


def _below_floor(clock: ClockReading) -> bool:
    floor: Optional[int] = clock.min_hz
    if floor is None or clock.cur_hz is None or not floor:
        return False
    return clock.cur_hz < floor * (1 - FLOOR_TOLERANCE)
