"""A deployed application whose speed is a random surface's (jetbench/sim/surface.py) at the
clocks the simulated board runs, for `daemon --tune` end to end (bench_governor_live.py):

    python benchmarks/surface_app.py --root TREE --seed N --demand-file F --busy-file B
        [--arrivals-seed M] [--port P]

Frames arrive at random (Poisson) at the demand the file holds (a number per second), wait in a
queue of one second of it (a frame that finds it full is dropped) and are served one at a time,
each taking 1 / the surface's rate at the GPU and EMC clocks running when it starts (read from
the tree as measure's clock sampler reads them). It serves `surface_items_total` and a latency
histogram `surface_latency_seconds` (prometheus-client), `surface_arrived_total` (frames
arrived, whether served or dropped) and `surface_busy_seconds_total` (the seconds spent
serving: `daemon --busy-from`), and writes the share of time it was busy
over the last BUSY_EVERY_S to --busy-file: the simulated external meter the benchmark runs reads
it with the same surface (power between idle and full load). The arrivals are drawn from
--arrivals-seed (a fresh one where none is given: the surface's seed drew them before, and
every run of the benchmark saw the same frames arrive). Its first line says the arrivals'
seed and, last, where it serves.
"""

from __future__ import annotations

import argparse
import collections
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Deque

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.sim.surface import Surface, running_shares

READ_EVERY_S = 0.05
BUSY_EVERY_S = 0.25
BUCKETS = (0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0)


def demand_now(path: Path, last: float) -> float:
    try:
        return max(0.0, float(path.read_text().strip()))
    except (OSError, ValueError):
        return last


def main(argv: list) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--demand-file", required=True, type=Path)
    ap.add_argument("--busy-file", required=True, type=Path)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--arrivals-seed", type=int, default=None,
                    help="the arrivals' random seed (default: a fresh one, said on the first line)")
    args = ap.parse_args(argv)
    root = Root(args.root)
    board = detect(root)
    surface = Surface.draw(args.seed)
    registry = CollectorRegistry()
    items = Counter("surface_items", "frames served", registry=registry)
    arrived = Counter("surface_arrived", "frames arrived (served, waiting or dropped)",
                      registry=registry)
    busy = Counter("surface_busy_seconds", "seconds spent serving", registry=registry)
    latency = Histogram("surface_latency_seconds", "arrival to end of service",
                        buckets=BUCKETS, registry=registry)
    server, _thread = start_http_server(args.port, addr="127.0.0.1", registry=registry)
    arrivals_seed = args.arrivals_seed if args.arrivals_seed is not None else \
        random.SystemRandom().randrange(2 ** 31)
    print(f"arrivals seed {arrivals_seed}; serving "
          f"http://127.0.0.1:{server.server_address[1]}/metrics", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    rng = random.Random(arrivals_seed)
    waiting: Deque[float] = collections.deque()
    demand = demand_now(args.demand_file, 0.0)
    t = time.monotonic()
    next_arrival = t + (rng.expovariate(demand) if demand > 0 else 1.0)
    free_at, service_s, read_at, demand_at = t, 0.01, 0.0, 0.0
    busy_s, busy_from = 0.0, t
    while not stop.is_set():
        now = time.monotonic()
        if now - read_at >= READ_EVERY_S:
            read_at = now
            service_s = 1.0 / surface.items_per_s(*running_shares(root, board))
        if now - demand_at >= 0.2:
            demand_at, before = now, demand
            demand = demand_now(args.demand_file, demand)
            if demand != before and demand > 0:
                next_arrival = now + rng.expovariate(demand)
        while demand > 0 and next_arrival <= now:
            arrived.inc()
            if len(waiting) < max(1.0, demand):
                waiting.append(next_arrival)
            next_arrival += rng.expovariate(demand)
        if waiting and free_at <= now:
            arrival = waiting.popleft()
            start = max(free_at, arrival)
            free_at = start + service_s
            busy_s += service_s
            wait = free_at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            busy.inc(service_s)
            items.inc()
            latency.observe(free_at - arrival)
        else:
            until = min(next_arrival if demand > 0 else now + 0.05, now + 0.05)
            time.sleep(max(0.0, until - time.monotonic()))
        if now - busy_from >= BUSY_EVERY_S:
            share = min(1.0, busy_s / (now - busy_from))
            tmp = args.busy_file.with_suffix(".tmp")
            tmp.write_text(f"{share:.4f}\n")
            tmp.replace(args.busy_file)
            busy_s, busy_from = 0.0, now
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
