"""`jetbench daemon` as a real subprocess on simulated boards: sd_notify READY/WATCHDOG on a
test datagram socket, pinning, drift re-pinned within one interval, status over the socket,
SIGTERM restores byte for byte, kill -9 then a new start, hostile clients, socket mode,
metrics over HTTP on loopback, throttling left to the kernel, SIGHUP reload."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, List

from helpers.daemons import Daemon, board_state

from conftest import REPO, diff, make_board, wait_until


def _pristine(tmp_path: Path, key: str) -> Path:
    base = make_board(tmp_path, key)
    return base


_wait = wait_until  # the suite's one bounded wait (conftest: scaled, generous)


def test_ready_watchdog_status_then_sigterm_restores(tmp_path, started):
    base = _pristine(tmp_path, "tx1")
    before = board_state(base)
    d = Daemon(tmp_path, base, "--profile", "tx1-690mhz", watchdog_usec=400_000)
    started.append(d)
    ready = d.ready()
    assert "STATUS=holding tx1-690mhz" in ready, ready
    # WATCHDOG=1 at half of WATCHDOG_USEC (0.2 s): several within a second.
    t0, mark = time.monotonic(), len(d.messages)
    for _ in range(3):
        d.wait_for("WATCHDOG=1", timeout=2, after=mark)
        mark = d.messages.index("WATCHDOG=1", mark) + 1
    assert time.monotonic() - t0 < 1.5
    # The profile is pinned: GPU at the 691.2 MHz table entry, EMC locked, CPU userspace at max.
    gpu = base / "sys/devices/57000000.gpu/devfreq/57000000.gpu"
    assert (gpu / "min_freq").read_text().strip() == "691200000"
    assert (gpu / "max_freq").read_text().strip() == "691200000"
    assert (base / "var/lib/jetbench/journal.json").exists()
    # The control socket: mode 0660, answers status.
    mode = d.sock_path.stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o660
    status = d.ask("status")
    assert status["ok"] and status["pinned"] and status["profile"] == "tx1-690mhz"
    assert status["simulated"] is True and status["board"]["family"] == "tx1"
    assert {c["domain"] for c in status["clocks"]} == {"cpu", "gpu", "emc"}
    assert status["temperatures_c"] and status["rails"]
    assert status["total"]["name"] == "VDD_IN" and status["total"]["power_w"] > 0
    readings = d.ask("readings")
    assert readings["ok"] and readings["rails"] and "clocks" in readings
    # The human summary from the `jetbench status` client.
    out = subprocess.run([sys.executable, "-m", "jetbench.cli.main", "status", "--socket",
                          str(d.sock_path)], capture_output=True, text=True, cwd=REPO, timeout=30)
    assert out.returncode == 0 and "tx1-690mhz" in out.stdout, out.stderr
    out = subprocess.run([sys.executable, "-m", "jetbench.cli.main", "status", "--json",
                          "--socket", str(d.sock_path)], capture_output=True, text=True,
                         cwd=REPO, timeout=30)
    assert json.loads(out.stdout)["counters"]["repins"] == 0
    assert d.stop() == 0, d.output()
    assert "STOPPING=1" in d.messages[-1].split("\n"), d.messages[-3:]
    assert diff(before, board_state(base)) == []
    assert not (base / "var/lib/jetbench/journal.json").exists()
    assert not d.sock_path.exists()


def test_drift_is_repinned_within_one_interval_and_metrics(tmp_path, started):
    base = _pristine(tmp_path, "xavier-nx")
    before = board_state(base)
    d = Daemon(tmp_path, base, "--profile", "maxperf", "--metrics", "127.0.0.1:0",
               interval="0.5s")
    started.append(d)
    d.ready()
    policy = base / "sys/devices/system/cpu/cpufreq/policy0"
    pinned_governor = (policy / "scaling_governor").read_text()
    railgate = base / "sys/devices/17000000.gv11b/railgate_enable"
    assert railgate.read_text() == "0\n"
    # Something else moves the knobs: another governor, railgating back on.
    (policy / "scaling_governor").write_text("schedutil\n")
    railgate.write_text("1\n")
    t0 = time.monotonic()
    assert _wait(lambda: railgate.read_text() == "0\n"
                 and (policy / "scaling_governor").read_text() == pinned_governor)
    assert time.monotonic() - t0 <= 0.5 + 0.4  # one interval, and a little scheduling slack
    status = d.ask("status")
    assert status["counters"]["repins"] >= 1
    assert any("railgate_enable" in m for m in status["last_repin"]["moved"])
    assert "re-pinned" in d.output()
    # Metrics, scraped over HTTP on loopback.
    host, port = status["metrics"].rsplit(":", 1)
    assert host == "127.0.0.1"
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    metrics = _parse_metrics(text)
    assert metrics[("jetbench_drift_repins_total", ())] >= 1
    assert metrics[("jetbench_pinned", ())] == 1 and metrics[("jetbench_simulated", ())] == 1
    assert metrics[("jetbench_throttling", ())] == 0
    gpu = [v for (name, labels), v in metrics.items()
           if name == "jetbench_clock_frequency_hz" and ("domain", "gpu") in labels]
    assert gpu and gpu[0] > 1e8
    watts = {dict(labels)["rail"]: v for (name, labels), v in metrics.items()
             if name == "jetbench_rail_power_watts"}
    assert "VDD_IN" in watts and watts["VDD_IN"] > 0
    assert any(name == "jetbench_temperature_celsius" for name, _ in metrics)
    assert d.stop() == 0, d.output()
    assert diff(before, board_state(base)) == []


def _settle(d: Daemon) -> None:
    """Two checks after READY: the simulated kernel reacts to writes asynchronously (within its
    20 ms period) and may overwrite a fresh `scaling_setspeed` with the current rate, as a
    kernel switching to userspace does; the daemon's next check re-pins that."""
    checks = d.ask("status")["counters"]["checks"]
    assert _wait(lambda: d.ask("status")["counters"]["checks"] >= checks + 2)
    time.sleep(0.1)


