"""The control socket server: a Unix stream socket, one JSON request per line, served by one
thread with `selectors` (no thread per client, so no client can exhaust threads).

Hostile or broken clients are bounded: a line longer than MAX_LINE_BYTES gets an error reply and
the connection is closed; a line must be finished within `line_timeout_s` of its first byte (a
client trickling a byte at a time is cut off quickly); a client that sends nothing for
`client_timeout_s`, or stops reading its replies, is disconnected. Connections are capped in
all (`max_clients`) and per peer uid (`max_per_uid`, from SO_PEERCRED): past a cap, the oldest
connection that has sent no whole request (and holds no lease) makes room, so slow clients
cannot lock the others out, and a client that asked is never reset before its reply (it is
served, then idle-timed-out like any other; with no such connection to close, the newcomer is
told "busy"). A connection holding a lease (the handler says so) is exempt from the idle
timeout; when it closes, `on_disconnect` is told. A request the handler fails on is an error
reply, never a dead thread, and client input never puts a traceback in the log.
"""

from __future__ import annotations

import array
import grp
import logging
import os
import selectors
import socket
import stat
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from ..errors import HardwareError, JetbenchError, UsageError
from ..ownership.wire import (
    BAD_REQUEST,
    BUSY,
    FAILED,
    MAX_LINE_BYTES,
    TOO_LONG,
    ProtocolError,
    Request,
    encode,
    error_reply,
    parse_request,
)

log = logging.getLogger("jetbench.daemon")

SOCKET_MODE = 0o660
SOCKET_GROUP = "jetbench"
MAX_OUT_BYTES = 256 * 1024  # replies queued for a client that does not read them

HOLD = "_hold"  # a reply key the handler sets: keep this connection as a lease; not sent
FDS = "_fds"  # a reply key: descriptors to pass with the reply (SCM_RIGHTS); not sent


@dataclass(frozen=True)
class Peer:
    """Who is on the other end of a connection (SO_PEERCRED; -1 where unknown)."""

    conn: int  # this server's connection number, unique for its life
    pid: int
    uid: int
    gid: int


Handler = Callable[[Request, Peer], Dict[str, object]]  # the reply, HOLD and FDS included
OnDisconnect = Callable[[Peer], None]


def peer_credentials(sock: socket.socket, conn: int) -> Peer:
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, gid = struct.unpack("3i", raw)
    except (OSError, AttributeError):  # not Linux: no per-uid accounting
        pid = uid = gid = -1
    return Peer(conn, pid, uid, gid)


