"""The daemon's control commands: `status`, `readings`, `lease`, `restore`, `pin`, `apply` and
`maxperf`, each answered under the daemon's one lock (called from the control thread).

A part of the daemon as drift.py and lending.py are, given what it uses: the lifecycle, the
pinning and the status line stay in service.py. While the board is lent, only `status` and
`readings` are answered.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Dict, Optional

from ..errors import UsageError
from ..hw.board import Board
from ..hw.fs import Root
from ..ownership import journal
from ..ownership.wire import Request
from ..profiles.profile import Profile, load_profile
from .control import Peer
from .drift import Drift
from .held import Held, ReadingsDoc, StatusDoc
from .lending import BoardLent, Lending

log = logging.getLogger("jetbench.daemon")


class Commands:
    """A validated control request -> its reply. `snapshot`: the latest check's document;
    `profile_refused`: why the configured profile is not held (None: it is, or none is)."""

    def __init__(self, root: Root, held: Held, lock: threading.RLock, drift: Drift,
                 lending: Lending, *, snapshot: Callable[[], StatusDoc],
                 profile_refused: Callable[[], Optional[str]],
                 summary: Callable[[], str], read: Callable[[Board], ReadingsDoc],
                 pin_new: Callable[[Profile], None], check: Callable[[], None],
                 stop_tuning: Callable[[str], bool] = lambda why: False,
                 resume_tuning: Callable[[], bool] = lambda: False):
        self.root = root
        self.held = held
        self._lock = lock
        self.drift = drift
        self.lending = lending
        self._snapshot = snapshot
        self._profile_refused = profile_refused
        self._summary = summary
        self._read = read
        self._pin_new = pin_new
        self._check = check
        # --tune: the operator's restore/apply/maxperf stop it (True: it was tuning); `pin`
        # resumes it (True: it resumed)
        self._stop_tuning = stop_tuning
        self._resume_tuning = resume_tuning

    def handle(self, request: Request, peer: Optional[Peer] = None) -> Dict[str, object]:
        with self._lock:
            if request.cmd == "status":
                return self._status()
            if request.cmd == "readings":
                assert self.held.board is not None
                return {"ok": True, **self._read(self.held.board)}
            if self.held.lease is not None:
                lease = self.held.lease
                raise BoardLent(f"the board is lent to {lease.who} (pid {lease.pid}, since "
                                f"{lease.since})",
                                hint="ask again when it has finished (`jetbench status` shows "
                                     "the lease)")
            if request.cmd == "lease":
                return self.lending.lend(request, peer)
            if request.cmd == "restore":
                return self._restore()
            if request.cmd == "pin":
                return self._pin()
            if request.cmd in ("apply", "maxperf"):
                return self._apply(request)
        raise UsageError(f"unknown command {request.cmd!r}")  # wire.py lets none through

    def _status(self) -> Dict[str, object]:
        doc: Dict[str, object] = dict(self._snapshot())
        doc.update(pinned=self.held.pinned, summary=self._summary(),
                   counters=dict(self.held.counters), last_error=self.held.last_error,
                   profile=self.held.profile.name if self.held.profile else None,
                   profile_refused=self._profile_refused(),
                   lease=self.held.lease.doc() if self.held.lease is not None else None)
        return {"ok": True, **doc}

    def _restore(self) -> Dict[str, object]:
        # the tuning first: nothing of it is pinned over the restored board (the operator wins)
        tuning = self._stop_tuning("`jetbench restore`: the board is restored; "
                                   "`pin` or a reload resumes the tuning")
        result = journal.restore(self.root)
        self.held.pinned = False
        log.info("restore requested: %d value(s) written; not pinning until `pin` or "
                 "`apply`%s", len(result.written), "; the live tuning is stopped" if tuning
                 else "")
        self._check()
        return {"ok": True, "restored": len(result.written),
                "unchanged": result.unchanged, "pinned": False, "tuning_stopped": tuning,
                "moved": [m.note() for m in result.moved],
                "changed": [c.note() for c in result.changed]}

    def _pin(self) -> Dict[str, object]:
        if self.held.profile is None and self._resume_tuning():  # --tune with no profile
            log.info("pin requested: %s", self._summary())
            self._check()
            return {"ok": True, "profile": None, "pinned": True, "tuning_resumed": True}
        if self.held.profile is None:
            raise UsageError("no profile to pin: start the daemon with --profile, or "
                             "send apply")
        if self.held.pinned and self.held.targets is not None:
            steps = self.drift.plan(self.held.board, self.held.targets)  # type: ignore
            if steps:
                self.drift.repin(steps)
        else:
            self._pin_new(self.held.profile)
        resumed = self._resume_tuning()  # its point, pinned again over the profile
        log.info("pin requested: %s", self._summary())
        self._check()
        return {"ok": True, "profile": self.held.profile.name, "pinned": True,
                "tuning_resumed": resumed}

    def _apply(self, request: Request) -> Dict[str, object]:
        if request.cmd == "maxperf":
            profile = load_profile("maxperf", self.root.base, allow_paths=False)
            if request.fan:
                profile = profile.with_fan(255)
        else:
            assert request.profile is not None
            profile = load_profile(request.profile, self.root.base, allow_paths=False)
        what = "maxperf" if request.cmd == "maxperf" else f"apply {profile.name}"
        tuning = self._stop_tuning(f"`jetbench {what}`: the profile is held; `pin` or a "
                                   "reload resumes the tuning")
        self._pin_new(profile)
        log.info("%s requested: %s", what, self._summary())
        self._check()
        return {"ok": True, "profile": profile.name, "pinned": True, "tuning_stopped": tuning,
                "summary": self._summary()}
