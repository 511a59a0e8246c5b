"""`daemon --tune`'s controllers side by side (issue 59): the first generation
(daemon/online_tuner.py) and the governor (daemon/governor.py), on workloads served through a
queue in simulated time, with demand steps.

A workload is a capacity C and a power over the clocks: `sim` is sim:resnet18 fp16 from the
simulator's own latency and power models (as bench_online_tune.py); `surface:SEED` is one of
sim/surface.py's random surfaces, written apart from the project's models (its power at a load
between its idle and its full-load figure, linear in the share of time busy). Frames arrive at
the demand into a queue of QUEUE_S seconds of it (a frame that finds it full is dropped), are
served at C, every DT_S. The controller is driven as live_tuning.py drives it: a pin, its
settling (live_window.pin_settle_s: 1 s; none where the point stays, as the daemon goes on from
the last sample), a window of --tune-window times the decision's share (a settling window not
judged), a window that clearly breaks a constraint by EARLY_FRACTION of it ends there; each
window's rate and power get JITTER_PCT of noise (for a 10 s window; more for a shorter one, as
1/sqrt of its length) and say it as their uncertainty.

With --arrivals the noise is the live run's instead (bench_governor_live.py, surface_app.py):
frames arrive at random (Poisson) at the demand, so a point that keeps up serves what arrived
and its power follows what it served; the window is sampled as live_tuning.py samples it (the
count and the power every tenth of a window, a second at least; power the mean over the last
POWER_SPAN_S, as the simulated meter reads the app's busy share, with --meter-pct of noise a
reading), its figures and how sure they are by live_window.window_figures (the recent windows'
spread, pooled: window_noise.py).

Printed per workload, seed and controller: the share of 10 s stretches of wall time whose
served rate met the floor, or served what arrived where less arrived (all, and after the first
minute), the held point's items/J below the
exhaustive optimum at each demand's end, the seconds after each change until the point held
is within 5% of it (and meets the floor), the items/J of each demand after its first
minute, all served over all spent (probes and looks included), below the optimum's, and the
seconds after each change to the first 10 s whose clocks ran within 5% of it (ran_within: what
the board ran, at its steady figures, whatever the controller called its phase; the held
point's figure waits for the label "holding").

    python benchmarks/bench_governor.py [--boards tx1,orin-nano] [--workloads sim,surface:0]
        [--seeds 3] [--knobs gpu,emc] [--jitter 2] [--arrivals [--meter-pct 1]] [--busy]

--busy: each window also says the share of it the workload was busy (served over capacity x
length), as `daemon --busy-from` reads a server's busy-seconds counter.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from jetbench.daemon.governor import Governor
from jetbench.daemon.live_rate import Reading
from jetbench.daemon.live_window import (
    EARLY_FRACTION,
    pin_settle_s,
    sample_period_s,
    window_figures,
)
from jetbench.daemon.online_tuner import HOLDING, OnlineTuner, Point, Space, Window
from jetbench.daemon.window_noise import NoisePool
from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.run.constraint import Constraint
from jetbench.run.tune.space import search_space
from jetbench.sim.boards import BOARDS
from jetbench.sim.create import create_board
from jetbench.sim.power_model import ClockState, component_powers_w
from jetbench.sim.surface import Surface, _volts
from jetbench.sim.workload_model import Clocks, NetworkCost, batch_time, family_constants
from jetbench.workload.sim_run import network_of

WINDOW_S = 10.0
PHASE_S = 300.0
DT_S = 0.05
QUEUE_S = 1.0
JITTER_PCT = 2.0
ARRIVALS = False  # --arrivals: Poisson arrivals, the window sampled as the live daemon does
METER_PCT = 1.0  # ... and each power reading's noise, %
POWER_SPAN_S = 0.25  # ... a power reading: the mean over this much before it (the app's busy file)
BUSY = False  # --busy: each window says the share of it the workload was busy (--busy-from)
SHARES = (0.35, 0.7, None, 0.35)  # the demand per phase, of the top's capacity (None: max)
FLOOR_SHARE = 0.9  # the floor: this share of the first demand


class Workload:
    """capacity(point) items/s and power_w(point, load) for a board's space."""
    space: Space
    name: str

    def capacity(self, point: Point) -> float:
        raise NotImplementedError

    def power_w(self, point: Point, load: float) -> float:
        raise NotImplementedError


