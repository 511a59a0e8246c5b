"""The optional Prometheus endpoint (`--metrics 127.0.0.1:9101`), with `prometheus-client`.

Metrics are produced at scrape time from the daemon's latest snapshot (taken every interval by
the loop), so a scrape never touches the hardware and never waits for it:

    jetbench_clock_frequency_hz{domain,clock}   current clock frequency
    jetbench_clock_min_hz / jetbench_clock_max_hz{domain,clock}   the knobs as read back
    jetbench_rail_power_watts{rail,point,source} INA3221 rails (or RAPL/NVML where no rails)
    jetbench_energy_joules_total{rail,point,source,scope}   energy since the daemon started
                                                 (counter: a window's energy is the difference of
                                                 2 scrapes); scope module|board|wall; the wall
                                                 from a calibration: rail="wall",
                                                 source="calibrated"
    jetbench_clock_frequency_hertz{domain,clock}, jetbench_clock_locked{domain,clock}
    jetbench_measurement_info{sampling_hz,method,calibration}
    jetbench_power_source_info{rail,source,point,scope,basis}   what the power is from (--meter)
    jetbench_temperature_celsius{zone}
    jetbench_drift_repins_total                  re-pins after something else moved a clock
    jetbench_clock_drift_events_total{domain}    a pinned clock stopped running at its pin
                                                 (its knobs in place: a firmware moved it)
    jetbench_throttling                          1 while the board throttles
    jetbench_throttle_events_total               times throttling began
    jetbench_pinned, jetbench_profile_info{profile}, jetbench_simulated, jetbench_errors_total
    jetbench_power_mode_info{id,name}            nvpmodel's mode (read, never switched)
    jetbench_gpu_load_percent                    GPU utilisation (`load` file, or NVML on Thor)
    jetbench_tune_phase{phase}, jetbench_tune_items_per_joule, jetbench_tune_items_per_second,
    jetbench_tune_point_hz{knob}, jetbench_tune_energy_saved_joules_total,
    jetbench_tune_constraint_violations_total, jetbench_tune_windows_total,
    jetbench_items_total{unit}                   the workload's items (its counter)  (--tune only)
    jetbench_workload_phase{phase}, jetbench_workload_phase_*{phase}   --phases (phase_metrics.py)

The HTTP side is bounded whatever clients do: one thread with `selectors` accepts, reads each
request head (at most MAX_HEAD_BYTES, within `timeout_s` of the connection), and answers it
with prometheus-client's own `MetricsHandler` run over the buffered request; at most
`max_connections` are open (past that the oldest makes room), so thousands of half-open
connections cost neither threads nor memory.
"""

from __future__ import annotations

import io
import ipaddress
import logging
import selectors
import socket
import threading
import time
from typing import TYPE_CHECKING, Callable, Dict, Iterator, Optional, Tuple, Union

from ..errors import UsageError
from .phase_metrics import phase_metrics

if TYPE_CHECKING:  # prometheus-client is optional, imported where used
    from prometheus_client.metrics_core import Metric

    from .held import StatusDoc

# A client's address as accept() gives it: (host, port) for IPv4, (host, port, flowinfo,
# scope_id) for IPv6.
IPAddress = Tuple[Union[str, int], ...]

log = logging.getLogger("jetbench.daemon")

DEFAULT_HOST = "127.0.0.1"
MAX_CONNECTIONS = 32  # Prometheus scrapes with one connection; a few more for people and curl
MAX_HEAD_BYTES = 8192  # a GET's request line and headers
TIMEOUT_S = 5.0  # from accept to the last byte of the reply


