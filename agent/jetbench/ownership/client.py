"""Talking to a running daemon over its control socket (`jetbench status`, scripts, tests)."""

from __future__ import annotations

import array
import errno
import json
import os
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from ..errors import HardwareError, JetbenchError, PermissionDenied, UsageError
from ..interrupts import interrupt_main
from .wire import BUSY, REVOKED

MAX_REPLY_BYTES = 4 * 1024 * 1024
# A daemon whose listen queue is full (a flood of connections) answers connect() with EAGAIN:
# tried again for this long, then "busy" (the daemon cuts idle and excess clients off within
# seconds, docs/daemon.md).
CONNECT_BUSY_S = 5.0


class DaemonBusy(HardwareError):
    """The daemon's control socket takes no new connection now (its queue is full)."""


def request(path: Path, cmd: str, *, timeout_s: float = 10.0,
            **fields: object) -> Dict[str, object]:
    """Send one request, return the reply document (`ok` says whether it succeeded): JSON
    from the daemon, in the daemon's shapes (daemon/held.py: StatusDoc for `status`)."""
    doc: Dict[str, object] = {"cmd": cmd, **fields}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        data = _exchange(sock, path, doc, timeout_s)
    finally:
        sock.close()
    return _decode(data, path)


def _exchange(sock: socket.socket, path: Path, doc: Dict[str, object], timeout_s: float
              ) -> bytes:
    with _socket_errors(path, timeout_s):
        _connect(sock, path)
        sock.sendall(json.dumps(doc).encode() + b"\n")
        data = bytearray()
        while not data.endswith(b"\n"):
            # One byte at a time past the first line would be slow; a reply is one line, and
            # a lease's later events must stay in the socket for its watcher: read to "\n".
            chunk = sock.recv(65536, socket.MSG_PEEK)
            if not chunk:
                break
            end = chunk.find(b"\n")
            data += sock.recv(len(chunk) if end < 0 else end + 1)
            if len(data) > MAX_REPLY_BYTES:
                raise HardwareError("the daemon's reply is too long", path=str(path))
    return bytes(data)


def _connect(sock: socket.socket, path: Path) -> None:
    end = time.monotonic() + CONNECT_BUSY_S
    pause = 0.01
    while True:
        try:
            _connect_once(sock, path)
            return
        except OSError as err:
            if err.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                raise
            if time.monotonic() >= end:
                raise DaemonBusy(
                    f"the jetbench daemon is busy: its control socket took no connection "
                    f"for {CONNECT_BUSY_S:g} s (its queue is full)", path=str(path),
                    hint="try again in a moment (the daemon cuts idle and excess clients "
                         "off); with measure/tune, --wait keeps trying") from None
            time.sleep(pause)  # the queue drains as the daemon accepts or cuts clients off
            pause = min(pause * 2, 0.2)


def _connect_once(sock: socket.socket, path: Path) -> None:
    try:
        sock.connect(str(path))
    except FileNotFoundError:
        raise HardwareError("the jetbench daemon is not running (no control socket)",
                            path=str(path),
                            hint="systemctl status jetbench; or pass --socket; `jetbench "
                                 "info` reads the board without the daemon") from None
    except ConnectionRefusedError:
        raise HardwareError("the jetbench daemon is not running (stale control socket)",
                            path=str(path), hint="systemctl status jetbench") from None
    except PermissionError:
        raise PermissionDenied("permission denied on the control socket", path=str(path),
                               hint="run with sudo, or add yourself to the jetbench group "
                                    "(then log in again)") from None


@contextmanager
def _socket_errors(path: Path, timeout_s: float) -> Iterator[None]:
    """A timeout or socket failure talking to the daemon, as one jetbench error."""
    try:
        yield
    except socket.timeout:
        raise HardwareError(f"the daemon did not answer within {timeout_s:g} s",
                            path=str(path)) from None
    except OSError as err:
        raise HardwareError(f"control socket error ({err.strerror or err})",
                            path=str(path)) from err


def _decode(data: bytes, path: Path) -> Dict[str, object]:
    try:
        reply = json.loads(data.decode("utf-8"))
    except ValueError:
        raise HardwareError("the daemon's reply is not JSON", path=str(path)) from None
    if not isinstance(reply, dict):
        raise HardwareError("the daemon's reply is not a JSON object", path=str(path))
    return reply