class SimNetwork(Workload):
    def __init__(self, board_key: str, base: Path, knobs: Sequence[str]):
        create_board(board_key, base)
        root = Root(str(base))
        self.board = detect(root)
        tables = search_space(root, self.board, tuple(knobs), False)
        self.space = Space(tuple(tables), tuple(tuple(tables[k]) for k in tables))
        self.name = "sim:resnet18"
        self.soc = BOARDS[board_key].soc
        self.constants = family_constants(self.board.family)
        spec = network_of("sim:resnet18")
        self.cost = NetworkCost(spec.macs_per_image, spec.params or 0,
                                spec.activation_elems_per_image)
        self.cpu_table = list(self.board.cpu.policies[0].available_hz)
        self.emc_max = self.board.emc.max_hz if self.board.emc else 1
        self._cache: Dict[Point, Tuple[float, float]] = {}

    def _batch(self, point: Point) -> Tuple[float, float]:
        if point not in self._cache:
            hz = self.space.hz(point)
            batch = batch_time(self.constants, self.cost, "fp16", 1, Clocks(
                hz["gpu"], hz.get("emc", self.emc_max), hz.get("cpu", max(self.cpu_table))))
            self._cache[point] = (1.0 / batch.total_s, batch.gpu_busy)
        return self._cache[point]

    def capacity(self, point: Point) -> float:
        return self._batch(point)[0]

    def power_w(self, point: Point, load: float) -> float:
        hz = self.space.hz(point)
        gpu_table = self.space.tables[self.space.knobs.index("gpu")]
        clocks = ClockState(hz["gpu"], gpu_table, hz.get("cpu", max(self.cpu_table)),
                            self.cpu_table, 1.0, hz.get("emc", self.emc_max), self.emc_max)
        parts = component_powers_w(self.soc, clocks, 0.1,
                                   gpu_load=load * self._batch(point)[1])
        return sum(v for k, v in parts.items() if k != "carrier")


class SurfaceWorkload(Workload):
    def __init__(self, space: Space, seed: int):
        self.space, self.surface = space, Surface.draw(seed)
        self.name = f"surface:{seed}"

    def _shares(self, point: Point) -> Tuple[float, float, float]:
        hz = self.space.hz(point)
        out = []
        for knob in ("gpu", "emc", "cpu"):
            if knob in hz:
                table = self.space.tables[self.space.knobs.index(knob)]
                out.append(hz[knob] / max(table))
            else:
                out.append(1.0)
        return out[0], out[1], out[2]

    def capacity(self, point: Point) -> float:
        return self.surface.items_per_s(*self._shares(point))

    def power_w(self, point: Point, load: float) -> float:
        g, e, c = self._shares(point)
        s = self.surface
        idle = s.static_w + s.emc_w * e * 0.3 + s.cpu_w * _volts(c, s.cpu_knee, s.cpu_v_top) \
            ** 2 * c * 0.15
        return idle + load * (s.power_w(g, e, c) - idle)


def steady(work: Workload, point: Point, demand: Optional[float]) -> Tuple[float, float]:
    cap = work.capacity(point)
    rate = cap if demand is None else min(demand, cap)
    return rate, work.power_w(point, rate / cap)


def optimum(work: Workload, demand: Optional[float], floor: float) -> float:
    import itertools
    best = 0.0
    for point in itertools.product(*(range(len(t)) for t in work.space.tables)):
        rate, power = steady(work, point, demand)
        if rate >= floor:
            best = max(best, rate / power)
    return best


