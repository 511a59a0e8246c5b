"""`jetbench sim app`: a simulated deployed application, for `daemon --tune`'s tests and demo.

Frames arrive at a demand (N per second, or `max`: the next one is always waiting), wait in a
queue of bounded length (a frame that finds it full is dropped), and are served one at a time
by a simulated network (`sim:NAME`, workload/sim_run.py's SimNetwork): each frame's time comes
from the latency model at the clocks the board runs when it starts, so the rate follows the
simulated board's clocks, and the GPU's `load` file shows the share of time it is busy (the
simulated power model reads it). Paced by deadline: frame n ends at its modelled time after
the previous one (or its arrival), so a busy host does not slow the simulated application.

It serves Prometheus metrics (prometheus-client), as Triton, vLLM or DeepStream would:

    sim_app_items_total               frames served (a counter: the rate to tune for)
    sim_app_dropped_total             frames dropped at a full queue
    sim_app_latency_seconds           arrival to end of service (a histogram)
    sim_app_busy_seconds_total        the seconds spent serving (`daemon --busy-from`)
    sim_app_demand_per_s              the demand now (0 for max)
    sim_app_queue_length              frames waiting

The demand changes at run time: `--demand 30,60@20,max@40` (60/s from the 20th second, max
from the 40th), or `--demand-file PATH` (a number or `max`, read again every DEMAND_POLL_S;
it wins while it holds a valid value).
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Deque, List, Optional, Tuple

from ..errors import UsageError
from ..hw.board import Board
from ..hw.fs import Root
from .sim_run import build_sim_workload

DEMAND_POLL_S = 0.2
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075,
                     0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0)
LOAD_EVERY_S = 0.1  # how often the GPU's load file is written


@dataclass(frozen=True)
class DemandStep:
    at_s: float  # from the app's start
    per_s: Optional[float]  # None: max (the next frame is always waiting)


def parse_demand(text: str) -> Tuple[DemandStep, ...]:
    """'30' / 'max' / '30,60@20,max@40' -> the schedule; UsageError otherwise."""
    steps: List[DemandStep] = []
    for k, part in enumerate(p.strip() for p in text.split(",")):
        value, at, when = part.partition("@")
        try:
            at_s = float(when) if at else 0.0
            per_s = None if value.strip().lower() == "max" else float(value)
        except ValueError:
            raise UsageError(f"--demand {text!r}: {part!r} is not RATE[@SECONDS] "
                             "(RATE a number per second or max)") from None
        if (per_s is not None and not per_s > 0) or at_s < 0 or (k == 0 and at_s != 0) or (
                steps and at_s <= steps[-1].at_s):
            raise UsageError(f"--demand {text!r}: rates must be positive and the times "
                             "increasing, the first at 0",
                             hint="e.g. --demand 30,60@20,max@40")
        steps.append(DemandStep(at_s, per_s))
    return tuple(steps)


def read_demand_file(path: Optional[Path]) -> Tuple[bool, Optional[float]]:
    """(valid, per second or None for max) from the file; (False, None) where it holds none."""
    if path is None:
        return False, None
    try:
        text = path.read_text().strip().lower()
    except (OSError, UnicodeDecodeError):
        return False, None
    if text == "max":
        return True, None
    try:
        value = float(text)
    except ValueError:
        return False, None
    return (True, value) if value > 0 else (False, None)


class SimApp:
    """The application's loop (a thread) and its metrics. `step_until` is its whole logic, run
    by the thread in real time; tests drive it with their own times."""

    def __init__(self, root: Root, board: Board, model: str, precision: str,
                 demand: Tuple[DemandStep, ...], demand_file: Optional[Path] = None,
                 queue_s: float = 1.0, registry=None):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        _, self.network = build_sim_workload(root, board, model, precision, 1)
        self.demand, self.demand_file, self.queue_s = demand, demand_file, queue_s
        self.registry = registry if registry is not None else CollectorRegistry()
        self.items = Counter("sim_app_items", "frames served", registry=self.registry)
        self.dropped = Counter("sim_app_dropped", "frames dropped at a full queue",
                               registry=self.registry)
        self.busy = Counter("sim_app_busy_seconds", "seconds spent serving",
                            registry=self.registry)
        self.latency = Histogram("sim_app_latency_seconds", "arrival to end of service",
                                 buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.demand_gauge = Gauge("sim_app_demand_per_s", "frames arriving per second "
                                  "(0: as many as it serves)", registry=self.registry)
        self.queue_gauge = Gauge("sim_app_queue_length", "frames waiting",
                                 registry=self.registry)
        self._queue: Deque[float] = collections.deque()  # arrival times
        self._t0: Optional[float] = None
        self._next_arrival: Optional[float] = None
        self._serving: Optional[Tuple[float, float, float]] = None  # (arrival, end, took)
        self._busy_s = 0.0
        self._load_at: Optional[float] = None
        self._file_read_at = -1.0
        self._file_value: Tuple[bool, Optional[float]] = (False, None)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def demand_at(self, now: float) -> Optional[float]:
        """Frames per second now (None: max)."""
        if self.demand_file is not None and now - self._file_read_at >= DEMAND_POLL_S:
            self._file_read_at = now
            self._file_value = read_demand_file(self.demand_file)
        if self._file_value[0]:
            return self._file_value[1]
        assert self._t0 is not None
        elapsed = now - self._t0
        current = self.demand[0]
        for step in self.demand:
            if step.at_s <= elapsed:
                current = step
        return current.per_s

    def step_until(self, now: float) -> float:
        """Everything that happened up to `now`: arrivals, drops, services ended and begun.
        Returns when something next happens (the thread sleeps until then)."""
        if self._t0 is None:
            self._t0 = self._load_at = now
        per_s = self.demand_at(now)
        self.demand_gauge.set(per_s or 0.0)
        # arrivals up to now (a change of demand takes effect from the next arrival)
        if per_s is None:
            self._next_arrival = None
        else:
            if self._next_arrival is None:
                self._next_arrival = now
            limit = max(1, int(per_s * self.queue_s))
            while self._next_arrival <= now:
                if len(self._queue) >= limit:
                    self.dropped.inc()
                else:
                    self._queue.append(self._next_arrival)
                self._next_arrival += 1.0 / per_s
        # services that ended up to now, and the next ones begun at their deadlines
        while True:
            if self._serving is not None:
                arrival, end, took = self._serving
                if end > now:
                    break
                self.busy.inc(took)
                self.items.inc()
                self.latency.observe(end - arrival)
                self._serving = None
                free_at = end
            else:
                free_at = now
            if per_s is None:
                arrival = free_at  # max: the next frame is waiting when the last ends
            elif self._queue:
                arrival = self._queue.popleft()
            else:
                break
            took = self.network.batch_time().total_s
            start = max(free_at, arrival)
            self._busy_s += took
            self._serving = (arrival, start + took, took)
        self.queue_gauge.set(len(self._queue))
        self._write_load(now)
        wake = [now + LOAD_EVERY_S]
        if self._serving is not None:
            wake.append(self._serving[1])
        if self._next_arrival is not None:
            wake.append(self._next_arrival)
        return min(wake)

    def _write_load(self, now: float) -> None:
        assert self._load_at is not None
        span = now - self._load_at
        if span < LOAD_EVERY_S:
            return
        busy = min(1.0, self._busy_s / span) * self.network.batch_time().gpu_busy
        self.network.show_load(busy)
        self._busy_s, self._load_at = 0.0, now

    def _run(self) -> None:
        while not self._stop.is_set():
            wake = self.step_until(time.monotonic())
            self._stop.wait(max(0.0, wake - time.monotonic()))

    def counts(self) -> Tuple[float, float]:
        """Frames served and dropped so far."""
        served = self.registry.get_sample_value("sim_app_items_total") or 0.0
        dropped = self.registry.get_sample_value("sim_app_dropped_total") or 0.0
        return float(served), float(dropped)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="jetbench-sim-app", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.network.idle()


def serve_metrics(registry, port: int):
    """The registry's metrics on 127.0.0.1:`port` (0: a free one), served by a thread; the
    server (its `server_address` holds the port)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # no line per scrape
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="jetbench-sim-app-http",
                     daemon=True).start()
    return server
