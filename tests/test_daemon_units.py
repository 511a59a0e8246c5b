"""The daemon's pure parts: the socket protocol, sd_notify, throttling, metrics addresses, and
the control server against a stub handler (in-process: fast, and every limit exercised)."""

from __future__ import annotations

import json
import os
import socket
import stat
import time

import pytest

from jetbench.daemon.control import ControlServer
from jetbench.daemon.metrics import is_loopback, parse_address
from jetbench.daemon.notify import Notifier, socket_address, watchdog_period_s
from jetbench.errors import UsageError
from jetbench.hw import thermal
from jetbench.hw.clocks.types import ClockReading
from jetbench.ownership.wire import MAX_LINE_BYTES, ProtocolError, Request, parse_request

from conftest import wait_until


@pytest.mark.parametrize("line, expected", [
    (b'{"cmd": "status"}', Request("status")),
    (b'{"cmd":"readings"}', Request("readings")),
    (b'{"cmd": "apply", "profile": "tx1-690mhz"}', Request("apply", "tx1-690mhz")),
    (b'{"cmd": "apply", "profile": "my_profile.v2"}', Request("apply", "my_profile.v2")),
    (b'{"cmd": "maxperf"}', Request("maxperf")),
    (b'{"cmd": "maxperf", "fan": true}', Request("maxperf", fan=True)),
    (b'{"cmd": "lease", "who": "measure"}', Request("lease", who="measure")),
    (b'{"cmd": "status", "x": "[[[{{{"}', None),  # brackets inside strings are not nesting
])
def test_protocol_accepts(line, expected):
    if expected is None:
        with pytest.raises(ProtocolError, match="unexpected key"):
            parse_request(line)
        return
    assert parse_request(line) == expected


@pytest.mark.parametrize("line, code", [
    (b"", "bad_request"),
    (b"status", "bad_request"),
    (b'"status"', "bad_request"),
    (b"null", "bad_request"),
    (b'{"command": "status"}', "bad_request"),
    (b'{"cmd": ["status"]}', "bad_request"),
    (b'{"cmd": "shutdown"}', "unknown_command"),
    (b'{"cmd": "pin", "profile": "x"}', "bad_request"),
    (b'{"cmd": "apply", "profile": 1}', "bad_request"),
    (b'{"cmd": "apply", "profile": ""}', "bad_request"),
    (b'{"cmd": "apply", "profile": "/etc/jetbench/profiles/x.toml"}', "bad_request"),
    (b'{"cmd": "apply", "profile": "../x"}', "bad_request"),
    (b'{"cmd": "apply", "profile": ".hidden"}', "bad_request"),
    (b'{"cmd": "apply", "profile": "a\\u0000b"}', "bad_request"),
    (b'{"cmd": "apply", "profile": "' + b"a" * 65 + b'"}', "bad_request"),
    (b"\xc3\x28", "bad_request"),
    (b" " * (MAX_LINE_BYTES + 1), "line_too_long"),
    # issue 9, item 9: nesting (under the 4 KiB limit) and duplicate keys.
    (b"[" * 1000 + b"]" * 1000, "bad_request"),
    (b'{"cmd": "status", "x": ' + b"[" * 500 + b"]" * 500 + b"}", "bad_request"),
    (b'{"cmd": "status", "cmd": "restore"}', "bad_request"),
    (b'{"cmd": "maxperf", "fan": 1}', "bad_request"),
    (b'{"cmd": "lease", "who": "a\nb"}', "bad_request"),
])
def test_protocol_refuses(line, code):
    with pytest.raises(ProtocolError) as err:
        parse_request(line)
    assert err.value.code == code


def test_notify_addresses_and_watchdog_period():
    assert socket_address("@systemd/notify") == "\0systemd/notify"
    assert socket_address("/run/systemd/notify") == "/run/systemd/notify"
    assert watchdog_period_s({}) is None
    assert watchdog_period_s({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_period_s({"WATCHDOG_USEC": "junk"}) is None
    assert watchdog_period_s({"WATCHDOG_USEC": "30000000"}) == 15.0
    assert watchdog_period_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, pid=2) is None
    assert watchdog_period_s({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "7"}, pid=7) == 1.0


def test_notifier_sends_datagrams_to_a_path_socket(tmp_path):
    path = tmp_path / "n.sock"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(path))
    receiver.settimeout(5)
    notifier = Notifier.from_env({"NOTIFY_SOCKET": str(path)})
    assert notifier.enabled
    assert notifier.send(READY="1", STATUS="holding x:\nnewline")
    assert receiver.recv(4096) == b"READY=1\nSTATUS=holding x: newline"
    receiver.close()
    assert notifier.send(WATCHDOG="1") is False  # receiver gone: reported, not raised
    notifier.close()
    silent = Notifier.from_env({})
    assert not silent.enabled and silent.send(READY="1") is False


