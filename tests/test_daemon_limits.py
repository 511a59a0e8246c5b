"""Issue 9, items 9 and 10: a real daemon under hostile clients. Slow (trickling) control
clients cannot lock others out; deeply nested or duplicate-key requests get an error reply and
no traceback; thousands of half-open metrics connections cost neither threads nor memory."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Dict, List

import pytest
from helpers.daemons import Daemon

from jetbench.ownership.client import request

from conftest import make_board


def _exchange(path: Path, payload: bytes) -> List[dict]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return [json.loads(line) for line in data.splitlines()]


class _Tricklers:
    """`count` clients that each send one byte of a request every `every_s`, reconnecting
    whenever the daemon hangs up on them: the slow-client attack of issue 9, item 9."""

    def __init__(self, path: Path, count: int, every_s: float):
        self.path, self.count, self.every_s = path, count, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.connects = 0

    def _connect(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(self.path))
        s.setblocking(False)
        self.connects += 1
        return s

    def _run(self) -> None:
        socks = [self._connect() for _ in range(self.count)]
        payload = b'{"cmd": "status"}'
        while not self._stop.is_set():
            for i, s in enumerate(socks):
                try:
                    s.send(payload[self.connects % len(payload):][:1] or b" ")
                except OSError:  # hung up on: come back, as an attacker would
                    s.close()
                    socks[i] = self._connect()
            self._stop.wait(self.every_s)
        for s in socks:
            s.close()

    def __enter__(self) -> _Tricklers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_slow_clients_cannot_starve_the_others(tmp_path, started):
    base = make_board(tmp_path, "tx1")
    d = Daemon(tmp_path, base, "--profile", "tx1-690mhz", interval="1s")
    started.append(d)
    d.ready()
    with _Tricklers(d.sock_path, count=16, every_s=2.0):
        time.sleep(1.0)  # all 16 connected and trickling
        for _ in range(4):
            t0 = time.monotonic()
            reply = request(d.sock_path, "status", timeout_s=5)
            assert reply["ok"] is True, reply  # not "busy"
            assert time.monotonic() - t0 < 2.0
            time.sleep(0.7)
    assert d.stop() == 0
    assert "Traceback" not in d.log_path.read_text()


def test_nesting_and_duplicate_keys_are_refused_without_a_traceback(tmp_path, started):
    base = make_board(tmp_path, "tx1")
    d = Daemon(tmp_path, base, "--profile", "tx1-690mhz", interval="1s")
    started.append(d)
    d.ready()
    deep = b"[" * 1000 + b"]" * 1000  # under the 4 KiB line limit
    deep_in_object = b'{"cmd": "status", "x": ' + b"{\"a\": " * 400 + b"1" + b"}" * 400 + b"}"
    replies = _exchange(d.sock_path, deep + b"\n" + deep_in_object + b'\n{"cmd": "status"}\n')
    assert [r["ok"] for r in replies] == [False, False, True], replies
    assert all("nested" in r["message"] for r in replies[:2])
    # Duplicate keys: refused, not acted on (the last "cmd" would have restored the board).
    replies = _exchange(d.sock_path, b'{"cmd": "status", "cmd": "restore"}\n')
    assert replies[0]["ok"] is False and "duplicate key" in replies[0]["message"]
    assert d.ask("status")["pinned"] is True
    assert d.stop() == 0
    log = d.log_path.read_text()
    assert "Traceback" not in log and "RecursionError" not in log


def _proc_status(pid: int) -> Dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Threads", "VmRSS"):
                out[key] = int(value.split()[0])
    return out


@pytest.mark.long
def test_thousands_of_half_open_metrics_connections_cost_nothing(tmp_path, started):
    pytest.importorskip("prometheus_client")
    base = make_board(tmp_path, "tx1")
    d = Daemon(tmp_path, base, "--profile", "tx1-690mhz", "--metrics", "127.0.0.1:0",
               interval="1s")
    started.append(d)
    d.ready()
    url = f"http://{d.ask('status')['metrics']}/metrics"
    assert b"jetbench_pinned 1.0" in urllib.request.urlopen(url, timeout=10).read()
    baseline = _proc_status(d.proc.pid)
    host, port = url.split("/")[2].rsplit(":", 1)
    half_open = []
    try:
        for _ in range(2000):
            s = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never the blank line
            half_open.append(s)
        time.sleep(0.5)
        during = _proc_status(d.proc.pid)
        # A thread per connection gave 2000+ threads and ~40 kB each: neither may grow.
        assert during["Threads"] <= baseline["Threads"], (baseline, during)
        assert during["VmRSS"] - baseline["VmRSS"] < 8 * 1024, (baseline, during)
        t0 = time.monotonic()
        body = urllib.request.urlopen(url, timeout=10).read()
        assert b"jetbench_clock_frequency_hz" in body
        assert time.monotonic() - t0 < 2.0
    finally:
        for s in half_open:
            s.close()
    assert d.proc.poll() is None
    assert d.stop() == 0
    assert "Traceback" not in d.log_path.read_text()