RAN_STRETCH_S = 10.0  # what the board ran, judged over each stretch this long
RAN_GRID_S = 0.5  # ... from its clocks every this often


def ran_within(samples: Sequence[Tuple[float, float, float]], best: float, start: float,
               end: float, share: float = 0.05) -> Optional[float]:
    """The seconds after `start` to the first RAN_STRETCH_S stretch (within the demand, to
    `end`) whose clocks ran within `share` of `best` items/J (its start); None where none did.
    `samples` are (t, items/s, W) every so often: the clocks that ran then, at their steady
    figures at this demand (a point under the floor: 0 items/s). Probes and looks count as
    they ran, whatever the controller called its phase (the held point's figure counts from
    the label; this one from the clocks, and says nothing of later stretches: the energy after
    the first minute does)."""
    inside = [s for s in samples if start <= s[0] < end]
    for i, (t0, _, _) in enumerate(inside):
        if t0 + RAN_STRETCH_S > end + 1e-9:
            break
        j = i
        while j < len(inside) and inside[j][0] < t0 + RAN_STRETCH_S - 1e-9:
            j += 1
        span = inside[i:j]
        power = sum(s[2] for s in span)
        if power > 0 and sum(s[1] for s in span) / power >= (1 - share) * best:
            return t0 - start
    return None