def parse_address(text: str) -> Tuple[str, int]:
    """'127.0.0.1:9101', '[::1]:9101', 'localhost:9101' or '9101' (loopback) -> (host, port)."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = DEFAULT_HOST, text
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--metrics takes HOST:PORT, got {text!r}",
                         hint="for example 127.0.0.1:9101 (loopback: reachable from this board "
                              "only; put a reverse proxy or an SSH tunnel in front)")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Collector:
    """A prometheus-client collector over `snapshot()` (a dict the daemon builds)."""

    def __init__(self, snapshot: Callable[[], StatusDoc]):
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        snap = self.snapshot()
        freq = GaugeMetricFamily("jetbench_clock_frequency_hz", "Current clock frequency (Hz)",
                                 labels=["domain", "clock"])
        lo = GaugeMetricFamily("jetbench_clock_min_hz", "Clock floor as read back (Hz)",
                               labels=["domain", "clock"])
        hi = GaugeMetricFamily("jetbench_clock_max_hz", "Clock ceiling as read back (Hz)",
                               labels=["domain", "clock"])
        for c in snap.get("clocks", ()):
            labels = [c["domain"], c["name"]]
            for family, hz in ((freq, c.get("cur_hz")), (lo, c.get("min_hz")),
                               (hi, c.get("max_hz"))):
                if hz is not None:
                    family.add_metric(labels, float(hz))
        yield from (freq, lo, hi)
        yield from _clock_metrics(snap)
        rails = GaugeMetricFamily("jetbench_rail_power_watts", "Power of a rail or meter "
                                  "channel (W), labelled with its measurement point",
                                  labels=["rail", "point", "source"])
        for r in snap.get("rails", ()):
            watts = r.get("power_w")
            if watts is not None:
                rails.add_metric([r["name"], r["point"], r["source"]], watts)
        yield rails
        yield _energy_metric(snap)
        temps = GaugeMetricFamily("jetbench_temperature_celsius", "Thermal zone temperature",
                                  labels=["zone"])
        for zone, value in sorted(snap.get("temperatures_c", {}).items()):
            if value is not None:
                temps.add_metric([zone], value)
        yield temps
        counters = snap.get("counters", {})
        for name, key, text in (
            ("jetbench_drift_repins", "repins", "Re-pins after something else moved a clock"),
            ("jetbench_throttle_events", "throttle_events", "Times thermal throttling began"),
            ("jetbench_errors", "errors", "Failed checks, re-pins or reads"),
        ):
            yield CounterMetricFamily(name, text, value=counters.get(key, 0))
        drift = CounterMetricFamily("jetbench_clock_drift_events", "Times a pinned clock "
                                    "stopped running at its pin, its knobs in place (a "
                                    "firmware moved it)", labels=["domain"])
        for domain, count in sorted(snap.get("clock_drift_events", {}).items()):
            drift.add_metric([domain], count)
        yield drift
        yield GaugeMetricFamily("jetbench_throttling", "1 while the board throttles",
                                value=1.0 if snap.get("throttling") else 0.0)
        yield GaugeMetricFamily("jetbench_pinned", "1 while the daemon holds a profile",
                                value=1.0 if snap.get("pinned") else 0.0)
        yield GaugeMetricFamily("jetbench_simulated", "1 on a simulated board (not hardware)",
                                value=1.0 if snap.get("simulated") else 0.0)
        info = GaugeMetricFamily("jetbench_profile_info", "The profile the daemon holds",
                                 labels=["profile", "board"])
        profile = snap.get("profile")
        if profile:
            info.add_metric([profile, str(snap.get("board", {}).get("family", ""))], 1.0)
        yield info
        yield from _power_mode_metrics(snap)
        yield from _tune_metrics(snap)
        yield from phase_metrics(snap)  # --phases (phase_metrics.py)


def _energy_metric(snap: StatusDoc) -> Metric:
    """Each channel's energy since the daemon started: grows across re-pins, leases and
    reloads, starts again at 0 only when the daemon does (as a Prometheus counter may)."""
    from prometheus_client.core import CounterMetricFamily

    energy = CounterMetricFamily("jetbench_energy_joules", "Energy of a rail or meter channel "
                                 "since the daemon started (J); scope: module, board or wall",
                                 labels=["rail", "point", "source", "scope"])
    for r in snap.get("rails", ()):
        if r.get("energy_j") is not None:
            energy.add_metric([r["name"], r["point"], r["source"], r.get("scope", "module")],
                              r["energy_j"])
    return energy


def _clock_metrics(snap: StatusDoc) -> Iterator[Metric]:
    """Clocks in Prometheus' base unit (hertz), whether each is locked as read back, and how
    power is measured (the daemon's interval, the wall calibration's label or none)."""
    from prometheus_client.core import GaugeMetricFamily

    hertz = GaugeMetricFamily("jetbench_clock_frequency_hertz", "Current clock frequency",
                              labels=["domain", "clock"])
    locked = GaugeMetricFamily("jetbench_clock_locked", "1 where the clock's knobs lock it "
                               "(read back)", labels=["domain", "clock"])
    for c in snap.get("clocks", ()):
        cur_hz = c.get("cur_hz")
        if cur_hz is not None:
            hertz.add_metric([c["domain"], c["name"]], float(cur_hz))
        if c.get("locked") is not None:
            locked.add_metric([c["domain"], c["name"]], 1.0 if c["locked"] else 0.0)
    yield from (hertz, locked)
    info = GaugeMetricFamily("jetbench_measurement_info", "How power is measured",
                             labels=["sampling_hz", "method", "calibration"])
    interval = snap.get("interval_s")
    total = snap.get("total")
    label = total.get("calibration") if total is not None else None
    info.add_metric([f"{1.0 / interval:g}" if interval else "", "sampled",
                     str(label or "none")], 1.0)
    yield info
    source = GaugeMetricFamily("jetbench_power_source_info", "What the daemon's power (and "
                               "--tune's items/J) comes from (daemon --meter)",
                               labels=["rail", "source", "point", "scope", "basis"])
    doc = snap.get("power_source")
    if doc:
        source.add_metric([doc["name"], doc["source"], doc["point"], doc["scope"],
                           doc["basis"]], 1.0)
    yield source


def _tune_metrics(snap: StatusDoc) -> Iterator[Metric]:
    """`daemon --tune`: its phase, the held point's figures, the energy saved, the windows
    that broke a constraint (nothing without --tune)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    from .online_tuner import PHASES

    tune = snap.get("tune")
    if not tune:
        return
    # items/J over any window is rate(jetbench_items_total) / rate(jetbench_energy_joules_total)
    items = CounterMetricFamily("jetbench_items", "The workload's items since the daemon "
                                "started (its throughput source's counter)", labels=["unit"])
    items.add_metric(["items"], float(tune.get("items_total", 0.0)))
    yield items
    phase = GaugeMetricFamily("jetbench_tune_phase", "1 for the phase the live tuning is in",
                              labels=["phase"])
    for name in PHASES:
        phase.add_metric([name], 1.0 if tune.get("phase") == name else 0.0)
    yield phase
    held = tune.get("held")
    if held:
        if held.get("items_per_j") is not None:
            yield GaugeMetricFamily("jetbench_tune_items_per_joule", "Items per joule at the "
                                    "point held (its last window there)",
                                    value=held["items_per_j"])
        if held.get("items_per_s") is not None:
            yield GaugeMetricFamily("jetbench_tune_items_per_second", "The workload's rate at "
                                    "the point held", value=held["items_per_s"])
        point = GaugeMetricFamily("jetbench_tune_point_hz", "The clocks of the point held",
                                  labels=["knob"])
        for knob, hz in sorted(held["point_hz"].items()):
            point.add_metric([knob], float(hz))
        yield point
    yield CounterMetricFamily("jetbench_tune_energy_saved_joules", "Energy saved against the "
                              "point the daemon started from (an estimate: status says how)",
                              value=float(tune.get("energy_saved_j") or 0.0))
    yield CounterMetricFamily("jetbench_tune_constraint_violations", "Windows that broke a "
                              "constraint beyond their uncertainty",
                              value=float(tune.get("windows_breaking_constraints", 0)))
    yield CounterMetricFamily("jetbench_tune_windows", "Windows measured",
                              value=float(tune.get("windows", 0)))
    yield CounterMetricFamily("jetbench_tune_source_faults", "Reads of the workload's rate "
                              "source that failed, answered wrong or too slowly",
                              value=float(tune.get("source_faults") or 0))


