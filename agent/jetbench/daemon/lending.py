"""Lending the board (`Lending`, a part the daemon composes): `measure` and `sweep` borrow it over
the control socket (`{"cmd": "lease"}`): no re-pin, no simulated kernel of the daemon's own, no
write at all until the lease's connection closes. Then what the borrower left changed (a killed
one) is restored from the journal and the daemon's profile is pinned again. Before it writes
after a lease, the daemon revokes the lease's token (ownership/lease.py), so a borrower that was
stopped meanwhile writes nothing when it resumes.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from typing import TYPE_CHECKING, Callable, Dict, Optional

from ..errors import HardwareError, JetbenchError, UsageError
from ..hw import knob_io
from ..hw.fs import Root
from ..ownership import journal
from ..ownership import lease as lease_file
from ..ownership.lock import BoardLock
from ..ownership.wire import BUSY, REVOKED, Request
from ..profiles.profile import Profile
from .control import FDS, HOLD, ControlServer, Peer
from .drift import SETTLE_GRACE_S, Drift, iso
from .held import Held, Lease
from .notify import Notifier

if TYPE_CHECKING:
    from ..sim.file_kernel import FileKernel

log = logging.getLogger("jetbench.daemon")

LEASE_STOP_WAIT_S = 20.0  # on SIGTERM, how long a borrower gets to put the board back (< the
#                           unit's TimeoutStopSec=30s)
LEASE_REVOKE_WAIT_S = 2.0  # then how long a borrower inside a batch of writes gets to finish it


class BoardLent(HardwareError):
    """A request that would write while the board is lent to a measurement."""

    reply_code = BUSY  # the client may wait and ask again (`--wait`)


class Lending:
    """Leases over what the daemon holds (`held.lease`, under `lock`): `drift` re-pins and
    checks after a lease, `pin_new` pins a profile anew, `summary` is the STATUS= line. The
    control server, the simulated kernel and the board lock are given with `attach` once the
    daemon has started them (nothing is lent before it is ready)."""

    def __init__(self, root: Root, held: Held, lock: threading.RLock, notifier: Notifier,
                 drift: Drift, error: Callable[[str], None],
                 pin_new: Callable[[Profile], None], summary: Callable[[], str]):
        self.root = root
        self.held = held
        self._lock = lock
        self.notifier = notifier
        self.drift = drift
        self._error = error
        self._pin_new = pin_new
        self._summary = summary
        self._control: Optional[ControlServer] = None
        self._sim: Optional[FileKernel] = None
        self._board_lock: Optional[BoardLock] = None
        self._lease_known: frozenset = frozenset()  # journalled paths when the lease began

    def attach(self, control: Optional[ControlServer], sim: Optional[FileKernel],
               board_lock: Optional[BoardLock]) -> None:
        self._control, self._sim, self._board_lock = control, sim, board_lock

    def wait_for_end(self, timeout_s: float) -> None:
        """A borrower puts the board back itself; the journal is restored after it has (or,
        past the timeout, over whatever it left: the journal holds the originals either way)."""
        lease = self.held.lease
        if lease is None:
            return
        log.info("taking the board back from %s (pid %d): waiting up to %.0f s for it to put "
                 "its clocks back", lease.who, lease.pid, timeout_s)
        if self._control is not None:
            self._control.send_event(lease.conn, {"ok": True, "event": REVOKED,
                                                  "message": "the daemon is stopping"})
        self.notifier.send(STATUS=f"stopping: waiting for {lease.who} (pid {lease.pid})")
        end = time.monotonic() + timeout_s
        while self.held.lease is not None and time.monotonic() < end:
            time.sleep(0.05)
        if self.held.lease is not None:
            log.warning("%s (pid %d) still holds its lease: restoring the board anyway",
                        lease.who, lease.pid)

    # -- leases ------------------------------------------------------------------------------
    def lend(self, request: Request, peer: Optional[Peer]) -> Dict[str, object]:
        """Lend the board to this connection: no re-pin, no write, and on a simulated board no
        simulated kernel of ours (the borrower runs its own: one kernel per board)."""
        if peer is None:
            raise UsageError("a lease belongs to a connection")
        self._lease_known = frozenset(e.path for e in journal.load(self.root))
        token = secrets.token_hex(16)
        who = request.who or "client"
        lease_file.grant(self.root, token, peer.pid, who)
        lease = self.held.lease = Lease(peer.conn, peer.pid, peer.uid, who, iso(time.time()),
                                        token)
        if self._sim is not None:
            self._sim.stop()
        log.info("board lent to %s (pid %d, uid %d): not re-pinning until it hands it back",
                 lease.who, peer.pid, peer.uid)
        self.notifier.send(STATUS=self._summary())
        lock_fd = self._board_lock.fileno() if self._board_lock is not None else None
        profile = self.held.profile
        return {"ok": True, "lease": lease.doc(), "token": token,
                "profile": profile.name
                if profile else None, "pinned": self.held.pinned, HOLD: True,
                FDS: [lock_fd] if lock_fd is not None else []}

    def connection_closed(self, peer: Peer) -> None:
        """A lease's connection closed (its holder finished, or was killed): take the board
        back, then pin our own profile again."""
        with self._lock:
            lease = self.held.lease
            if lease is None or lease.conn != peer.conn:
                return
            if not lease_file.revoke(self.root, LEASE_REVOKE_WAIT_S):
                # Its connection closed, yet something still holds the lease file mid-write
                # (a process it left behind): writing now would race it.
                self.held.lease = None
                self._error(f"{lease.who} (pid {lease.pid}) closed its lease in the middle of "
                            "writing: not taking the board back; `jetbench restore` when it "
                            "has ended")
                return
            if self._sim is not None:
                self._sim.start()
            self.held.judge_after = time.monotonic() + SETTLE_GRACE_S  # clocks coming back
            try:
                self._take_back()
            except JetbenchError as err:
                self._error(f"taking the board back from {lease.who} failed: {err}")
            finally:
                self.held.lease = None
            log.info("%s (pid %d) handed the board back: %s", lease.who, lease.pid,
                     self._summary())
        self.drift.check()
        self.notifier.send(STATUS=self._summary())


    def _take_back(self) -> None:
        """A borrower that finished has put back what it wrote (the knobs it journalled hold
        their journalled values again): re-pin whatever differs from our profile. One that was
        killed left its clocks: restore the whole journal, then pin our profile anew. So too
        where a journalled knob reads empty: a writer killed between a file's truncate and its
        write (a simulated tree's; sysfs never reads so) left it, and nothing can be planned
        from it (the profile was not back after a `kill -9` beside CPU burners)."""
        entries = journal.load(self.root)
        added = [e for e in entries if e.path not in self._lease_known]
        left = [e.path for e in added if e.raw.strip() not in journal.UNWRITABLE
                and knob_io.read_raw(self.root, e.path, default=None) != e.raw]
        left += [e.path for e in entries if e.path in self._lease_known
                 and e.raw.strip() not in journal.UNWRITABLE and _empty(self.root, e.path)]
        if left:
            log.warning("the borrower left %d knob(s) changed (%s...): restoring the journal",
                        len(left), left[0])
        held = self.held
        if held.pinned and held.profile is not None and held.targets is not None:
            if left:
                # the journal first, ourselves: resolving the profile reads the board, and a
                # knob left empty reads as nothing
                journal.restore(self.root)
                held.pinned = False
                self._pin_new(held.profile)
                return
            assert held.board is not None
            steps = self.drift.plan(held.board, held.targets)
            if steps:
                self.drift.repin(steps)
        elif journal.load(self.root):
            journal.restore(self.root)


def _empty(root: Root, path: str) -> bool:
    """Whether a knob's file is there and holds nothing (a write cut in half)."""
    raw = knob_io.read_raw(root, path, default=None)
    return raw is not None and not raw.strip()
