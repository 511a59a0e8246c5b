"""A lease's token: a borrower never writes after the daemon took the board back.

The daemon lends the board to `measure`/`sweep` and passes it its board-lock descriptor, so the
two share one `flock` and it cannot keep them apart. This file can: `/var/lib/jetbench/
board.lease` holds the current lease's random token, and each side takes its own `flock` on it
for every batch of writes:

- the daemon writes the token when it lends the board (`grant`);
- the borrower wraps each batch (a pin: journal then knobs; the put-back) in `Guard.writing()`:
  it locks the file, checks the token is still there, writes, unlocks. A token that is gone is
  `LeaseRevoked`: nothing is written, exit 130;
- the daemon, before it writes anything itself after a lease (taking the board back, restoring
  on SIGTERM), locks the file and removes the token (`revoke`). From then on the borrower writes
  nothing. A borrower stopped (SIGSTOP, Ctrl-Z, a debugger) *inside* a batch keeps the file
  locked: `revoke` then gives up after its wait and the daemon writes nothing either, keeps the
  journal and leaves the board lock to the borrower; when it resumes it finishes that batch and
  `jetbench restore` brings back the originals.

The file is emptied, never removed while in use (a token is checked in the file the borrower
locked, so a removed one could not be told from a revoked one anyway).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from contextlib import contextmanager
from typing import Iterator, Optional

from ..errors import EXIT_INTERRUPTED, HardwareError, JetbenchError
from ..hw.fs import Root
from .statedir import STATE_DIR, hint_for, state_dir_fd

LEASE_NAME = "board.lease"
LEASE_PATH = f"{STATE_DIR}/{LEASE_NAME}"
_FILE_MODE = 0o644  # the borrower (a jetbench group member) only reads it and locks it
_POLL_S = 0.02
# How long the borrower waits for the daemon's short hold on the file (writing or removing a
# token takes milliseconds): past it, the daemon is stuck, and nothing is written.
GUARD_WAIT_S = 10.0


class LeaseRevoked(JetbenchError):
    """The daemon took the board back while this borrower was not answering (stopped)."""

    exit_code = EXIT_INTERRUPTED

    def __init__(self, path: str):
        super().__init__(
            "the jetbench daemon took the board back (this process was stopped past its wait): "
            "nothing was written after that",
            path=path,
            hint="the daemon restored the board itself; `jetbench restore` says whether "
                 "anything is left to put back")


def _open(root: Root, create: bool, write: bool) -> Optional[int]:
    """The lease file's descriptor (None: it does not exist), never through a link."""
    with state_dir_fd(root, create=create) as dir_fd:
        if dir_fd is None:
            return None
        flags = (os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_RDWR if write else os.O_RDONLY)
                 | (os.O_CREAT if create else 0))
        try:
            fd = os.open(LEASE_NAME, flags, _FILE_MODE, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise HardwareError(f"cannot open the lease file ({err.strerror})",
                                path=str(root.path(LEASE_PATH)),
                                hint=hint_for(err, root.path(STATE_DIR)) + "; a symbolic "
                                     "link there is refused (remove it)") from err
    if create:
        try:
            os.fchmod(fd, _FILE_MODE)
        except OSError:
            pass
    return fd


def _lock(fd: int, wait_s: float) -> bool:
    """flock(LOCK_EX) on `fd`, waiting at most `wait_s`; False when it was not had."""
    end = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
        if time.monotonic() >= end:
            return False
        time.sleep(_POLL_S)


def _token(fd: int) -> Optional[str]:
    try:
        doc = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        return None
    token = doc.get("token") if isinstance(doc, dict) else None
    return token if isinstance(token, str) and token else None


def grant(root: Root, token: str, borrower_pid: int, who: str) -> None:
    """The daemon: record `token` as the lease now given (under the file's lock)."""
    fd = _open(root, create=True, write=True)
    assert fd is not None
    try:
        if not _lock(fd, GUARD_WAIT_S):  # a borrower of an earlier lease, stopped mid-batch
            raise HardwareError("a stopped borrower still holds the lease file",
                                path=str(root.path(LEASE_PATH)))
        doc = {"token": token, "pid": borrower_pid, "who": who, "daemon_pid": os.getpid()}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(doc) + "\n").encode(), 0)
            os.fsync(fd)
        except OSError as err:
            raise HardwareError(f"cannot write the lease file ({err.strerror})",
                                path=str(root.path(LEASE_PATH)),
                                hint=hint_for(err, root.path(STATE_DIR))) from err
    finally:
        os.close(fd)


def revoke(root: Root, wait_s: float) -> bool:
    """The daemon: end the current lease so its borrower writes nothing more. False when the
    borrower holds the file past `wait_s` (stopped inside a batch of writes): then the daemon
    must write nothing itself."""
    fd = _open(root, create=False, write=True)
    if fd is None:
        return True
    try:
        if not _lock(fd, wait_s):
            return False
        os.ftruncate(fd, 0)
        os.fsync(fd)
        return True
    finally:
        os.close(fd)


class Guard:
    """The borrower's side: `with guard.writing():` around each batch of writes."""

    def __init__(self, root: Root, token: Optional[str]):
        self.root = root
        self.token = token  # None: the board lock is ours alone, nothing to check

    @contextmanager
    def writing(self) -> Iterator[None]:
        if self.token is None:
            yield
            return
        shown = str(self.root.path(LEASE_PATH))
        fd = _open(self.root, create=False, write=False)
        if fd is None:
            raise LeaseRevoked(shown)
        try:
            if not _lock(fd, GUARD_WAIT_S):
                raise HardwareError("the jetbench daemon holds the lease file and does not let "
                                    "go: nothing was written", path=shown,
                                    hint="systemctl status jetbench; then `jetbench restore`")
            if _token(fd) != self.token:
                raise LeaseRevoked(shown)
            yield
        finally:
            os.close(fd)

