"""Who carries out a change to the board: this process under the board lock (`LocalOwner`), or
the daemon that holds it (`DaemonOwner`, the broker), over its control socket (docs/design.md,
"One owner of the board"). Callers never branch on which:

    with own_board(root, "apply nano-614mhz", wait_s) as owner:
        done = owner.carry_out(lambda: apply_here(...), {"cmd": "apply", "profile": NAME},
                               refused=None)  # or the error a daemon gives this change
        render(done)  # done.daemon: None when this process made it

    with borrow_board(root, "measure", wait_s) as guard:  # the lock, or the daemon's lease
        with guard.writing(): ...pin...
        ...measure...
        with guard.writing(): ...put back...   # LeaseRevoked once the daemon took it back
"""

from __future__ import annotations

import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Generic, Iterator, Mapping, Optional, TypeVar, Union

from ..errors import JetbenchError, PermissionDenied, UsageError
from ..hw.fs import Root
from .client import DaemonBusy, LeaseRefused, error_from_reply, open_lease, request
from .lease import Guard
from .lock import _POLL_S, BoardBusy, BoardLock, Holder
from .wire import BUSY, SERVICE, WHO

T = TypeVar("T")


@dataclass(frozen=True)
class Done(Generic[T]):
    """A change carried out here: `result` is what the local function returned. `daemon` and
    `socket` are None, as Brokered's are not: `if done.daemon is not None` tells them apart."""

    result: T
    daemon: None = None
    socket: None = None


@dataclass(frozen=True)
class Brokered:
    """A change the daemon made: `result` is its reply, `daemon` the daemon that made it,
    reached at `socket`."""

    result: Dict[str, object]
    daemon: Holder
    socket: Path


class LocalOwner:
    """This process holds the board lock: the change is made here."""

    def carry_out(self, here: Callable[[], T], request: Optional[Mapping[str, object]],
                  refused: Optional[JetbenchError] = None) -> Done[T]:
        return Done(here())


@dataclass(frozen=True)
class DaemonOwner:
    """The daemon holding the board, reached through the control socket it named: the change
    is sent as `request`; `refused` is raised instead where the daemon cannot make it (a file
    profile, a power mode it was not started to pass)."""

    holder: Holder
    lock_path: str
    command: str  # what the user ran, for the messages
    deadline: float = 0.0  # monotonic: until when a "busy" daemon (board lent) is asked again

    @property
    def socket_path(self) -> Path:
        assert self.holder.socket is not None
        return Path(self.holder.socket)

    def unreachable(self, why: str) -> BoardBusy:
        return BoardBusy(self.holder, self.lock_path, hint=(
            f"the jetbench daemon ({SERVICE}) holds the board, and `jetbench {self.command}` "
            f"goes through its control socket {self.socket_path}, which {why}: run it with "
            "sudo, or join the jetbench group (sudo usermod -aG jetbench $USER, then log in "
            "again); or stop the daemon first: sudo systemctl stop jetbench"))

    def carry_out(self, here: Callable[[], T], request: Optional[Mapping[str, object]],
                  refused: Optional[JetbenchError] = None) -> Brokered:
        if refused is not None or request is None:
            raise refused or UsageError("the jetbench daemon holds the board",
                                        hint="stop it first (sudo systemctl stop jetbench)")
        fields = dict(request)
        cmd = fields.pop("cmd")
        if not isinstance(cmd, str):
            raise TypeError(f"a daemon request's cmd is a string, not {cmd!r}")
        return Brokered(self.request(cmd, **fields), self.holder, self.socket_path)

    def request(self, cmd: str, **fields: object) -> Dict[str, object]:
        """One request; a refusal becomes the error the daemon raised (same exit code)."""
        while True:
            try:
                # Generous: the daemon writes the board before it answers.
                reply = request(self.socket_path, cmd, timeout_s=60.0, **fields)
            except PermissionDenied:
                raise self.unreachable("is not open to you") from None
            except DaemonBusy:
                raise  # its own message: a flood, not a permission
            except JetbenchError as err:
                raise self.unreachable(f"does not answer ({err.message})") from None
            if reply.get("ok"):
                return reply
            if reply.get("error") != BUSY or time.monotonic() >= self.deadline:
                raise error_from_reply(reply)
            time.sleep(_POLL_S * 4)


def _deadline(wait_s: Optional[float]) -> float:
    return float("inf") if wait_s is None else time.monotonic() + wait_s


@contextmanager
def own_board(root: Root, command: str,
              wait_s: Optional[float] = 0.0) -> Iterator[Union[LocalOwner, DaemonOwner]]:
    """Yields a LocalOwner while this process holds the board lock; a DaemonOwner when a daemon
    holds the board (it carries the change out). Another holder: BoardBusy at once, or after
    `wait_s` (None: wait for ever)."""
    lock = BoardLock(root, command)
    end = _deadline(wait_s)
    while True:
        holder = lock.try_acquire()
        if holder is None:
            try:
                yield LocalOwner()
            finally:
                lock.release()
            return
        if holder.is_daemon and holder.socket and holder.alive:
            yield DaemonOwner(holder, lock.path, command, end)
            return
        if time.monotonic() >= end:
            raise BoardBusy(holder, lock.path)
        time.sleep(_POLL_S)


# The guards this process holds, by root: a borrow inside a borrow (each trial of a `tune`
# inside the study's) shares the outer one, so the board is never let go between them.
_HELD: Dict[str, Guard] = {}


@contextmanager
def borrow_board(root: Root, command: str, wait_s: Optional[float] = 0.0) -> Iterator[Guard]:
    """The board for a measurement: the board lock, or a lease from the daemon that holds it
    (it stops re-pinning until the lease's connection closes, then pins its profile again).
    A lease already lent to someone else counts as busy (`wait_s` applies). Yields the guard
    every batch of writes goes through (ownership/lease.py): under a lease, it refuses to write
    once the daemon has taken the board back. Re-entrant: inside a borrow of the same root
    (`tune` holds the board for its whole study) it yields the guard already held."""
    key = str(root.base)
    held = _HELD.get(key)
    if held is not None:
        yield held
        return
    with _borrow(root, command, wait_s) as guard:
        _HELD[key] = guard
        try:
            yield guard
        finally:
            _HELD.pop(key, None)


def lease_name(command: str) -> str:
    """`command` as a lease holder's name the daemon takes (wire.WHO: letters, digits, space
    and `_.:/-`, 64 at most): 'tune (EMC rates)' was refused, and the refusal read as a
    permission problem."""
    name = re.sub(r"[^A-Za-z0-9 _.:/-]+", "-", command).strip(" -_.:/")[:64]
    return name if WHO.match(name) else "jetbench"


@contextmanager
def _borrow(root: Root, command: str, wait_s: Optional[float]) -> Iterator[Guard]:
    end = _deadline(wait_s)
    while True:
        with own_board(root, command, wait_s=max(0.0, end - time.monotonic())
                       if end != float("inf") else None) as broker:
            if isinstance(broker, LocalOwner):
                yield Guard(root, None)
                return
            try:
                lease = open_lease(broker.socket_path, lease_name(command))
            except PermissionDenied:
                raise broker.unreachable("is not open to you") from None
            except (LeaseRefused, DaemonBusy) as refused:
                if time.monotonic() >= end:
                    raise BoardBusy(broker.holder, broker.lock_path,
                                    hint=f"{refused.message}; pass --wait [SECONDS] to "
                                         "queue") from None
            except JetbenchError as err:
                raise broker.unreachable(f"does not answer ({err.message})") from None
            else:
                with lease:
                    yield Guard(root, lease.token)
                return
        time.sleep(_POLL_S)