def _clock(cur, lo, domain="gpu"):
    return ClockReading(domain, "gpu0", None, lo, lo, cur)


def test_throttling_assessment():
    trips = [thermal.Trip("GPU-therm", "passive", 50.0), thermal.Trip("CPU-therm", "critical",
                                                                      97.0)]
    assert thermal.assess({"GPU-therm": 49.9, "CPU-therm": 60.0}, trips, {}, []) == ()
    hot = thermal.assess({"GPU-therm": 50.0}, trips, {}, [])
    assert len(hot) == 1 and "passive" in hot[0]
    assert thermal.assess({}, trips, {"cpufreq-cpu0": 2}, [])
    assert thermal.assess({}, trips, {"cpufreq-cpu0": 0}, []) == ()
    # A clock under its pinned floor is not evidence of throttling: it is reported as exactly
    # that ("below its pin, cause unknown"), by the rule a result's validity uses.
    low = _clock(600_000_000, 921_600_000)
    assert thermal.assess({}, (), {}, [low]) == ()


def _applied(lo, domain="gpu", override=None, table=()):
    return {"domain": domain, "name": "gpu0", "governor": None, "min_hz": lo, "max_hz": lo,
            "override_hz": override, "locked": None, "table_hz": list(table)}


def test_below_pin_is_the_validity_rule():
    from jetbench.run.validity import below_pin

    pinned = [_applied(921_600_000)]
    assert below_pin(pinned, [_clock(600_000_000, 921_600_000)], "tegra210") == (
        "gpu gpu0 below its pin (600 MHz, pinned floor 921.6 MHz), cause unknown",)
    assert below_pin(pinned, [_clock(921_600_000, 921_600_000)], "tegra210") == ()
    # An override rate runs at its nearest table entry: that is not below its pin.
    rounded = [_applied(1_600_000_000, "emc", 1_600_000_000, (1_331_200_000, 1_599_999_000))]
    emc = ClockReading("emc", "gpu0", None, None, None, 1_599_999_000)
    assert below_pin(rounded, [emc], "tegra210") == ()
    # A CPU read from activity counters (Xavier, Orin, Thor) reads low at rest: not judged.
    cpu = [_applied(1_497_600_000, "cpu")]
    assert below_pin(cpu, [_clock(600_000_000, 1_497_600_000, "cpu")], "tegra234") == ()
    assert below_pin(cpu, [_clock(600_000_000, 1_497_600_000, "cpu")], "tegra210")
    assert below_pin(pinned, [_clock(None, 921_600_000)], "tegra210") == ()


def test_thermal_scan_keeps_throttling_trips_and_non_fan_cooling(tmp_path):
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root

    from conftest import make_board

    base = make_board(tmp_path, "nano")
    zone = base / "sys/devices/virtual/thermal/thermal_zone0"
    (zone / "trip_point_1_type").write_text("passive\n")
    (zone / "trip_point_1_temp").write_text("80000\n")
    (zone / "trip_point_2_type").write_text("active\n")  # a fan trip: not throttling
    (zone / "trip_point_2_temp").write_text("40000\n")
    for k, name in enumerate(("pwm-fan", "cpufreq-cpu0")):
        dev = base / f"sys/class/thermal/cooling_device{k}"
        dev.mkdir(parents=True)
        (dev / "type").write_text(name + "\n")
        (dev / "cur_state").write_text("3\n")
    root = Root(base)
    layout = thermal.scan(root, detect(root))
    kinds = {(t.zone, t.kind, t.temp_c) for t in layout.trips}
    assert (detect(root).thermal_zones[0].name, "passive", 80.0) in kinds
    assert all(t.kind != "active" for t in layout.trips)
    assert thermal.cooling_states(root, layout) == {"cpufreq-cpu0": 3}


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:9101", ("127.0.0.1", 9101)),
    ("9101", ("127.0.0.1", 9101)),
    ("[::1]:9101", ("::1", 9101)),
    ("localhost:0", ("localhost", 0)),
])
def test_metrics_address(text, expected):
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["", "host:", "127.0.0.1:http", "127.0.0.1:70000", ":"])
def test_metrics_address_refused(text):
    with pytest.raises(UsageError):
        parse_address(text)