class LeaseRefused(HardwareError):
    """The daemon lends the board to one borrower at a time."""


class Lease:
    """The board borrowed from the daemon for as long as this connection is open. A watcher
    thread reads the daemon's events: when it stops and takes the board back (`revoked`), the
    main thread is interrupted, so the measurement puts its clocks back before the daemon
    restores the board."""

    def __init__(self, sock: socket.socket, path: Path, reply: Dict[str, object],
                 lock_fds: List[int], pending: bytes = b""):
        self.sock = sock
        self.path = path
        self.reply = reply
        # The daemon's board-lock descriptor, shared: should the daemon die mid-lease, the
        # board stays locked until this borrower has put its clocks back.
        self.lock_fds = lock_fds
        self._pending = pending
        token = reply.get("token")  # checked before each batch of writes (ownership/lease.py)
        self.token: Optional[str] = token if isinstance(token, str) and token else None
        self.revoked: Optional[str] = None
        self._closing = False
        self._watcher = threading.Thread(target=self._watch, name="jetbench-lease",
                                         daemon=True)

    def _watch(self) -> None:
        buf = self._pending
        while not self._closing:
            try:
                chunk = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            if not chunk:
                return  # the daemon is gone (its lock went with it): nothing to hand back
            buf += chunk
            if REVOKED.encode() in buf and not self._closing:
                self.revoked = "the jetbench daemon is stopping and takes the board back"
                sys.stderr.write(f"\njetbench: {self.revoked}: interrupting\n")
                interrupt_main("lease revoked")  # SIGINT may be ignored: not via it
                return

    def __enter__(self) -> Lease:
        self.sock.settimeout(0.5)
        self._watcher.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Hand the board back: the daemon takes it when the connection closes."""
        self._closing = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self._watcher.is_alive():
            self._watcher.join(timeout=2)
        for fd in self.lock_fds:  # before the socket: the daemon takes the board on EOF
            os.close(fd)
        self.lock_fds = []
        self.sock.close()


def open_lease(path: Path, who: str, timeout_s: float = 60.0) -> Lease:
    """Borrow the board: LeaseRefused when it is lent to someone else already."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    fds: List[int] = []
    try:
        line, rest = _lease_exchange(sock, path, who, fds, timeout_s)
        reply = _decode(line, path)
    except BaseException:
        for fd in fds:
            os.close(fd)
        sock.close()
        raise
    if not reply.get("ok"):
        for fd in fds:
            os.close(fd)
        sock.close()
        if reply.get("error") == BUSY:  # lent to someone else already
            raise LeaseRefused(str(reply.get("message")), path=str(path))
        raise error_from_reply(reply)
    return Lease(sock, path, reply, fds, rest)


def _lease_exchange(sock: socket.socket, path: Path, who: str, fds: List[int],
                    timeout_s: float) -> Tuple[bytes, bytes]:
    """Send the lease request; read its reply line and the descriptors passed with it
    (recvmsg: a peek would install them twice)."""
    _connect(sock, path)
    with _socket_errors(path, timeout_s):
        sock.sendall(json.dumps({"cmd": "lease", "who": who}).encode() + b"\n")
        data = b""
        space = socket.CMSG_SPACE(4 * array.array("i").itemsize)
        while b"\n" not in data:
            chunk, ancillary, _flags, _addr = sock.recvmsg(65536, space)
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(payload) - len(payload) % array.array("i").itemsize
                    fds.extend(array.array("i", payload[:usable]))
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_REPLY_BYTES:
                raise HardwareError("the daemon's reply is too long", path=str(path))
    line, _, rest = data.partition(b"\n")
    return line, rest


def error_from_reply(reply: Dict[str, object]) -> JetbenchError:
    message = f"the jetbench daemon refused: {reply.get('message', reply.get('error'))}"
    given = reply.get("hint")
    hint = given if isinstance(given, str) else None
    if reply.get("error") == BUSY:
        hint = (hint + "; " if hint else "") + "or pass --wait [SECONDS] to queue"
    if reply.get("exit_code") == UsageError.exit_code:
        return UsageError(message, hint=hint)
    return HardwareError(message, hint=hint)
