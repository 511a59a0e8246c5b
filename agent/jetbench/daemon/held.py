"""What the daemon holds, shared by its parts (service.py, drift.py, lending.py, commands.py),
each given it explicitly: the board, the profile pinned on it, the lease, the counters. The
daemon's one lock (an RLock, given to each part beside this) guards every field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

from ..hw.board import Board
from ..profiles.profile import Profile
from ..profiles.targets import Targets


@dataclass(frozen=True)
class Lease:
    """The board lent to one control connection (a running `measure` or `sweep`)."""

    conn: int
    pid: int
    uid: int
    who: str
    since: str
    token: str = ""  # ownership/lease.py: the borrower writes only while the file holds it

    def doc(self) -> Dict[str, object]:
        return {"who": self.who, "pid": self.pid, "uid": self.uid, "since": self.since}


def _counters() -> Dict[str, int]:
    return {"checks": 0, "repins": 0, "throttle_events": 0, "errors": 0}


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
