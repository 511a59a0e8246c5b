"""Issue 35, item 9: a control socket whose listen queue is full (a flood of connections)
answers connect() with EAGAIN: the client tries again for a bounded time, then says the
daemon is busy in one message (it printed a bare `[Errno 11] Resource temporarily
unavailable`)."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from jetbench.ownership import client
from jetbench.ownership.client import DaemonBusy, open_lease, request

from conftest import REPO


@pytest.fixture
def flooded(tmp_path):
    """A listening socket that never accepts, its queue filled up."""
    path = tmp_path / "d.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(0)
    clients = []
    while True:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setblocking(False)
        try:
            c.connect(str(path))
        except OSError as err:
            c.close()
            assert err.errno == errno.EAGAIN, err
            break
        clients.append(c)
        assert len(clients) < 1000
    yield path
    for c in clients:
        c.close()
    server.close()


def test_a_flooded_socket_is_busy_after_a_bounded_retry(flooded, monkeypatch):
    monkeypatch.setattr(client, "CONNECT_BUSY_S", 0.3)
    with pytest.raises(DaemonBusy, match="busy"):
        request(flooded, "status", timeout_s=5)
    with pytest.raises(DaemonBusy, match="busy"):
        open_lease(flooded, "measure", timeout_s=5)


def test_measure_on_a_flooded_daemon_says_busy(tmp_path, flooded):
    """The board lock names a daemon (this process) whose socket is flooded: measure's lease
    cannot connect; after CONNECT_BUSY_S it exits 2 saying so, nothing pinned."""
    from jetbench.hw.fs import Root
    from jetbench.ownership.lock import BoardLock

    from conftest import make_board, snapshot

    base = make_board(tmp_path, "tx1")
    before = snapshot(base, exclude=("var",))
    with BoardLock(Root(str(base)), "daemon", socket=str(flooded)):
        done = subprocess.run([sys.executable, "-m", "jetbench", "--root", str(base), "measure",
                               "--model", "sim:alexnet", "--freq", "max", "--duration", "0.3"],
                              capture_output=True, text=True, timeout=120,
                              env={"PYTHONPATH": str(REPO / "agent"), "PATH": "/usr/bin:/bin"},
                              cwd=Path(tmp_path))
    assert done.returncode == 2, done.stderr
    assert "busy" in done.stderr and "Errno" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert snapshot(base, exclude=("var",)) == before


def test_every_command_name_becomes_a_lease_name_the_daemon_takes():
    """Issue 35 item 4: 'tune (EMC rates)' was refused by the daemon's check (wire.WHO)."""
    from jetbench.ownership.owner import lease_name
    from jetbench.ownership.wire import WHO

    for command in ("measure", "sweep", "tune", "tune (EMC rates)", "x" * 100, "(((", "",
                    "a\nb", "é"):
        assert WHO.match(lease_name(command)), command
    assert lease_name("tune") == "tune" and lease_name("sweep 1/2") == "sweep 1/2"