def _parse_metrics(text: str) -> Dict[tuple, float]:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _, rest = head.partition("{")
        labels = tuple(sorted(
            (k, v.strip('"')) for k, v in (p.split("=", 1) for p in rest.rstrip("}").split(",")
                                           if p)))
        out[(name, labels)] = float(value)
    return out


def test_kill9_then_a_new_daemon_restores_and_repins(tmp_path, started):
    base = _pristine(tmp_path, "orin-nano")
    before = board_state(base)
    first = Daemon(tmp_path, base, "--profile", "maxperf", name="a")
    started.append(first)
    first.ready()
    _settle(first)
    pinned = board_state(base)
    assert diff(before, pinned)
    first.kill9()
    journal = base / "var/lib/jetbench/journal.json"
    assert journal.exists() and first.sock_path.exists()  # a stale socket is left behind
    second = Daemon(tmp_path, base, "--profile", "maxperf", name="a")
    started.append(second)
    second.ready()
    _settle(second)
    assert "finishing an interrupted job" in second.output()
    now = board_state(base)
    assert diff(pinned, now) == [], [(k, (base / k).read_text()) for k in diff(pinned, now)]
    assert second.ask("status")["pinned"]
    assert second.stop() == 0, second.output()
    assert diff(before, board_state(base)) == []  # the original state, not the first pin's