def test_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


# -- the control server, in-process ----------------------------------------------------------
class _Server:
    def __init__(self, tmp_path, handler=None, **kw):
        self.calls = []

        def default(request, peer):
            self.calls.append((request, peer))
            if request.cmd == "pin":
                raise RuntimeError("boom")
            return {"ok": True, "cmd": request.cmd}

        self.path = tmp_path / "c.sock"
        self.server = ControlServer(self.path, handler or default, **kw)

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop()

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(str(self.path))
        return s


def _lines(s):
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return [json.loads(x) for x in data.splitlines()]


def test_control_server_replies_and_survives_handler_errors(tmp_path):
    with _Server(tmp_path) as srv:
        assert stat.S_IMODE(srv.path.stat().st_mode) == 0o660
        s = srv.connect()
        s.sendall(b'{"cmd": "status"}\n{"cmd": "pin"}\n')
        replies = _lines(s)
        while len(replies) < 2:
            replies += _lines(s)
        assert replies[0] == {"ok": True, "cmd": "status"}
        assert replies[1]["ok"] is False and "boom" in replies[1]["message"]
        s.sendall(b'{"cmd": "readings"}\n')
        assert _lines(s) == [{"ok": True, "cmd": "readings"}]
        s.close()
    assert not srv.path.exists()  # removed on stop


def test_control_server_limits(tmp_path):
    with _Server(tmp_path, client_timeout_s=0.3, max_clients=3) as srv:
        # Past max_clients the oldest idle connection makes room: the new one is served.
        held = [srv.connect() for _ in range(3)]
        time.sleep(0.05)
        extra = srv.connect()
        extra.sendall(b'{"cmd":"status"}\n')
        assert _lines(extra)[0]["ok"] is True
        assert held[0].recv(1) == b""  # the oldest was closed for it
        assert srv.server.evicted == 1
        extra.close()
        # Idle clients are reaped after the timeout; then new ones are served again.
        t0 = time.monotonic()
        for s in held[1:]:
            assert s.recv(1) == b""
        for s in held:
            s.close()
        assert time.monotonic() - t0 < 2
        s = srv.connect()
        s.sendall(b'{"cmd":"status"}\n')
        assert _lines(s)[0]["ok"] is True
        # A client that never reads its replies is cut off, the server goes on.
        flood = srv.connect()
        flood.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            for _ in range(2000):
                flood.sendall(b'{"cmd":"status"}\n' * 50)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            pass
        assert _hung_up(flood)
        flood.close()
        s.close()  # (idle during the flood: the reaper may have ended it already)
        s = srv.connect()
        s.sendall(b'{"cmd":"status"}\n')
        assert _lines(s)[0]["ok"] is True
        s.close()


def _hung_up(s) -> bool:
    s.settimeout(5)
    try:
        while s.recv(1 << 20):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_stale_socket_is_replaced_live_one_refused(tmp_path):
    path = tmp_path / "c.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: as after kill -9
    with _Server(tmp_path) as srv:
        assert srv.path.exists()
        with pytest.raises(UsageError, match="listening"):
            ControlServer(path, lambda r, p: {}).start()
    assert not os.path.exists(path)


@pytest.mark.parametrize("healthy", [True, False])
def test_watchdog_is_fed_only_while_checks_succeed(tmp_path, healthy):
    import signal
    import threading

    from jetbench.daemon.service import Daemon, DaemonConfig
    from jetbench.hw.fs import Root

    path = tmp_path / "n.sock"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(path))
    env = {"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "40000"}  # a ping every 20 ms
    daemon = Daemon(Root(tmp_path), DaemonConfig(interval_s=0.02), env=env)

    def check():
        if not healthy:
            daemon.drift.failed_checks += 1

    daemon.check = check
    threading.Timer(0.6, daemon._on_stop, (signal.SIGTERM, None)).start()
    daemon._loop()
    receiver.setblocking(False)
    pings = 0
    try:
        while True:
            pings += receiver.recv(64) == b"WATCHDOG=1"
    except BlockingIOError:
        pass
    receiver.close()
    if healthy:
        assert pings >= 10
    else:
        assert pings <= 3  # stops after 3 failed checks: systemd restarts the service


def test_a_lease_connection_outlives_the_timeouts_and_reports_its_end(tmp_path):
    ended = []

    def handler(request, peer):
        if request.cmd == "lease":
            return {"ok": True, "_hold": True, "pid": peer.pid, "uid": peer.uid}
        return {"ok": True}

    srv = ControlServer(tmp_path / "c.sock", handler, client_timeout_s=0.3, max_clients=2,
                        max_per_uid=2, on_disconnect=ended.append)
    srv.start()
    try:
        lease = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lease.settimeout(5)
        lease.connect(str(srv.path))
        lease.sendall(b'{"cmd": "lease", "who": "measure"}\n')
        reply = _lines(lease)[0]
        assert reply == {"ok": True, "pid": os.getpid(), "uid": os.getuid()}  # SO_PEERCRED
        # Past the caps, idle clients make room; the lease is never the one closed.
        others = []
        for _ in range(4):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(srv.path))
            others.append(s)
        time.sleep(1.0)  # three idle timeouts
        lease.sendall(b'{"cmd": "status"}\n')
        assert _lines(lease) == [{"ok": True}]
        assert ended == []
        lease.close()
        wait_until(lambda: ended, step=0.02)
        assert len(ended) == 1 and ended[0].pid == os.getpid()
        for s in others:
            s.close()
    finally:
        srv.stop()