def bind_unix(path: Path, group: str = SOCKET_GROUP) -> socket.socket:
    """A listening socket at `path`, mode 0660, group `group` when that group exists.

    A stale socket file (no one listening) is replaced; a live one, or anything that is not a
    socket, is refused rather than taken over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise UsageError(f"not a socket, refusing to replace it: {path}")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(1.0)
            probe.connect(str(path))
        except OSError:
            path.unlink()  # stale: left by a daemon that was killed
        else:
            raise UsageError(f"another jetbench daemon is listening on {path}",
                             hint="stop it first (systemctl stop jetbench), or use --socket")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    old_umask = os.umask(0o117)  # never world-accessible, not even between bind and chmod
    try:
        sock.bind(str(path))
    except OSError as err:
        sock.close()
        raise HardwareError(f"cannot create the control socket ({err.strerror})", path=str(path),
                            hint="the daemon runs as root under systemd; or pass --socket") from err
    finally:
        os.umask(old_umask)
    os.chmod(path, SOCKET_MODE)
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        log.warning("group %r does not exist: the control socket %s keeps group %s, so only "
                    "root and that group can use it (`jetbench install-service` creates it)",
                    group, path, _group_name(os.getegid()))
    else:
        try:
            os.chown(path, -1, gid)
        except OSError as err:
            log.warning("cannot give %s to group %s (%s)", path, group, err.strerror)
    sock.listen(16)
    sock.setblocking(False)
    return sock


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


class _Client:
    __slots__ = ("sock", "peer", "inbuf", "outbuf", "connected", "last_activity",
                 "line_started", "closing", "draining", "held", "fds", "asked")

    def __init__(self, sock: socket.socket, peer: Peer, now: float):
        self.sock = sock
        self.peer = peer
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.connected = now
        self.last_activity = now
        self.line_started: Optional[float] = None  # first byte of an unfinished line
        self.closing = False  # stop answering; hang up once outbuf is flushed
        self.draining = False  # replies sent and write side shut: discard input until EOF
        self.held = False  # holds a lease: never idle-timed-out, never evicted
        self.fds: List[int] = []  # to pass with the next bytes sent
        self.asked = False  # sent a whole request: never evicted (its reply is its due)

    def deadline(self, idle_s: float, line_s: float) -> float:
        if self.held and not self.inbuf and not self.outbuf:
            return float("inf")
        if self.line_started is not None:
            return min(self.line_started + line_s, self.last_activity + idle_s)
        return self.last_activity + idle_s


class ControlServer:
    """Serves `handler` on a Unix socket in a thread. Constructing one touches nothing."""

    def __init__(self, path: Path, handler: Handler, *, client_timeout_s: float = 5.0,
                 line_timeout_s: float = 1.0, max_clients: int = 16, max_per_uid: int = 8,
                 on_disconnect: Optional[OnDisconnect] = None):
        self.path = Path(path)
        self.handler = handler
        self.on_disconnect = on_disconnect
        self.client_timeout_s = client_timeout_s
        self.line_timeout_s = min(line_timeout_s, client_timeout_s)
        self.max_clients = max_clients
        self.max_per_uid = max_per_uid
        self._next_conn = 0
        self._listener: Optional[socket.socket] = None
        self._sel: Optional[selectors.BaseSelector] = None
        self._wake_r: Optional[socket.socket] = None
        self._wake_w: Optional[socket.socket] = None
        self._clients: Dict[int, _Client] = {}
        self._thread: Optional[threading.Thread] = None
        self._stop = False
        self.served = 0
        self.rejected = 0
        self.evicted = 0
        # (conn, doc) queued by other threads for a connection
        self._events: List[Tuple[int, Mapping[str, object]]] = []
        self._events_lock = threading.Lock()

    def start(self) -> None:
        self._listener = bind_unix(self.path)
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel.register(self._listener, selectors.EVENT_READ, "listen")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._loop, name="jetbench-control", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop = True
        try:
            assert self._wake_w is not None
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join(timeout=5)
        self._thread = None
        self.on_disconnect = None  # stopping: the daemon ends its leases itself
        for client in list(self._clients.values()):
            self._close(client)
        for s in (self._listener, self._wake_r, self._wake_w):
            if s is not None:
                s.close()
        if self._sel is not None:
            self._sel.close()
        try:
            if stat.S_ISSOCK(self.path.lstat().st_mode):
                self.path.unlink()
        except OSError:
            pass

    def send_event(self, conn: int, doc: Mapping[str, object]) -> None:
        """Queue an unsolicited line for connection `conn` (any thread; the loop sends it)."""
        with self._events_lock:
            self._events.append((conn, doc))
        try:
            assert self._wake_w is not None
            self._wake_w.send(b"e")
        except OSError:
            pass

    def _deliver_events(self) -> None:
        with self._events_lock:
            events, self._events = self._events, []
        for conn, doc in events:
            for client in list(self._clients.values()):
                if client.peer.conn == conn:
                    self._reply(client, doc)
                    self._flush(client)
                    if client.sock.fileno() >= 0:
                        self._update_interest(client)

    # -- the loop ------------------------------------------------------------------------------
    def _loop(self) -> None:
        assert self._sel is not None
        while not self._stop:
            timeout = None
            if self._clients:
                first = min(c.deadline(self.client_timeout_s, self.line_timeout_s)
                            for c in self._clients.values())
                if first != float("inf"):
                    timeout = max(0.0, first - time.monotonic())
            try:
                events = self._sel.select(timeout)
            except OSError:  # pragma: no cover - EINTR is retried by Python; anything else
                continue
            for key, mask in events:
                try:
                    if key.data == "listen":
                        self._accept()
                    elif key.data == "wake":
                        self._wake_r.recv(64)  # type: ignore[union-attr]
                        self._deliver_events()
                    else:
                        self._service(key.data, mask)
                except Exception as err:  # one client's trouble must never end the server
                    log.error("control socket: unexpected %s: %s", type(err).__name__, err)
                    if isinstance(key.data, _Client):
                        self._close(key.data)
            self._reap()

    def _accept(self) -> None:
        assert self._listener is not None and self._sel is not None
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:  # EMFILE and friends: try again on the next event
                log.warning("control socket: accept failed (%s)", err.strerror)
                return
            self._next_conn += 1
            peer = peer_credentials(sock, self._next_conn)
            if not self._make_room(peer.uid):
                self.rejected += 1
                try:
                    sock.setblocking(False)
                    sock.send(encode(error_reply(BUSY, "too many clients")))
                except OSError:
                    pass
                sock.close()
                continue
            sock.setblocking(False)
            client = _Client(sock, peer, time.monotonic())
            self._clients[sock.fileno()] = client
            self._sel.register(sock, selectors.EVENT_READ, client)

    def _make_room(self, uid: int) -> bool:
        """Below both caps, or an evictable connection closed to get there. The oldest
        connection that holds no lease goes first (a slow client cannot hold its place)."""
        for same_uid in (True, False):
            while True:
                pool = [c for c in self._clients.values() if not same_uid or c.peer.uid == uid]
                cap = self.max_per_uid if same_uid else self.max_clients
                if uid < 0 and same_uid or len(pool) < cap:
                    break
                victims: List[_Client] = sorted((c for c in pool
                                                 if not c.held and not c.asked),
                                                key=lambda c: c.connected)
                if not victims:
                    return False
                self.evicted += 1
                self._close(victims[0])
        return True

    def _service(self, client: _Client, mask: int) -> None:
        if mask & selectors.EVENT_READ:
            try:
                data = client.sock.recv(MAX_LINE_BYTES + 1)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                self._close(client)
                return
            if data == b"":
                self._close(client)  # the client hung up (replies to it are dropped)
                return
            if data and not client.closing:
                client.last_activity = time.monotonic()
                client.inbuf += data
                self._requests(client)
                if not client.inbuf:
                    client.line_started = None
                elif client.line_started is None:
                    client.line_started = client.last_activity
            # (data while closing is discarded, without counting as activity: the reaper ends
            # a client that keeps sending after it was told to stop)
        if client.outbuf:
            self._flush(client)
        if client.sock.fileno() >= 0:
            self._update_interest(client)

    def _requests(self, client: _Client) -> None:
        # Every complete line read so far (at most one recv's worth: a chatty client gets one
        # read's worth of answers per turn, so it cannot starve the others).
        while not client.closing:
            end = client.inbuf.find(b"\n")
            if end < 0:
                break
            line = bytes(client.inbuf[:end]).rstrip(b"\r")
            del client.inbuf[: end + 1]
            client.line_started = time.monotonic() if client.inbuf else None
            if line.strip():
                client.asked = True
                reply = self._answer(line, client.peer)
                if reply.pop(HOLD, False):
                    client.held = True
                fds = reply.pop(FDS, [])
                if isinstance(fds, list):
                    client.fds += fds
                self._reply(client, reply)
            if len(client.outbuf) > MAX_OUT_BYTES:
                break
        if len(client.inbuf) > MAX_LINE_BYTES:
            # No newline within the limit: not a request; say so and hang up.
            self._reply(client, error_reply(TOO_LONG, f"request longer than {MAX_LINE_BYTES} "
                                                      "bytes; closing"))
            client.inbuf.clear()
            client.closing = True
        if len(client.outbuf) > MAX_OUT_BYTES:
            self._close(client)  # it sends and never reads

    def _answer(self, line: bytes, peer: Peer) -> Dict[str, object]:
        try:
            request = parse_request(line)
        except ProtocolError as err:
            return error_reply(err.code, err.message)
        self.served += 1
        try:
            return self.handler(request, peer)
        except JetbenchError as err:
            reply = error_reply(getattr(err, "reply_code", FAILED), str(err))
            reply["exit_code"] = err.exit_code  # the CLI exits as if it had failed itself
            if err.hint:
                reply["hint"] = err.hint
            return reply
        except Exception as err:  # a daemon bug: logged in one line, answered, served on
            log.error("control socket: %s failed: %s: %s", request.cmd, type(err).__name__, err)
            return error_reply(FAILED, f"{request.cmd} failed: {type(err).__name__}: {err}")

    def _reply(self, client: _Client, doc: Mapping[str, object]) -> None:
        client.outbuf += encode(doc)

    def _flush(self, client: _Client) -> None:
        try:
            if client.fds:
                ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                              array.array("i", client.fds).tobytes())]
                sent = client.sock.sendmsg([client.outbuf], ancillary)
                client.fds = []
            else:
                sent = client.sock.send(client.outbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(client)
            return
        if sent:
            client.last_activity = time.monotonic()
        del client.outbuf[:sent]
        if not client.outbuf and client.closing and not client.draining:
            # Shut our side, then read to EOF: closing with unread input would send a reset
            # that can destroy the error reply before the client reads it.
            try:
                client.sock.shutdown(socket.SHUT_WR)
            except OSError:
                self._close(client)
                return
            client.draining = True

    def _update_interest(self, client: _Client) -> None:
        assert self._sel is not None
        events = selectors.EVENT_READ
        if client.outbuf:
            events |= selectors.EVENT_WRITE
        try:
            self._sel.modify(client.sock, events, client)
        except (KeyError, ValueError):
            pass

    def _reap(self) -> None:
        """Disconnect clients past their deadline: a line not finished in time, nothing sent
        for the idle timeout, or replies left unread."""
        now = time.monotonic()
        for client in [c for c in self._clients.values()
                       if c.deadline(self.client_timeout_s, self.line_timeout_s) <= now]:
            if client.inbuf:
                try:
                    client.sock.send(encode(error_reply(BAD_REQUEST, "timed out waiting for the "
                                                                     "end of the line")))
                except OSError:
                    pass
            self._close(client)

    def _close(self, client: _Client) -> None:
        fd = client.sock.fileno()
        if fd >= 0:
            self._clients.pop(fd, None)
            try:
                assert self._sel is not None
                self._sel.unregister(client.sock)
            except (KeyError, ValueError):
                pass
        else:
            for k, v in list(self._clients.items()):
                if v is client:
                    del self._clients[k]
        client.sock.close()
        if client.held:
            client.held = False
            if self.on_disconnect is not None:
                try:
                    self.on_disconnect(client.peer)
                except Exception as err:  # the server goes on; the daemon logs its own errors
                    log.error("control socket: ending a lease failed: %s: %s",
                              type(err).__name__, err)


