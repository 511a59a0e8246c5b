"""The control socket server: a Unix stream socket, one JSON request per line, served by one
thread with `selectors` (no thread per client, so no client can exhaust threads).

Hostile or broken clients are bounded: a line longer than MAX_LINE_BYTES gets an error reply and
the connection is closed; a client that sends half a line (or nothing) for `client_timeout_s`,
or stops reading its replies, is disconnected; past `max_clients` connections, new ones are
told "busy" and closed. A request the handler fails on is an error reply, never a dead thread.
"""

from __future__ import annotations

import grp
import logging
import os
import selectors
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from ..errors import HardwareError, JetbenchError, UsageError
from .protocol import (
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

Handler = Callable[[Request], Dict[str, Any]]


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
    __slots__ = ("sock", "inbuf", "outbuf", "last_activity", "closing", "draining")

    def __init__(self, sock: socket.socket, now: float):
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.last_activity = now
        self.closing = False  # stop answering; hang up once outbuf is flushed
        self.draining = False  # replies sent and write side shut: discard input until EOF


class ControlServer:
    """Serves `handler` on a Unix socket in a thread. Constructing one touches nothing."""

    def __init__(self, path: Path, handler: Handler, *, client_timeout_s: float = 5.0,
                 max_clients: int = 16):
        self.path = Path(path)
        self.handler = handler
        self.client_timeout_s = client_timeout_s
        self.max_clients = max_clients
        self._listener: Optional[socket.socket] = None
        self._sel: Optional[selectors.BaseSelector] = None
        self._wake_r: Optional[socket.socket] = None
        self._wake_w: Optional[socket.socket] = None
        self._clients: Dict[int, _Client] = {}
        self._thread: Optional[threading.Thread] = None
        self._stop = False
        self.served = 0
        self.rejected = 0

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

    # -- the loop ------------------------------------------------------------------------------
    def _loop(self) -> None:
        assert self._sel is not None
        while not self._stop:
            timeout = None
            if self._clients:
                oldest = min(c.last_activity for c in self._clients.values())
                timeout = max(0.0, oldest + self.client_timeout_s - time.monotonic())
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
                    else:
                        self._service(key.data, mask)
                except Exception:  # one client's trouble must never end the server
                    log.exception("control socket: unexpected error")
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
            if len(self._clients) >= self.max_clients:
                self.rejected += 1
                try:
                    sock.setblocking(False)
                    sock.send(encode(error_reply(BUSY, "too many clients")))
                except OSError:
                    pass
                sock.close()
                continue
            sock.setblocking(False)
            client = _Client(sock, time.monotonic())
            self._clients[sock.fileno()] = client
            self._sel.register(sock, selectors.EVENT_READ, client)

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
            if line.strip():
                self._reply(client, self._answer(line))
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

    def _answer(self, line: bytes) -> Dict[str, Any]:
        try:
            request = parse_request(line)
        except ProtocolError as err:
            return error_reply(err.code, err.message)
        self.served += 1
        try:
            return self.handler(request)
        except JetbenchError as err:
            reply = error_reply(FAILED, str(err))
            if err.hint:
                reply["hint"] = err.hint
            return reply
        except Exception as err:
            log.exception("control socket: %s failed", request.cmd)
            return error_reply(FAILED, f"{request.cmd} failed: {type(err).__name__}: {err}")

    def _reply(self, client: _Client, doc: Dict[str, Any]) -> None:
        client.outbuf += encode(doc)

    def _flush(self, client: _Client) -> None:
        try:
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
        """Disconnect clients idle past the timeout: half a line, nothing, or unread replies."""
        deadline = time.monotonic() - self.client_timeout_s
        for client in [c for c in self._clients.values() if c.last_activity < deadline]:
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


