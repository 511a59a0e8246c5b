"""`daemon --tune`'s controllers under a tail SLO (issue 59, item 2): a p99 latency ceiling or a
deadline-miss budget, on frames arriving at random (Poisson) into a FIFO queue served at the
point's capacity, in simulated time.

The workloads and spaces are bench_governor.py's (sim:resnet18 from the simulator's models, or
sim/surface.py's random surfaces). Each frame's latency is its wait in the queue plus its
service (1/capacity at the clocks when it starts); a window reads the latencies of the frames
it completed as a histogram would (its p99, and the share over the deadline), its rate from
their count (the Poisson noise is the window's own: 1/sqrt(items)), its power with JITTER_PCT.
The demand steps as bench_governor.py's; the floor is FLOOR_SHARE of the first demand; the tail
limit
is TAIL_MULT inter-arrival times at the first demand (a queue near saturation breaks it: the
point needs headroom).

Printed per workload, seed and controller: the share of 10 s stretches of wall time that met
both the floor and the tail (after the first minute), the longest run of stretches that missed
the tail, and the held point's items/J below the best point whose steady p99 (from a long
simulated run of it) meets the ceiling, at each demand's end.

    python benchmarks/bench_governor_tail.py [--slo p99|miss] [--boards tx1] [--seeds 3]
        [--busy]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Deque, Dict, List, Optional, Sequence, Tuple

from bench_governor import (
    CONTROLLERS,
    EARLY_FRACTION,
    JITTER_PCT,
    PHASE_S,
    SHARES,
    WINDOW_S,
    SimNetwork,
    SurfaceWorkload,
    Workload,
    _pcts,
)

from jetbench.daemon.live_window import pin_settle_s
from jetbench.daemon.online_tuner import Point, Window
from jetbench.run.constraint import Constraint

QUEUE_S = 1.0
TAIL_MULT = 6.0  # the p99 ceiling (and the deadline): this many inter-arrival times
MISS_BUDGET = 0.02
FLOOR_SHARE = 0.7  # the floor, of the first demand (Poisson arrivals: 10 s counts vary 7%)
STEADY_S = 200.0  # a point's steady tail, read from this long a run of it
WINDOWS_RUN = 100  # stretches of a point's run that say whether it meets WINDOWS_SHARE of them
WINDOWS_SHARE = 0.99


class Queue:
    """Poisson arrivals into a bounded FIFO queue, one server at the point's capacity."""

    def __init__(self, work: Workload, demands: Sequence[Optional[float]], seed: int):
        self.work, self.demands = work, demands
        self.random = random.Random(seed)
        self.t = 0.0
        self.free_at = 0.0
        self.waiting: Deque[float] = collections.deque()  # arrival times, not started
        self.next_arrival = 0.0
        self.done: List[Tuple[float, float]] = []  # (completion time, latency s)
        self.busy_s = 0.0

    def demand_at(self, t: float) -> Optional[float]:
        return self.demands[min(int(t // PHASE_S), len(self.demands) - 1)]

    def advance(self, point: Point, seconds: float) -> float:
        """Serve for `seconds` at `point`; the energy it took (J)."""
        cap = self.work.capacity(point)
        service = 1.0 / cap
        end = self.t + seconds
        busy = 0.0
        while True:
            demand = self.demand_at(self.t)
            if demand is None:  # saturating: the next frame is always waiting
                start = max(self.free_at, self.t)
                if start >= end:
                    break
                self.free_at = start + service
                busy += service
                self.done.append((self.free_at, service))
                self.t = start
                continue
            # arrivals up to the server's next start
            if self.next_arrival < self.t:
                self.next_arrival = self.t + self.random.expovariate(demand)
            start = max(self.free_at, self.waiting[0]) if self.waiting else math.inf
            if self.next_arrival <= min(start, end):
                if len(self.waiting) < max(1, QUEUE_S * demand):
                    self.waiting.append(self.next_arrival)
                self.t = self.next_arrival
                self.next_arrival = self.t + self.random.expovariate(demand)
                continue
            if start >= end:
                break
            arrival = self.waiting.popleft()
            self.free_at = start + service
            busy += service
            self.done.append((self.free_at, self.free_at - arrival))
            self.t = start
        self.t = end
        self.busy_s += busy
        load = min(1.0, busy / seconds) if seconds > 0 else 0.0
        return self.work.power_w(point, load) * seconds

    def between(self, t0: float, t1: float) -> List[float]:
        return [lat for at, lat in self.done if t0 < at <= t1]


def longest_missed(met: Sequence[bool]) -> int:
    """The longest run of stretches in a row that missed."""
    run = longest = 0
    for ok in met:
        run = 0 if ok else run + 1
        longest = max(longest, run)
    return longest


def p99(latencies: List[float]) -> Optional[float]:
    if not latencies:
        return None
    ranked = sorted(latencies)
    return ranked[min(len(ranked) - 1, int(math.ceil(0.99 * len(ranked))) - 1)]


class TailRun:
    def __init__(self, work: Workload, make: Callable, floor: float, tail: Constraint,
                 deadline_s: float, demands: Sequence[Optional[float]], seed: int,
                 busy: bool = False):
        self.work, self.floor, self.tail, self.deadline_s = work, floor, tail, deadline_s
        self.busy = busy  # each window says its busy share (daemon --busy-from)
        self.demands = demands
        self.queue = Queue(work, demands, seed)
        self.noise = random.Random(seed + 1000)
        self.tuner = make(work.space, [Constraint("items_per_s", ">=", floor), tail])

    def _figures(self, t0: float, t1: float, energy: float, busy_s: float) -> Window:
        lats = self.queue.between(t0, t1)
        seconds = t1 - t0
        items = len(lats)
        jitter = JITTER_PCT * math.sqrt(WINDOW_S / seconds)
        power = energy / seconds * (1 + self.noise.gauss(0, jitter / 100))
        latency = {} if not lats else {"p99": 1000 * p99(lats), "p50":  # type: ignore
                                       1000 * statistics.median(lats)}
        miss = sum(lat > self.deadline_s for lat in lats) / items if items else None
        return Window(items / seconds, 100.0 / math.sqrt(max(items, 1)), power, jitter,
                      latency, miss, min(1.0, busy_s / seconds) if self.busy else None)

    def window(self, point: Point, length: float) -> Window:
        ends = getattr(self.tuner, "ends_early", None)
        t0, busy0 = self.queue.t, self.queue.busy_s
        energy = spent = 0.0
        while spent < length - 1e-9:
            step = EARLY_FRACTION * length if spent == 0 else min(0.1 * length, length - spent)
            energy += self.queue.advance(point, step)
            spent += step
            w = self._figures(t0, self.queue.t, energy, self.queue.busy_s - busy0)
            if spent < length - 1e-9 and (ends(point, w) if ends is not None else any(
                    w.breaks(lim) for lim in self.tuner.judged())):
                return w
        return self._figures(t0, self.queue.t, energy, self.queue.busy_s - busy0)

    def tail_met(self, latencies: List[float]) -> bool:
        """Whether a stretch's frames met the tail (their p99, or their share over the
        deadline)."""
        if self.tail.name == "miss_rate":
            figure = sum(lat > self.deadline_s for lat in latencies) / max(len(latencies), 1)
        else:
            figure = 1000 * (p99(latencies) or 0.0)
        return figure <= self.tail.value

    def go(self, steady: Dict, optima: List[Tuple[float, float]]) -> Dict[str, object]:
        tuner = self.tuner
        decision = tuner.start(self.work.space.top())
        end = PHASE_S * len(self.demands)
        gaps = [1.0] * len(self.demands)
        gaps_windows = [1.0] * len(self.demands)
        pinned: Optional[Point] = None
        while self.queue.t < end:
            if decision.point != pinned:  # a pin: the workload settles, the knobs act
                self.queue.advance(decision.point, pin_settle_s(
                    WINDOW_S, self.work.space.knobs, pinned, decision.point))
                pinned = decision.point
            share = decision.window_share
            if decision.settle and decision.settle_share is not None:
                share = decision.settle_share
            w = self.window(decision.point, WINDOW_S * share)
            if decision.settle:
                decision.settle = False
                continue
            decision = tuner.observe(decision.point, w)
            phase = min(int(self.queue.t // PHASE_S), len(self.demands) - 1)
            if tuner.held is not None:
                rate, power, ok = steady_point(self, steady, self.demands[phase], tuner.held)
                gaps[phase] = 1 - rate / power / optima[phase][0] if ok else 1.0
                gaps_windows[phase] = 1 - rate / power / optima[phase][1] if ok else 1.0
        met, tails = [], []
        for k in range(int(end // WINDOW_S)):
            lats = self.queue.between(k * WINDOW_S, (k + 1) * WINDOW_S)
            tail_ok = self.tail_met(lats)
            met.append(len(lats) / WINDOW_S >= self.floor and tail_ok)
            tails.append(tail_ok)
        after = met[6:]
        return {"met_after": sum(after) / len(after), "tail_after": sum(tails[6:]) / len(after),
                "longest": longest_missed(tails[6:]), "gaps": gaps,
                "gaps_windows": gaps_windows}


def steady_point(run: TailRun, cache: Dict, demand: Optional[float], point: Point
                 ) -> Tuple[float, float, bool]:
    """A point's steady rate, power and whether it meets floor and tail (a long run of it)."""
    key = (demand, point)
    if key not in cache:
        q = Queue(run.work, [demand], 7)
        energy = q.advance(point, STEADY_S)
        lats = q.between(20.0, STEADY_S)
        rate = len(lats) / (STEADY_S - 20.0)
        cache[key] = (rate, energy / STEADY_S, rate >= run.floor and run.tail_met(lats))
    return cache[key]


def windows_met(run: TailRun, demand: float, point: Point) -> float:
    """The share of a point's 10 s stretches meeting the tail in a run of WINDOWS_RUN."""
    q = Queue(run.work, [demand], 11)
    q.advance(point, WINDOW_S * (WINDOWS_RUN + 1))
    return sum(run.tail_met(q.between(k * WINDOW_S, (k + 1) * WINDOW_S))
               for k in range(1, WINDOWS_RUN + 1)) / WINDOWS_RUN


def optima_of(run: TailRun, cache: Dict) -> List[Tuple[float, float]]:
    """Per demand, the best items/J of a point meeting floor and tail over a long run, and of
    one meeting the tail in WINDOWS_SHARE of its 10 s stretches too (the issue's target: a
    point whose long-run p99 just meets the ceiling misses it in many stretches)."""
    out = []
    points = list(itertools.product(*(range(len(t)) for t in run.work.space.tables)))
    for d in run.demands:
        ranked: List[Tuple[float, Point]] = []
        for point in points:
            rate, power, met = steady_point(run, cache, d, point)
            if met:
                ranked.append((rate / power, point))
        ranked.sort(reverse=True)
        best = ranked[0][0] if ranked else 0.0
        best_windows = 0.0
        for efficiency, point in ranked:  # (saturating: no queue, each stretch as the run)
            if d is None or windows_met(run, d, point) >= WINDOWS_SHARE:
                best_windows = efficiency
                break
        out.append((best, best_windows))
    return out


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slo", choices=("p99", "miss"), default="p99")
    parser.add_argument("--boards", default="tx1")
    parser.add_argument("--workloads", default="sim,surface:0,surface:1")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--controllers", default="gen1,governor")
    parser.add_argument("--busy", action="store_true",
                        help="each window also says the share of it the server was busy "
                             "(daemon --busy-from)")
    args = parser.parse_args(argv)
    print(f"{WINDOW_S:g} s windows, Poisson arrivals, a {QUEUE_S:g} s queue; demand per phase "
          f"{', '.join('max' if s is None else f'{s:g} of the top' for s in SHARES)}; "
          f"SLO {args.slo} ({TAIL_MULT:g} inter-arrival times at the first demand)")
    rows: Dict[str, List[Dict[str, object]]] = {c: [] for c in args.controllers.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.boards.split(","):
            sim = SimNetwork(key, Path(tmp) / key, ("gpu", "emc"))
            for name in args.workloads.split(","):
                work: Workload = sim if name == "sim" else \
                    SurfaceWorkload(sim.space, int(name.split(":")[1]))
                top = work.capacity(work.space.top())
                demands = [None if s is None else s * top for s in SHARES]
                first = demands[0] or top
                floor = FLOOR_SHARE * first
                deadline_s = TAIL_MULT / first
                tail = Constraint("miss_rate", "<=", MISS_BUDGET) if args.slo == "miss" else \
                    Constraint("latency_p99_ms", "<=", 1000 * deadline_s)
                cache: Dict = {}
                probe = TailRun(work, CONTROLLERS["governor"], floor, tail, deadline_s,
                                demands, 0)
                optima = optima_of(probe, cache)
                print(f"{key} {work.name}: floor {floor:.1f}/s, {tail}"
                      + (f" (deadline {1000 * deadline_s:.0f} ms)" if args.slo == "miss"
                         else ""))
                for seed in range(args.seeds):
                    for ctl in rows:
                        t0 = time.process_time()
                        r = TailRun(work, CONTROLLERS[ctl], floor, tail, deadline_s, demands,
                                    seed, args.busy).go(cache, optima)
                        rows[ctl].append(r)
                        gaps = _pcts(r["gaps"])  # type: ignore
                        gaps_windows = _pcts(r["gaps_windows"])  # type: ignore
                        print(f"  seed {seed} {ctl:>8}: 10 s stretches meeting the tail after "
                              f"the first minute {100 * r['tail_after']:.1f}% (and the floor "
                              f"{100 * r['met_after']:.1f}%); longest "
                              f"run of tail misses {r['longest']}; below the best meeting both"
                              f" at each end {gaps} (meeting the tail in "
                              f"{100 * WINDOWS_SHARE:g}% of stretches too: {gaps_windows}) "
                              f"({time.process_time() - t0:.0f} s)")
    for ctl, rs in rows.items():
        gaps = [g for r in rs for g in r["gaps"]]  # type: ignore
        gaps_windows = [g for r in rs for g in r["gaps_windows"]]  # type: ignore
        print(f"{ctl}: runs {len(rs)}; tail met: median "
              f"{100 * statistics.median(r['tail_after'] for r in rs):.1f}%, worst "
              f"{100 * min(r['tail_after'] for r in rs):.1f}% (with the floor: worst "
              f"{100 * min(r['met_after'] for r in rs):.1f}%); longest run of misses "
              f"{max(r['longest'] for r in rs)}; gap median {100 * statistics.median(gaps):.1f}%"
              f", worst {100 * max(gaps):.1f}%; to the best meeting the tail in "
              f"{100 * WINDOWS_SHARE:g}% of stretches: median "
              f"{100 * statistics.median(gaps_windows):.1f}%, worst "
              f"{100 * max(gaps_windows):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
