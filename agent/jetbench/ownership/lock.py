"""One owner of the board: an exclusive `flock` on a file beside the state journal.

Every command that writes clocks or the journal holds it (docs/design.md, "One owner of the board").
The kernel releases a `flock` when its holder dies, so a kill -9 never leaves the board stuck.
The holder writes who it is (pid, command, since, and a daemon its control socket) into the file
so that a refused writer can say who holds the board and what to do, and the CLI can find the
daemon to hand its request to. Read-only commands never take it; they may `peek`.

A `flock` belongs to the open file, and the daemon passes its descriptor to a borrower, so more
than one process may hold it. The file is therefore removed only by a holder that never passed
its descriptor on (the sole holder: `maxperf`, `apply`, `restore`, `measure` on its own): it
unlinks, then closes, and a waiter that had opened the removed file notices after locking it
(the path no longer names the file it locked) and takes the new one. A lock whose descriptor
was passed on (`fileno()`: the daemon's, once it lent the board) is never removed:
removing it while a stopped borrower still held it let the next writer create a new, unlocked
file and write under the borrower. A kill -9 leaves an unlocked file, which the next holder
reuses.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from dataclasses import dataclass
from typing import Dict, Optional

from ..errors import HardwareError
from ..hw.fs import Root
from .statedir import NO_SPACE, ensure_state_dir, hint_for

LOCK_PATH = "/var/lib/jetbench/board.lock"
LOCK_FILE_MODE = 0o664  # any member of the state directory's group may take the board
_POLL_S = 0.05


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str
    since: str  # ISO 8601, local time
    socket: Optional[str] = None  # a daemon's control socket: where to ask it (the broker)

    @property
    def is_daemon(self) -> bool:
        return self.command.split(" ", 1)[0] == "daemon"

    def describe(self) -> str:
        text = f"pid {self.pid} (jetbench {self.command}, since {self.since})"
        if not self.alive:
            # A daemon killed mid-lease: its descriptor lives on in the borrower it lent it to.
            text += "; that process has ended, a measurement it lent the board to holds it"
        return text

    @property
    def alive(self) -> bool:
        if self.pid <= 0:
            return True  # unknown: assume so
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except OSError:  # EPERM: it exists, as another user
            return True
        return True


class BoardBusy(HardwareError):
    """Another jetbench process owns the board."""

    def __init__(self, holder: Optional[Holder], path: str, hint: Optional[str] = None):
        who = holder.describe() if holder else "another process"
        if hint is not None:
            pass
        elif holder and holder.is_daemon and holder.alive:
            hint = ("the jetbench daemon holds the board (jetbench.service): use `jetbench "
                    "status`, or stop it first (sudo systemctl stop jetbench)")
        else:
            hint = "wait for it to finish, or pass --wait [SECONDS] to queue behind it"
        super().__init__(f"the board is in use by {who}", path=path, hint=hint)
        self.holder = holder


def _parse_holder(text: str) -> Optional[Holder]:
    try:
        doc = json.loads(text)
        sock = doc.get("socket")
        return Holder(int(doc["pid"]), str(doc["command"]), str(doc["since"]),
                      str(sock) if isinstance(sock, str) and sock else None)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class BoardLock:
    """`with BoardLock(root, "maxperf"):` ... ; `wait_s` None waits forever, 0 not at all."""

    def __init__(self, root: Root, command: str, wait_s: Optional[float] = 0.0,
                 socket: Optional[str] = None):
        self.root = root
        self.command = command
        self.wait_s = wait_s
        self.socket = socket  # a daemon names its control socket, so others can find it
        self._fd: Optional[int] = None
        self._passed_on = False  # fileno() handed out: another process may hold it too

    @property
    def path(self) -> str:
        return str(self.root.path(LOCK_PATH))

    @property
    def held(self) -> bool:
        return self._fd is not None

    def fileno(self) -> Optional[int]:
        """The locked descriptor: the daemon passes it to a borrower (SCM_RIGHTS), so that the
        lock stays held while the borrower works even if the daemon dies meanwhile. From then
        on the file is never removed (see the module's docstring)."""
        if self._fd is not None:
            self._passed_on = True
        return self._fd

    def _open(self) -> int:
        ensure_state_dir(self.root)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         LOCK_FILE_MODE)
        except OSError as err:
            if err.errno == errno.ELOOP or os.path.islink(self.path):
                raise HardwareError("the board lock is a symbolic link: refusing to follow it",
                                    path=self.path,
                                    hint=f"remove the link (sudo rm {self.path}); jetbench "
                                         "recreates the file") from err
            raise HardwareError(f"cannot open the board lock ({err.strerror})", path=self.path,
                                hint=hint_for(err, os.path.dirname(self.path))) from err
        try:
            st = os.fstat(fd)
            if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != LOCK_FILE_MODE:
                # Ours (we just created it): the creator's umask must not lock the group out
                # (install-service's state directory is root:jetbench 2775).
                os.fchmod(fd, LOCK_FILE_MODE)
        except OSError:
            pass
        return fd

    def acquire(self) -> BoardLock:
        """Take the lock, waiting up to `wait_s`; BoardBusy (exit 2) names the holder."""
        deadline = None if self.wait_s is None else time.monotonic() + self.wait_s
        while True:
            holder = self.try_acquire()
            if self._fd is not None:
                return self
            if deadline is not None and time.monotonic() >= deadline:
                raise BoardBusy(holder, self.path)
            time.sleep(_POLL_S)

    def try_acquire(self) -> Optional[Holder]:
        """One attempt: None when the lock is ours now, else who holds it (an unreadable
        holder record reads as pid 0, command "unknown")."""
        if self._fd is not None:
            return None
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                holder = _read_holder_fd(fd)
                os.close(fd)
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise HardwareError(f"cannot lock the board ({err.strerror})",
                                        path=self.path) from err
                return holder or Holder(0, "unknown", "unknown")
            if self._still_linked(fd):
                break
            os.close(fd)  # locked a file its last holder had removed: take the new one
        info = {"pid": os.getpid(), "command": self.command,
                "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        if self.socket:
            info["socket"] = self.socket
        self._fd = fd
        _write_record(fd, info, self.path)
        return None

    def _still_linked(self, fd: int) -> bool:
        try:
            here, there = os.fstat(fd), os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)

    def release(self, handed_to: Optional[Holder] = None) -> None:
        """Drop the lock. A sole holder removes the file, then closes: nothing is left in the
        state directory. A holder that passed its descriptor on keeps the file and empties its
        record, or, with `handed_to`, names the process that still holds the lock through
        that descriptor (a borrower the daemon could not take the board back from), so that a
        refused writer is told who holds the board."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if not self._passed_on:
                os.unlink(self.path)
            else:
                doc = None if handed_to is None else {
                    "pid": handed_to.pid, "command": handed_to.command,
                    "since": handed_to.since}
                _write_record(fd, doc, self.path)
        except (OSError, HardwareError):
            pass
        os.close(fd)  # the last descriptor of the open file closed drops the flock

    def __enter__(self) -> BoardLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _write_record(fd: int, info: Optional[Dict[str, object]], path: str) -> None:
    """Who holds the lock, into its file (None: empty it). With no space left (a full state
    directory) the lock is held without its record: others read "unknown" as the holder, and
    `restore`, which needs no new space, still runs (issue 63)."""
    try:
        os.ftruncate(fd, 0)
        if info is not None:
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    except OSError as err:
        if err.errno in NO_SPACE:
            os.ftruncate(fd, 0)  # never half a record
            return
        raise HardwareError(f"cannot write the board lock's holder ({err.strerror})",
                            path=path, hint=hint_for(err, os.path.dirname(path))) from err


def _read_holder_fd(fd: int) -> Optional[Holder]:
    try:
        return _parse_holder(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
    except OSError:
        return None


def peek(root: Root) -> Optional[Holder]:
    """Who holds the board now, without taking it (None: nobody). Never creates anything."""
    path = str(root.path(LOCK_PATH))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _read_holder_fd(fd) or Holder(0, "unknown", "unknown")
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
