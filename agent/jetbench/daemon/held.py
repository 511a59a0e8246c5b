"""What the daemon holds, shared by its parts (service.py, drift.py, lending.py, commands.py),
each given it explicitly: the board, the profile pinned on it, the lease, the counters. The
daemon's one lock (an RLock, given to each part beside this) guards every field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, TypedDict

from ..documents import ClockDoc, PowerModeDoc
from ..hw.board import Board
from ..profiles.profile import Profile
from ..profiles.targets import Targets
from ..units import format_hz

if TYPE_CHECKING:
    from .tune_doc import TuneStatusDoc


class LeaseDoc(TypedDict):
    """A lease as status and the lease reply show it."""
    who: str
    pid: int
    uid: int
    since: str


class RailDoc(TypedDict):
    """One rail or meter channel in the daemon's readings (rails.py); the calibrated wall
    (name "wall", point and source "calibrated") when the board has a calibration."""
    name: str
    point: str
    source: str
    power_w: Optional[float]
    energy_j: float  # since the daemon started
    scope: str  # module | board | wall
    basis: str  # measured | calibrated


class RailTotalDoc(TypedDict):
    """The whole-device total, as the first source that names one defines it."""
    name: str
    point: str
    power_w: Optional[float]
    calibration: Optional[str]  # the label of the wall calibration applied to it, if any


class PowerSourceDoc(TypedDict):
    """What the daemon's power (and --tune's items per joule) comes from: the total's channel,
    its source, measurement point, scope (module | board | wall) and basis (measured |
    calibrated); `daemon --meter` chooses it (rails.py)."""
    name: str
    source: str
    point: str
    scope: str
    basis: str


class RepinDoc(TypedDict):
    at: str
    moved: List[str]  # "path: found (pinned: value)"


class ReadingsDoc(TypedDict, total=False):
    """The board now and its rails (service.py `_read`): the `readings` reply, and part of
    the status document."""
    clocks: List[ClockDoc]
    temperatures_c: Dict[str, float]
    power_mode: Optional[PowerModeDoc]
    gpu_load_pct: Optional[float]
    rails: List[RailDoc]
    total: Optional[RailTotalDoc]
    power_source: Optional[PowerSourceDoc]
    read_at: str


class StatusDoc(ReadingsDoc, total=False):
    """`jetbench.status/1`: each check's document (service.py `_status_doc`), what `status`
    answers and the metrics read; empty until the first check."""
    schema: str
    pid: int
    started: str
    uptime_s: float
    simulated: bool
    board: Mapping[str, object]  # hw/readings.py identity(): documents.BoardDoc's keys
    profile: Optional[str]
    profile_source: Optional[str]
    pinned: bool
    profile_refused: Optional[str]
    summary: str
    interval_s: float
    socket: str
    metrics: Optional[str]
    throttling: bool
    throttle_reasons: List[str]
    below_pin: List[str]
    not_held: List[str]  # pinned clocks a firmware moved (daemon/clock_hold.py)
    clock_drift_events: Dict[str, int]  # per domain: times a pinned clock stopped being held
    counters: Dict[str, int]
    last_repin: Optional[RepinDoc]
    last_error: Optional[str]
    lease: Optional[LeaseDoc]
    tune: Optional[TuneStatusDoc]  # --tune only (live_tuning.py)


@dataclass(frozen=True)
class Lease:
    """The board lent to one control connection (a running `measure` or `sweep`)."""

    conn: int
    pid: int
    uid: int
    who: str
    since: str
    token: str = ""  # ownership/lease.py: the borrower writes only while the file holds it

    def doc(self) -> LeaseDoc:
        return {"who": self.who, "pid": self.pid, "uid": self.uid, "since": self.since}


def _counters() -> Dict[str, int]:
    return {"checks": 0, "repins": 0, "relocks": 0, "throttle_events": 0, "errors": 0}


@dataclass
class Held:
    board: Optional[Board] = None
    profile: Optional[Profile] = None
    targets: Optional[Targets] = None
    pinned: bool = False
    lease: Optional[Lease] = None
    judge_after: float = 0.0  # monotonic time before which a low clock is not judged
    counters: Dict[str, int] = field(default_factory=_counters)
    last_error: Optional[str] = None


def summary_line(held: Held, clocks: Sequence[ClockDoc], configured: Optional[str],
                 refused: Optional[str], tuning_phase: Optional[str],
                 throttle_reasons: Sequence[str], below_pin: Sequence[str],
                 not_held: Sequence[str] = ()) -> str:
    """The daemon's STATUS= line: what is pinned (or lent, or being tuned), at which clocks;
    `refused`: why the configured profile was refused (None: it was not)."""
    parts = []
    for domain in ("cpu", "gpu", "emc"):
        hz = [c["cur_hz"] for c in clocks if c["domain"] == domain and c["cur_hz"]]
        if hz:
            parts.append(f"{domain} {format_hz(max(hz))}")
    profile = held.profile
    what = f"holding {profile.name}" if held.pinned and profile else "not pinning"
    if refused and not held.pinned:
        what += f" (profile {configured} refused)"
    if tuning_phase is not None:
        what = f"tuning ({tuning_phase})"
    if held.lease is not None:
        what = f"lent to {held.lease.who} (pid {held.lease.pid})"
    text = what + (": " + ", ".join(parts) if parts else "")
    if throttle_reasons:
        text += " (throttling)"
    elif not_held:
        domains = sorted({b.split(" ", 1)[0] for b in not_held})
        text += f" ({', '.join(domains)} not held: see not_held)"
    elif below_pin:
        domains = sorted({b.split(" ", 1)[0] for b in below_pin})
        text += f" ({', '.join(domains)} below its pin, cause unknown)"
    if held.board is not None and held.board.simulated:
        text += " [simulated board]"
    return text