class Run:
    """One controller on one workload, in simulated time."""

    def __init__(self, work: Workload, make: Callable[[Space, List[Constraint]], object],
                 floor: float, demands: Sequence[Optional[float]], seed: int):
        self.work, self.floor, self.demands = work, floor, demands
        self.noise = random.Random(seed)
        self.arrivals = np.random.default_rng(seed)
        self.pool = NoisePool()  # --arrivals: the windows' spread, as the daemon's
        self.limit = Constraint("items_per_s", ">=", floor)
        self.tuner = make(work.space, [self.limit])
        self.t = 0.0
        self.queue = 0.0
        self._bins: Dict[int, float] = {}  # items served in each 10 s of wall time
        self._came: Dict[int, float] = {}  # ... and arrived
        # each demand's items served and joules spent after its first minute (probes and
        # looks included: what the user pays for, which the held point's gap does not show)
        self._spent: Dict[int, List[float]] = {}
        self._ran: List[Tuple[float, float, Point]] = []  # (from, to, the point pinned)
        self.cpu_s = 0.0

    def phase_at(self, t: float) -> int:
        """The demand's index at time t."""
        return min(int(t // PHASE_S), len(self.demands) - 1)

    def demand_at(self, t: float) -> Optional[float]:
        return self.demands[self.phase_at(t)]

    def advance(self, point: Point, seconds: float,
                trace: Optional[List[Tuple[float, float, float]]] = None) -> Tuple[float, float]:
        """Serve for `seconds` at `point`: (items served, energy J); each step's (seconds,
        items, W) appended to `trace`."""
        cap = self.work.capacity(point)
        served = energy = 0.0
        end = self.t + seconds
        self._ran.append((self.t, end, point))
        while self.t < end - 1e-9:
            dt = min(DT_S, end - self.t)
            demand = self.demand_at(self.t)
            key = int((self.t + dt / 2) // WINDOW_S)
            if demand is None:
                done = cap * dt
                self._came[key] = math.inf
            else:
                come = float(self.arrivals.poisson(demand * dt)) if ARRIVALS else demand * dt
                self._came[key] = self._came.get(key, 0.0) + come
                self.queue = min(self.queue + come, max(QUEUE_S * demand, 1.0))
                done = min(self.queue, cap * dt)
                self.queue -= done
            served += done
            power = self.work.power_w(point, done / (cap * dt))
            energy += power * dt
            phase = self.phase_at(self.t)
            if self.t - phase * PHASE_S >= 60:
                spent = self._spent.setdefault(phase, [0.0, 0.0])
                spent[0] += done
                spent[1] += power * dt
            if trace is not None:
                trace.append((dt, done, power))
            self._bins[key] = self._bins.get(key, 0.0) + done
            self.t += dt
        return served, energy

    def window(self, point: Point, length: float, tuner: object) -> Window:
        """A window as live_tuning measures it: from EARLY_FRACTION of it on, read every tenth,
        ended where the controller says it is enough (a constraint clearly broken; the
        governor: the held point's rate moved too)."""
        judged = tuner.judged()  # type: ignore[attr-defined]
        ends = getattr(tuner, "ends_early", None)
        served = energy = spent = 0.0
        trace: List[Tuple[float, float, float]] = []
        cap = self.work.capacity(point)

        def busy(w: Window) -> Window:  # --busy: the share of the window spent serving
            return replace(w, busy_share=min(1.0, served / (cap * spent))) if BUSY else w
        while spent < length - 1e-9:
            step = EARLY_FRACTION * length if spent == 0 else min(0.1 * length, length - spent)
            s, e = self.advance(point, step, trace)
            served, energy, spent = served + s, energy + e, spent + step
            jitter = JITTER_PCT * math.sqrt(WINDOW_S / spent)
            w = busy(self._sampled(trace, False) if ARRIVALS else
                     self._figures(served, energy, spent, jitter))
            if spent < length - 1e-9 and (ends(point, w) if ends is not None else
                                          any(w.breaks(lim) for lim in judged)):
                return busy(self._sampled(trace, True)) if ARRIVALS else w
        if ARRIVALS:
            return busy(self._sampled(trace, True))
        return busy(self._figures(served, energy, spent,
                                  JITTER_PCT * math.sqrt(WINDOW_S / spent)))

    def _sampled(self, trace: Sequence[Tuple[float, float, float]], learn: bool) -> Window:
        """--arrivals: the window as live_tuning.py reads it (module doc), its figures by its
        own code (`learn`: a finished window, its spread joins the pool)."""
        every = max(1, round(sample_period_s(WINDOW_S) / DT_S))
        span = max(1, round(POWER_SPAN_S / DT_S))
        readings: List[Reading] = [Reading(0.0, 0.0)]
        powers: List[float] = []
        t = count = 0.0
        for i, (dt, done, _) in enumerate(trace, 1):
            t, count = t + dt, count + done
            if i % every == 0 or i == span and not powers:  # (the first power at its start)
                if i % every == 0:
                    readings.append(Reading(t, count))
                last = trace[max(0, i - span):i]
                powers.append(sum(p * d for d, _, p in last) / sum(d for d, _, _ in last)
                              * (1 + self.noise.gauss(0, METER_PCT / 100)))
        if len(readings) < 2:  # shorter than a sample: read at its end
            readings.append(Reading(t, count))
            powers.append(trace[-1][2])
        w = window_figures(readings, powers, [], self.pool, learn=learn)
        assert w is not None
        return w

    def _figures(self, served: float, energy: float, spent: float, jitter: float) -> Window:
        rate = served / spent * (1 + self.noise.gauss(0, jitter / 100))
        power = energy / spent * (1 + self.noise.gauss(0, jitter / 100))
        return Window(rate, 100.0 / max(served, 1.0) + jitter, power, jitter)

    def _clocks_ran(self, end: float) -> List[Tuple[float, float, float]]:
        """What the board ran every RAN_GRID_S (ran_within's samples)."""
        cache: Dict[Tuple[Point, int], Tuple[float, float]] = {}
        out: List[Tuple[float, float, float]] = []
        segments = iter(self._ran)
        segment = next(segments, None)
        t = 0.0
        while t < end and segment is not None:
            while segment is not None and segment[1] <= t:
                segment = next(segments, None)
            if segment is None:
                break
            phase = self.phase_at(t)
            key = (segment[2], phase)
            if key not in cache:
                rate, power = steady(self.work, segment[2], self.demands[phase])
                cache[key] = (rate if rate >= self.floor else 0.0, power)
            out.append((t, *cache[key]))
            t += RAN_GRID_S
        return out

    def go(self) -> Dict[str, object]:
        tuner = self.tuner
        decision = tuner.start(self.work.space.top())  # type: ignore[attr-defined]
        end = PHASE_S * len(self.demands)
        optima = [optimum(self.work, d, self.floor) for d in self.demands]
        reached: List[Optional[float]] = [None] * len(self.demands)
        gaps: List[float] = [1.0] * len(self.demands)
        pinned: Optional[Point] = None
        while self.t < end:
            if decision.point != pinned:  # a pin: the workload settles, the knobs act
                self.advance(decision.point, pin_settle_s(
                    WINDOW_S, self.work.space.knobs, pinned, decision.point))
                pinned = decision.point
            share = getattr(decision, "window_share", 1.0)
            if decision.settle and getattr(decision, "settle_share", None) is not None:
                share = decision.settle_share
            w = self.window(decision.point, WINDOW_S * share, tuner)
            if decision.settle:
                decision.settle = False
                continue
            c0 = time.process_time()
            decision = tuner.observe(decision.point, w)  # type: ignore[attr-defined]
            self.cpu_s += time.process_time() - c0
            phase = self.phase_at(self.t)
            held = getattr(tuner, "held", None)
            if held is not None:
                rate, power = steady(self.work, held, self.demands[phase])
                gap = 1 - rate / power / optima[phase] if rate >= self.floor else 1.0
                gaps[phase] = gap
                if reached[phase] is None and decision.phase == HOLDING and gap <= 0.05:
                    reached[phase] = self.t - phase * PHASE_S
                elif gap > 0.05 and decision.phase == HOLDING:
                    reached[phase] = None  # left it: not reached until it holds again
        # a stretch met the floor where it served it, or served what arrived where fewer
        # arrived (Poisson arrivals at a low rate: no clock serves what did not come; a frame
        # or two, and 1%, served in the next stretch)
        met = [self._bins.get(k, 0.0) >= min(self.floor * WINDOW_S,
                                             0.99 * self._came.get(k, 0.0) - 2)
               for k in range(int(end // WINDOW_S))]
        after = met[int(60 / WINDOW_S):]
        spent = [1 - served / joules / optima[phase] for phase, (served, joules)
                 in sorted(self._spent.items()) if joules > 0]
        samples = self._clocks_ran(end)
        ran = [ran_within(samples, optima[k], k * PHASE_S, (k + 1) * PHASE_S)
               for k in range(len(self.demands))]
        return {"met": sum(met) / len(met), "met_after": sum(after) / max(len(after), 1),
                "gaps": gaps, "reached": reached, "windows": getattr(tuner, "windows", 0),
                "spent": spent, "ran": ran,
                "cpu_ms": 1000 * self.cpu_s / max(getattr(tuner, "windows", 1), 1)}


CONTROLLERS: Dict[str, Callable[[Space, List[Constraint]], object]] = {
    "gen1": OnlineTuner, "governor": Governor}


def _pcts(shares: Sequence[float]) -> str:
    return ", ".join(f"{100 * g:.1f}%" for g in shares)


def main(argv: List[str]) -> int:
    global JITTER_PCT, ARRIVALS, METER_PCT, BUSY
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boards", default="tx1,orin-nano")
    parser.add_argument("--workloads", default="sim,surface:0,surface:1,surface:2")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--knobs", default="gpu,emc")
    parser.add_argument("--controllers", default="gen1,governor")
    parser.add_argument("--jitter", type=float, default=JITTER_PCT,
                        help="noise on a 10 s window's rate and power, %% (Poisson arrivals "
                        "at a low rate, as the live run's: 4-6)")
    parser.add_argument("--arrivals", action="store_true",
                        help="the live run's noise instead of --jitter: Poisson arrivals, the "
                        "power following what was served, the window sampled as the daemon "
                        "samples it (module doc)")
    parser.add_argument("--busy", action="store_true",
                        help="each window also says the share of it the workload was busy (a "
                             "server's busy-time counter, daemon --busy-from)")
    parser.add_argument("--meter-pct", type=float, default=METER_PCT,
                        help="with --arrivals: each power reading's noise, %% (default 1)")
    args = parser.parse_args(argv)
    JITTER_PCT, ARRIVALS, METER_PCT, BUSY = args.jitter, args.arrivals, args.meter_pct, args.busy
    knobs = tuple(args.knobs.split(","))
    print(f"{WINDOW_S:g} s windows, demand per phase "
          f"{', '.join('max' if s is None else f'{s:g} of the top' for s in SHARES)} "
          f"({PHASE_S:g} s each), floor {FLOOR_SHARE:g} of the first, "
          + (f"Poisson arrivals, a meter reading {METER_PCT:g}% noisy, " if ARRIVALS else
             f"jitter {JITTER_PCT:g}%, ") +
          f"a {QUEUE_S:g} s queue; knobs {','.join(knobs)}")
    summary: Dict[str, List[Dict[str, object]]] = {c: [] for c in args.controllers.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.boards.split(","):
            sim = SimNetwork(key, Path(tmp) / key, knobs)
            for name in args.workloads.split(","):
                work: Workload = sim if name == "sim" else \
                    SurfaceWorkload(sim.space, int(name.split(":")[1]))
                top = work.capacity(work.space.top())
                demands = [None if s is None else s * top for s in SHARES]
                floor = FLOOR_SHARE * (demands[0] or top)
                print(f"{key} {work.name}: space " + " x ".join(
                    f"{k} {len(t)}" for k, t in zip(work.space.knobs, work.space.tables))
                    + "; demand " + ", ".join("max" if d is None else f"{d:.1f}/s"
                                               for d in demands) + f"; floor {floor:.1f}/s")
                for seed in range(args.seeds):
                    for ctl in summary:
                        r = Run(work, CONTROLLERS[ctl], floor, demands, seed).go()
                        summary[ctl].append(r)
                        gaps = _pcts(r["gaps"])  # type: ignore
                        reach = ", ".join("never" if x is None else f"{x:.0f} s"
                                          for x in r["reached"])  # type: ignore
                        spent = _pcts(r["spent"])  # type: ignore
                        ran = ", ".join("never" if x is None else f"{x:.0f} s"
                                        for x in r["ran"])  # type: ignore
                        print(f"  seed {seed} {ctl:>8}: met {100 * r['met']:.1f}% (after the "
                              f"first minute {100 * r['met_after']:.1f}%); below the optimum "
                              f"at each end {gaps}; within 5% after {reach}; items/J after "
                              f"each demand's first minute below the optimum {spent}; its "
                              f"clocks within 5% for 10 s from {ran}; "
                              f"{r['cpu_ms']:.2f} ms CPU a window")
    for ctl, rows in summary.items():
        reached = [x for r in rows for x in r["reached"][1:]]  # type: ignore
        within = [x for x in reached if x is not None and x <= 30]
        ran = [x for r in rows for x in r["ran"][1:]]  # type: ignore
        ran_in = [x for x in ran if x is not None and x <= 30]
        gaps = [g for r in rows for g in r["gaps"]]  # type: ignore
        spent = [g for r in rows for g in r["spent"]]  # type: ignore
        print(f"{ctl}: runs {len(rows)}; met after the first minute: median "
              f"{100 * statistics.median(r['met_after'] for r in rows):.1f}%, worst "
              f"{100 * min(r['met_after'] for r in rows):.1f}%; gap at each end: median "
              f"{100 * statistics.median(gaps):.1f}%, worst {100 * max(gaps):.1f}%; items/J "
              f"after each demand's first minute: {100 * statistics.fmean(spent):.2f}% below "
              f"the optimum on average; demand "
              f"changes held within 5% in 30 s: {len(within)} of {len(reached)}; the clocks "
              f"that ran within 5% (a whole 10 s) in 30 s: {len(ran_in)} of "
              f"{len(ran)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