def test_hostile_clients_never_crash_or_hang_the_daemon(tmp_path, started):
    base = _pristine(tmp_path, "tx2")
    before = board_state(base)
    d = Daemon(tmp_path, base, "--profile", "maxperf", "--client-timeout", "0.5s")
    started.append(d)
    d.ready()
    path = str(d.sock_path)

    def exchange(payload: bytes) -> List[dict]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(path)
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        return [json.loads(line) for line in data.splitlines()]

    cases = [
        (b"not json\n", "bad_request"),
        (b"[1, 2]\n", "bad_request"),
        (b'{"cmd": 3}\n', "bad_request"),
        (b'{"cmd": "reboot"}\n', "unknown_command"),
        (b'{"cmd": "status", "x": 1}\n', "bad_request"),
        (b'{"cmd": "apply"}\n', "bad_request"),
        (b'{"cmd": "apply", "profile": "/etc/passwd"}\n', "bad_request"),
        (b'{"cmd": "apply", "profile": "../../profiles/maxperf"}\n', "bad_request"),
        (b'{"cmd": "apply", "profile": "maxperf.toml"}\n', "failed"),
        (b'{"cmd": "apply", "profile": "no-such-profile"}\n', "failed"),
        (b'{"cmd": "apply", "profile": "tx1-690mhz"}\n', "failed"),  # wrong board: refused
        (b"\xff\xfe\n", "bad_request"),
        (b'{"cmd": "status"' + b" " * 5000 + b"}\n", "line_too_long"),
    ]
    for payload, code in cases:
        replies = exchange(payload)
        assert len(replies) == 1 and replies[0]["ok"] is False, (payload[:40], replies)
        assert replies[0]["error"] == code, (payload[:40], replies)
    # Several requests on one connection, blank lines ignored, CRLF accepted.
    replies = exchange(b'{"cmd":"status"}\r\n\n{"cmd":"readings"}\n')
    assert [r["ok"] for r in replies] == [True, True]
    # A line that never ends: error reply, connection closed (not read forever).
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        try:
            s.sendall(b"x" * 200_000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert _closed_within(s, 5)
    # A slow client (half a line, then nothing) is disconnected after --client-timeout.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(b'{"cmd": "sta')
        t0 = time.monotonic()
        assert _closed_within(s, 5)
        assert time.monotonic() - t0 < 3
    # Clients that connect and hold the connection: past the per-uid limit (8) the oldest are
    # closed to make room, and a client with a request is served at once, not after a timeout.
    idle = []
    for _ in range(20):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        idle.append(s)
    evicted = 0
    for s in idle:
        s.settimeout(0.3)
        try:
            evicted += s.recv(4096) == b""
        except socket.timeout:
            continue
    assert evicted >= 20 - 8
    t0 = time.monotonic()
    assert _status_ok(d)
    assert time.monotonic() - t0 < 0.3 * 0.5 + 2  # no reaping needed first
    for s in idle:
        s.close()
    # The daemon is alive, still pinned, and still serves requests.
    assert d.proc.poll() is None
    assert d.ask("status")["pinned"]
    # restore / pin / apply over the socket.
    assert d.ask("restore")["ok"]
    # (the simulated kernel brings the current-frequency files along within its period)
    assert _wait(lambda: diff(before, board_state(base)) == []), diff(before, board_state(base))
    assert d.ask("status")["pinned"] is False
    assert d.ask("pin")["pinned"] is True
    assert diff(before, board_state(base))
    applied = d.ask("apply", profile="tx2-828mhz")
    assert applied["ok"] and applied["profile"] == "tx2-828mhz", applied
    assert d.ask("status")["profile"] == "tx2-828mhz"
    assert "Traceback" not in d.output()
    assert d.stop() == 0, d.output()
    assert diff(before, board_state(base)) == []


def _status_ok(d: Daemon) -> bool:
    try:
        return d.ask("status")["ok"]
    except Exception:
        return False


def _closed_within(s: socket.socket, timeout: float) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_throttling_is_reported_and_drift_still_repinned(tmp_path, started):
    base = _pristine(tmp_path, "nano")
    before = board_state(base)
    zone = base / "sys/devices/virtual/thermal/thermal_zone1"  # the GPU zone
    (zone / "trip_point_1_type").write_text("passive\n")
    (zone / "trip_point_1_temp").write_text("50000\n")
    before = board_state(base)
    d = Daemon(tmp_path, base, "--profile", "maxperf", interval="0.3s")
    started.append(d)
    d.ready()
    gpu = base / "sys/devices/57000000.gpu/devfreq/57000000.gpu"
    pinned_max = (gpu / "max_freq").read_text()
    # Hot (evidence: a zone at its passive trip), and something rewrites the GPU's knobs.
    # Caps act through QoS and cooling devices, so writing the knobs back fights no cap.
    (zone / "temp").write_text("61000\n")
    low = (gpu / "available_frequencies").read_text().split()[2]
    (gpu / "min_freq").write_text(low + "\n")
    (gpu / "max_freq").write_text(low + "\n")
    assert _wait(lambda: d.ask("status")["throttling"])
    assert _wait(lambda: (gpu / "max_freq").read_text() == pinned_max)
    status = d.ask("status")
    assert status["counters"]["repins"] >= 1 and "held" not in status["counters"]
    assert any("passive" in r for r in status["throttle_reasons"])
    assert "thermal throttling" in d.output()
    # Cooled down: throttling ends, one event counted.
    (zone / "temp").write_text("40000\n")
    assert _wait(lambda: not d.ask("status")["throttling"])
    assert d.ask("status")["counters"]["throttle_events"] == 1
    assert d.stop() == 0
    after = board_state(base)
    assert diff(before, after) == [str(Path(zone.relative_to(base)) / "temp")]


def test_sighup_reloads_the_profile_file(tmp_path, started):
    base = _pristine(tmp_path, "tx2")
    before = board_state(base)
    profile = tmp_path / "mine.toml"
    profile.write_text('[gpu]\nfreq = "max"\n')
    d = Daemon(tmp_path, base, "--profile", str(profile))
    started.append(d)
    d.ready()
    gpu = base / "sys/devices/17000000.gp10b/devfreq/17000000.gp10b"
    table = (gpu / "available_frequencies").read_text().split()
    assert (gpu / "min_freq").read_text().split() == [table[-1]]
    profile.write_text(f'[gpu]\nfreq = {table[3]}\n')
    d.proc.send_signal(signal.SIGHUP)
    # going down the daemon writes min, then max: wait for the pair, not for min alone
    assert _wait(lambda: [(gpu / f).read_text().split() for f in ("min_freq", "max_freq")]
                 == [[table[3]], [table[3]]])
    d.wait_for("RELOADING=1")
    # A broken profile on reload keeps the current one pinned.
    profile.write_text("[gpu]\nfreq = 'fast'\n")
    d.proc.send_signal(signal.SIGHUP)
    assert _wait(lambda: "reload failed" in d.output())
    assert (gpu / "min_freq").read_text().split() == [table[3]]
    assert d.proc.poll() is None
    assert d.stop(signal.SIGINT) == 0
    assert diff(before, board_state(base)) == []


def test_monitor_only_bad_profile_and_a_second_daemon(tmp_path, started):
    base = _pristine(tmp_path, "tx1")
    before = board_state(base)
    # No profile: it monitors, pins nothing.
    d = Daemon(tmp_path, base)
    started.append(d)
    assert "STATUS=not pinning" in d.ready()
    assert d.ask("status")["pinned"] is False
    assert diff(before, board_state(base)) == []
    pin = d.ask("pin")
    assert pin["ok"] is False and "no profile" in pin["message"]
    assert d.ask("apply", profile="tx1-690mhz")["pinned"]
    _settle(d)
    pinned = board_state(base)
    # A second daemon on the same board (here the same socket too) is refused by the board
    # lock before it touches anything; the first one keeps serving, its pin and journal intact.
    other = Daemon(tmp_path, base, "--profile", "maxperf", name="e", sock="d")
    started.append(other)
    assert other.proc.wait(timeout=30) == 2
    assert f"in use by pid {d.proc.pid} (jetbench daemon" in other.output()
    assert "Traceback" not in other.output()
    assert d.ask("status")["pinned"]
    assert diff(pinned, board_state(base)) == []
    assert (base / "var/lib/jetbench/journal.json").exists()
    assert d.stop() == 0
    assert diff(before, board_state(base)) == []
    # A profile that does not fit the board: it starts pinning nothing (never a crash loop
    # under Restart=on-failure), says why, wrote nothing, no traceback.
    bad = Daemon(tmp_path, base, "--profile", "orin-agx-816mhz", name="bad")
    started.append(bad)
    assert "STATUS=not pinning (profile orin-agx-816mhz refused)" in bad.ready()
    status = bad.ask("status")
    assert status["pinned"] is False and "[match]" in status["profile_refused"]
    assert "[match]" in bad.output()
    assert bad.stop() == 0
    assert "Traceback" not in bad.log_path.read_text()
    assert diff(before, board_state(base)) == []


def test_a_profile_with_an_infinite_clock_never_kills_the_daemon(tmp_path, started):
    """Issue 35 item 5: freq = inf / nan / 1e400 at start and on SIGHUP."""
    base = _pristine(tmp_path, "tx2")
    before = board_state(base)
    gpu = base / "sys/devices/17000000.gp10b/devfreq/17000000.gp10b"
    table = (gpu / "available_frequencies").read_text().split()
    profile = tmp_path / "mine.toml"
    profile.write_text("[gpu]\nfreq = inf\n")
    d = Daemon(tmp_path, base, "--profile", str(profile))
    started.append(d)
    assert "STATUS=not pinning (profile " in d.ready()
    assert "[gpu] freq" in d.ask("status")["profile_refused"]
    assert diff(before, board_state(base)) == []
    profile.write_text(f"[gpu]\nfreq = {table[3]}\n")
    seen = len(d.messages)
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1", timeout=10, after=seen)
    assert (gpu / "min_freq").read_text().split() == [table[3]]
    assert d.ask("status")["profile_refused"] is None
    for value in ("nan", "1e400", "-inf"):
        profile.write_text(f"[gpu]\nfreq = {value}\n")
        seen = len(d.messages)
        d.proc.send_signal(signal.SIGHUP)
        d.wait_for("READY=1", timeout=10, after=seen)
        assert d.proc.poll() is None
        assert (gpu / "min_freq").read_text().split() == [table[3]]
    assert d.ask("status")["pinned"] is True
    assert d.stop() == 0
    log = d.log_path.read_text()
    assert "reload failed" in log and "Traceback" not in log
    assert diff(before, board_state(base)) == []


def test_stale_socket_file_is_replaced_but_not_other_files(tmp_path, started):
    base = _pristine(tmp_path, "tx1")
    not_a_socket = tmp_path / "f.sock"
    not_a_socket.write_text("keep me")
    d = Daemon(tmp_path, base, name="f")
    started.append(d)
    assert d.proc.wait(timeout=30) == 1
    assert "not a socket" in d.output()
    assert not_a_socket.read_text() == "keep me"
    shutil.rmtree(base)