def _power_mode_metrics(snap: StatusDoc) -> Iterator[Metric]:
    """nvpmodel's mode as an info gauge, and the GPU's utilisation where it is known."""
    from prometheus_client.core import GaugeMetricFamily

    mode = GaugeMetricFamily("jetbench_power_mode_info", "The board's nvpmodel power mode",
                             labels=["id", "name"])
    power_mode = snap.get("power_mode")
    if power_mode:
        mode.add_metric([str(power_mode["id"]), power_mode["name"] or ""], 1.0)
    yield mode
    load = snap.get("gpu_load_pct")
    if load is not None:
        yield GaugeMetricFamily("jetbench_gpu_load_percent", "GPU utilisation (%)",
                                value=float(load))


def _buffered(handler_cls: type) -> type:
    """`handler_cls` (prometheus-client's MetricsHandler) reading a request already received
    and writing its reply into memory: http.server parses, prometheus-client renders, the
    selector loop does the (non-blocking) I/O."""

    class Buffered(handler_cls):
        def setup(self) -> None:
            self.rfile = io.BytesIO(self.request)
            self.wfile = io.BytesIO()

        def finish(self) -> None:  # keep wfile readable: the loop sends it
            pass

    return Buffered


class _Conn:
    __slots__ = ("sock", "addr", "inbuf", "outbuf", "opened")

    def __init__(self, sock: socket.socket, addr: IPAddress, now: float):
        self.sock, self.addr, self.opened = sock, addr, now
        self.inbuf = bytearray()
        self.outbuf: Optional[memoryview] = None  # set once the request is answered