def test_a_trickling_client_is_cut_off_by_the_line_deadline(tmp_path):
    with _Server(tmp_path, client_timeout_s=5.0, line_timeout_s=0.5) as srv:
        s = srv.connect()
        t0 = time.monotonic()
        payload = b'{"cmd": "status"}'
        closed = False
        for byte in payload:  # one byte every 0.2 s: each keeps it "active", never finished
            try:
                s.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.2)
        s.settimeout(5)
        data = b"" if closed else s.recv(4096)
        assert closed or b"timed out waiting for the end of the line" in data
        assert time.monotonic() - t0 < 2.5
        s.close()


def test_status_rows_of_a_reply_missing_keys_are_dashes_not_a_crash():
    # a daemon of another version may answer without some of the status document's keys
    from jetbench.cli.daemon import _status_rows

    rows = dict(_status_rows({}))
    assert rows["board"] == "- (-)"
    assert rows["profile"] == "-" and rows["power mode"] == "-"
    assert rows["drift re-pins"] == "0" and rows["throttling"] == "no"
    full = dict(_status_rows({
        "board": {"model": "NVIDIA Jetson Orin Nano", "family": "orin"}, "simulated": True,
        "profile": "maxperf", "power_mode": {"id": 0, "text": "15W"},
        "counters": {"repins": 2}, "below_pin": ["gpu: 306 MHz (pinned 624.75 MHz)"],
        "clocks": [{"domain": "gpu", "name": "gpu", "cur_hz": 624750000,
                    "min_hz": 624750000, "max_hz": 624750000}],
        "rails": [{"name": "VDD_IN", "point": "module_input", "source": "ina3221",
                   "power_w": None, "energy_j": 0.0}]}))
    assert full["board"] == "NVIDIA Jetson Orin Nano (orin) SIMULATED (not hardware)"
    assert full["power mode"] == "15W" and full["drift re-pins"] == "2"
    assert full["below its pin"] == "gpu: 306 MHz (pinned 624.75 MHz)"
    assert full["gpu gpu"] == "624.8 MHz (min 624.8 MHz, max 624.8 MHz)"
    assert full["power VDD_IN"] == "- (module_input)"


def test_eviction_closes_only_connections_that_have_sent_no_request(tmp_path):
    """Issue 63: a client that sent its request is not reset to make room (it lost its
    reply); a half-sent line is what makes room, and with none the newcomer is told busy."""
    with _Server(tmp_path, client_timeout_s=5.0, max_clients=3) as srv:
        asked = [srv.connect() for _ in range(3)]
        for s in asked:
            s.sendall(b'{"cmd":"status"}\n')  # replies left unread for now
        wait_until(lambda: len(srv.calls) == 3)
        extra = srv.connect()
        busy = _lines(extra)
        assert busy and busy[0]["ok"] is False and busy[0]["error"] == "busy", busy
        for s in asked:  # every one still has its reply
            assert _lines(s) == [{"ok": True, "cmd": "status"}]
        assert srv.server.evicted == 0
        asked[0].close()
        wait_until(lambda: len(srv.server._clients) == 2)
        trickler = srv.connect()
        trickler.sendall(b'{"cmd": "sta')
        time.sleep(0.05)
        newcomer = srv.connect()
        newcomer.sendall(b'{"cmd":"status"}\n')
        assert _lines(newcomer) == [{"ok": True, "cmd": "status"}]
        assert trickler.recv(1) == b"" and srv.server.evicted == 1
        for s in (*asked[1:], extra, trickler, newcomer):
            s.close()
