"""A metrics endpoint that answers as the test says: well, or in one of the ways a hostile or
broken one does (issue 63). Raw sockets: it must be able to send what no HTTP library would."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from typing import Optional

GOOD = "good"
MODES = ("bad-status", "trickle", "huge-counter", "big-page", "broken-chunked",
         "many-headers", "long-header", "nan-counter", "silent")


def _page(count: float) -> bytes:
    return (f"# HELP items_total Items done\n# TYPE items_total counter\n"
            f"items_total {count!r}\n").encode()


class HostileEndpoint:
    """Serves `items_total` rising by `rate` per second while `mode` is GOOD; else the mode's
    fault. `url` is its page. Stop with `close()`."""

    def __init__(self, rate: float = 30.0, mode: str = GOOD):
        self.rate, self.mode = rate, mode
        self._t0 = time.monotonic()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/metrics"
        self._closed = False
        self.requests = 0
        self.served: Counter = Counter()  # answers given whole, by mode
        # just under 8 MiB of other series (the counter is added after them)
        line = b'other_series{label="%08d",pad="' + b"x" * 60 + b'"} 1\n'
        self._big = b"".join(line % k for k in range(8 * 1024 * 1024 // len(line % 0) - 1))
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        self.requests += 1
        try:
            conn.settimeout(30)
            conn.recv(65536)  # the request head (small, one packet)
            mode = self.mode
            self._send(conn, mode)
            self.served[mode] += 1
        except OSError:
            pass
        finally:
            conn.close()

    def _send(self, conn: socket.socket, mode: str) -> None:
        count = self.rate * (time.monotonic() - self._t0)
        ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        if mode == GOOD:
            body = _page(count)
            conn.sendall(ok + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        elif mode == "bad-status":
            conn.sendall(b"HTTZ/9 what\r\n\r\nitems_total 1\n")
        elif mode == "trickle":  # one byte a second, for ever
            for byte in ok + b"\r\n" + _page(count) * 1000:
                if self._closed:
                    return
                conn.sendall(bytes([byte]))
                time.sleep(1.0)
        elif mode in ("huge-counter", "nan-counter"):
            value = b"1e308" if mode == "huge-counter" else b"NaN"
            body = b"items_total " + value + b"\nitems_total{a=\"b\"} " + value + b"\n"
            conn.sendall(ok + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        elif mode == "big-page":  # 8 MiB of series, the counter among them
            page = _page(count)  # sent in pieces: the server's copies are not the reader's
            conn.sendall(ok + b"Content-Length: %d\r\n\r\n" % (len(self._big) + len(page)))
            conn.sendall(self._big)
            conn.sendall(page)
        elif mode == "broken-chunked":
            conn.sendall(ok + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nitems_total 1\n\r\n")
        elif mode == "many-headers":
            conn.sendall(ok + b"".join(b"X-%d: y\r\n" % k for k in range(500)) + b"\r\n")
        elif mode == "long-header":
            conn.sendall(ok + b"X-Long: " + b"y" * 200_000 + b"\r\n\r\n")
        elif mode == "silent":  # accepts, reads, says nothing
            while not self._closed:
                time.sleep(0.2)

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.close()
        except OSError:
            pass


def hostile(mode: Optional[str] = None, rate: float = 30.0) -> HostileEndpoint:
    return HostileEndpoint(rate, mode or GOOD)
