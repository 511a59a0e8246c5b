"""The optional Prometheus endpoint (`--metrics 127.0.0.1:9101`), with `prometheus-client`.

Metrics are produced at scrape time from the daemon's latest snapshot (taken every interval by
the loop), so a scrape never touches the hardware and never waits for it:

    jetbench_clock_frequency_hz{domain,clock}   current clock frequency
    jetbench_clock_min_hz / jetbench_clock_max_hz{domain,clock}   the knobs as read back
    jetbench_rail_power_watts{rail,point}        INA3221 rails (or RAPL/NVML where no rails)
    jetbench_temperature_celsius{zone}
    jetbench_drift_repins_total                  re-pins after something else moved a clock
    jetbench_drift_held_total                    drifts left alone while throttling
    jetbench_throttling                          1 while the board throttles
    jetbench_throttle_events_total               times throttling began
    jetbench_pinned, jetbench_profile_info{profile}, jetbench_simulated, jetbench_errors_total
    jetbench_power_mode_info{id,name}            nvpmodel's mode (read, never switched)
    jetbench_gpu_load_percent                    GPU utilisation (`load` file, or NVML on Thor)
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from http.server import ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from ..errors import UsageError

log = logging.getLogger("jetbench.daemon")

DEFAULT_HOST = "127.0.0.1"


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

    def __init__(self, snapshot: Callable[[], Dict[str, Any]]):
        self.snapshot = snapshot

    def collect(self) -> Iterator[Any]:
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
            for family, key in ((freq, "cur_hz"), (lo, "min_hz"), (hi, "max_hz")):
                if c.get(key) is not None:
                    family.add_metric(labels, float(c[key]))
        yield from (freq, lo, hi)
        rails = GaugeMetricFamily("jetbench_rail_power_watts", "Power of a rail or meter "
                                  "channel (W), labelled with its measurement point",
                                  labels=["rail", "point", "source"])
        for r in snap.get("rails", ()):
            if r.get("power_w") is not None:
                rails.add_metric([r["name"], r["point"], r["source"]], r["power_w"])
        yield rails
        temps = GaugeMetricFamily("jetbench_temperature_celsius", "Thermal zone temperature",
                                  labels=["zone"])
        for zone, value in sorted(snap.get("temperatures_c", {}).items()):
            temps.add_metric([zone], value)
        yield temps
        counters = snap.get("counters", {})
        for name, key, text in (
            ("jetbench_drift_repins", "repins", "Re-pins after something else moved a clock"),
            ("jetbench_drift_held", "held", "Clock drifts left alone while the board throttled"),
            ("jetbench_throttle_events", "throttle_events", "Times thermal throttling began"),
            ("jetbench_errors", "errors", "Failed checks, re-pins or reads"),
        ):
            yield CounterMetricFamily(name, text, value=counters.get(key, 0))
        yield GaugeMetricFamily("jetbench_throttling", "1 while the board throttles",
                                value=1.0 if snap.get("throttling") else 0.0)
        yield GaugeMetricFamily("jetbench_pinned", "1 while the daemon holds a profile",
                                value=1.0 if snap.get("pinned") else 0.0)
        yield GaugeMetricFamily("jetbench_simulated", "1 on a simulated board (not hardware)",
                                value=1.0 if snap.get("simulated") else 0.0)
        info = GaugeMetricFamily("jetbench_profile_info", "The profile the daemon holds",
                                 labels=["profile", "board"])
        if snap.get("profile"):
            info.add_metric([snap["profile"], snap.get("board", {}).get("family", "")], 1.0)
        yield info
        yield from _power_mode_metrics(snap)


def _power_mode_metrics(snap: Dict[str, Any]) -> Iterator[Any]:
    """nvpmodel's mode as an info gauge, and the GPU's utilisation where it is known."""
    from prometheus_client.core import GaugeMetricFamily

    mode = GaugeMetricFamily("jetbench_power_mode_info", "The board's nvpmodel power mode",
                             labels=["id", "name"])
    if snap.get("power_mode"):
        mode.add_metric([str(snap["power_mode"]["id"]), snap["power_mode"]["name"] or ""], 1.0)
    yield mode
    if snap.get("gpu_load_pct") is not None:
        yield GaugeMetricFamily("jetbench_gpu_load_percent", "GPU utilisation (%)",
                                value=float(snap["gpu_load_pct"]))


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class MetricsServer:
    """HTTP endpoint in a thread. Constructing one touches nothing; `start()` binds."""

    def __init__(self, address: str, snapshot: Callable[[], Dict[str, Any]]):
        self.host, self.port = parse_address(address)
        self.snapshot = snapshot
        self._httpd: Optional[_Server] = None
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
        registry.register(_Collector(self.snapshot))  # type: ignore[arg-type]
        server_cls = _Server
        if ":" in self.host:
            server_cls = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
        try:
            self._httpd = server_cls((self.host, self.port), MetricsHandler.factory(registry))
        except OSError as err:
            raise UsageError(f"cannot listen for metrics on {self.address} ({err.strerror})",
                             hint="another program may hold the port; choose another") from err
        self.port = self._httpd.server_address[1]  # the real one when asked for port 0
        if not is_loopback(self.host):
            log.warning("metrics are served on %s, not a loopback address: anyone who can "
                        "reach it reads this board's clocks and power", self.address)
        # serve_forever polls its shutdown flag: 1 s keeps idle wake-ups negligible and stop quick
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={
            "poll_interval": 1.0}, name="jetbench-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd = None