class BoundedHTTPServer:
    """Single-threaded HTTP/1.0 server for GET requests (see the module docstring)."""

    def __init__(self, host: str, port: int, handler_cls: type, *,
                 max_connections: int = MAX_CONNECTIONS, timeout_s: float = TIMEOUT_S):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server((host, port), family=family, backlog=64)
        self._listener.setblocking(False)
        self.server_address = self._listener.getsockname()
        self._handler = _buffered(handler_cls)
        self.max_connections = max_connections
        self.timeout_s = timeout_s
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel.register(self._listener, selectors.EVENT_READ, "listen")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._conns: Dict[int, _Conn] = {}
        self._stop = False
        self.served = 0
        self.dropped = 0

    def serve_forever(self) -> None:
        while not self._stop:
            timeout = None
            if self._conns:
                first = min(c.opened for c in self._conns.values()) + self.timeout_s
                timeout = max(0.0, first - time.monotonic())
            for key, mask in self._sel.select(timeout):
                if key.data == "listen":
                    self._accept()
                elif key.data == "wake":
                    self._wake_r.recv(64)
                else:
                    try:
                        self._service(key.data, mask)
                    except OSError:
                        self._close(key.data)
            self._expire()

    def _accept(self) -> None:
        for _ in range(64):  # a burst at a time: the others wait in the backlog
            try:
                sock, addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:  # EMFILE and friends: the next event retries
                log.warning("metrics: accept failed (%s)", err.strerror)
                return
            while len(self._conns) >= self.max_connections:
                self.dropped += 1
                self._close(min(self._conns.values(), key=lambda c: c.opened))
            sock.setblocking(False)
            conn = _Conn(sock, addr, time.monotonic())
            self._conns[sock.fileno()] = conn
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _service(self, conn: _Conn, mask: int) -> None:
        if conn.outbuf is None and mask & selectors.EVENT_READ:
            data = conn.sock.recv(MAX_HEAD_BYTES)
            if not data:
                self._close(conn)
                return
            conn.inbuf += data
            end = conn.inbuf.find(b"\r\n\r\n")
            if end < 0 and len(conn.inbuf) >= MAX_HEAD_BYTES:
                self._answer(conn, b"HTTP/1.0 431 Request Header Fields Too Large\r\n"
                                   b"Content-Length: 0\r\n\r\n")
            elif end >= 0:
                self._answer(conn, self._render(bytes(conn.inbuf[: end + 4]), conn.addr))
            return
        if conn.outbuf is not None and mask & selectors.EVENT_WRITE:
            sent = conn.sock.send(conn.outbuf)
            conn.outbuf = conn.outbuf[sent:]
            if not conn.outbuf:
                self.served += 1
                self._close(conn)

    def _render(self, head: bytes, addr: IPAddress) -> bytes:
        try:
            handler = self._handler(head, addr, self)
            return handler.wfile.getvalue()
        except Exception as err:  # a collector bug: one line in the log, a 500 to the client
            log.error("metrics: rendering failed: %s: %s", type(err).__name__, err)
            return b"HTTP/1.0 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"

    def _answer(self, conn: _Conn, reply: bytes) -> None:
        conn.inbuf.clear()
        conn.outbuf = memoryview(reply)
        self._sel.modify(conn.sock, selectors.EVENT_WRITE, conn)

    def _expire(self) -> None:
        deadline = time.monotonic() - self.timeout_s
        for conn in [c for c in self._conns.values() if c.opened <= deadline]:
            self.dropped += 1
            self._close(conn)

    def _close(self, conn: _Conn) -> None:
        if self._conns.pop(conn.sock.fileno(), None) is not None:
            try:
                self._sel.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        conn.sock.close()

    def connections(self) -> int:
        return len(self._conns)

    def shutdown(self) -> None:
        self._stop = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def server_close(self) -> None:
        for conn in list(self._conns.values()):
            self._close(conn)
        for s in (self._listener, self._wake_r, self._wake_w):
            s.close()
        self._sel.close()


class MetricsServer:
    """HTTP endpoint in a thread. Constructing one touches nothing; `start()` binds."""

    def __init__(self, address: str, snapshot: Callable[[], StatusDoc]):
        self.host, self.port = parse_address(address)
        self.snapshot = snapshot
        self._httpd: Optional[BoundedHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def start(self) -> None:
        try:
            from prometheus_client import CollectorRegistry
            from prometheus_client.exposition import MetricsHandler
        except ImportError:
            raise UsageError("--metrics needs prometheus-client",
                             hint="pip install 'jetbench[metrics]'") from None
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self.snapshot))
        try:
            self._httpd = BoundedHTTPServer(self.host, self.port,
                                            MetricsHandler.factory(registry))
        except OSError as err:
            raise UsageError(f"cannot listen for metrics on {self.address} ({err.strerror})",
                             hint="another program may hold the port; choose another") from err
        self.port = self._httpd.server_address[1]  # the real one when asked for port 0
        if not is_loopback(self.host):
            log.warning("metrics are served on %s, not a loopback address: anyone who can "
                        "reach it reads this board's clocks and power", self.address)
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        name="jetbench-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()
        self._httpd = None
