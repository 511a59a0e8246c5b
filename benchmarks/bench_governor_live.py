"""`daemon --tune` end to end against issue 59's "done when": a simulated TX1 serving a workload
whose speed and power the project did not write (a random surface, jetbench/sim/surface.py,
served by benchmarks/surface_app.py at the clocks the board runs), its power read from an
external meter (a simulated SCPI meter on a loopback socket, `--meter`), demand steps; the
daemon tunes GPU x EMC under items_per_s >= FLOOR_SHARE of the first demand.

Demand: 0.35, 0.7, 1.0 and 0.35 of the top's capacity, PHASE_S seconds each. The optimum per
demand is exact: every point of the daemon's space (`status`'s tune.space_hz) on the surface's
formulas, its rate min(demand, capacity), its power between idle and full load by its busy
share (as the meter reads it). Printed:

- the share of 10 s windows of the app's counter after the first minute meeting the floor, or
  serving what arrived where fewer frames than the floor arrived (target: 99%), and each missed;
- per demand: the seconds from its start until the daemon held (phase `holding`) a point within
  5% of the optimum's items/J (target: 30 s), and the held point's gap at its end; beside them,
  the seconds to the first 10 s whose clocks ran within 5% of it (the board's GPU and EMC
  clocks read every second, at their steady figures at this demand: probes and looks as they
  ran, whatever the daemon called its phase; bench_governor.ran_within);
- the daemon's CPU, the share of one core from its start to SIGTERM (the simulated board's files,
  in its process, included; the meter and the app are their own processes);
- whether SIGTERM restored the board byte for byte.

Frames arrive at random from --arrivals-seed, a fresh one each run unless given (printed:
--arrivals-seed repeats a run's arrivals). The runs in RESULTS.md up to run J drew them from
the surface's seed: every one of them saw the same frames arrive.

    python benchmarks/bench_governor_live.py [--seed 10] [--phase-s 120] [--arrivals-seed N]
        [--busy] [--p99]

--busy gives the daemon the app's busy seconds (`--busy-from`): each point's capacity read at
any load. --p99 adds a tail constraint, `latency_p99_ms<=X` from the app's latency histogram
(`--latency-from`), X six inter-arrival times at the first demand (as bench_governor_tail.py),
and prints the share of 10 s stretches whose p99 (the histogram's, interpolated as the daemon
reads it: live_rate.quantile) meets it, and the longest run of stretches that missed; the
third demand is then 0.8 of the top's capacity (at all of it the queue grows without end), and
the optimum meets the ceiling too (each point's steady p99 from a 300 s run of its queue).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from bench_governor import ran_within
from bench_governor_tail import longest_missed, p99

from jetbench.daemon.live_rate import Selector, buckets, counter_value, quantile, scrape
from jetbench.errors import JetbenchError
from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.ownership.client import request
from jetbench.sim.create import create_board
from jetbench.sim.meters import ScpiSim
from jetbench.sim.surface import Surface, _volts, running_shares

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
SHARES = (0.35, 0.7, 1.0, 0.35)
# --p99: Poisson frames at the top's whole capacity queue without end (no point meets any
# ceiling there: run R, RESULTS.md), so the third demand is 0.8 of it
SHARES_TAIL = (0.35, 0.7, 0.8, 0.35)
FLOOR_SHARE = 0.9
TAIL_MULT = 6.0  # --p99: the ceiling, this many inter-arrival times at the first demand


def power_at(surface: Surface, g: float, e: float, busy: float) -> float:
    idle = surface.static_w + surface.emc_w * e * 0.3 + surface.cpu_w * _volts(
        1.0, surface.cpu_knee, surface.cpu_v_top) ** 2 * 0.15
    return idle + busy * (surface.power_w(g, e) - idle)


def steady_p99_ms(capacity: float, demand: float, seconds: float = 300.0) -> float:
    """A point's steady p99 latency as the app serves it (Poisson arrivals, one server at its
    capacity, first come first served: Lindley's recursion), after a 20 s start."""
    rng = random.Random(7)
    service, wait, t, lats = 1.0 / capacity, 0.0, 0.0, []
    while t < seconds:
        gap = rng.expovariate(demand)
        t += gap
        wait = max(0.0, wait + service - gap)
        if t > 20.0:
            lats.append(wait + service)
        if wait > 5.0:  # (the queue grows without end: the app drops, the tail is lost)
            return math.inf
    return 1000 * (p99(lats) or math.inf)


def optimum(surface: Surface, space: Dict[str, List[int]], demand: float, floor: float,
            ceiling_ms: Optional[float] = None) -> Tuple[float, Dict[Tuple[int, int], float]]:
    """The best items/J meeting the floor (and the p99 ceiling, where given: each point's
    steady p99), and each point's items/J (by its Hz pair; 0 where it misses)."""
    gpu, emc = space["gpu"], space["emc"]
    table: Dict[Tuple[int, int], float] = {}
    best = 0.0
    for g_hz, e_hz in itertools.product(gpu, emc):
        g, e = g_hz / max(gpu), e_hz / max(emc)
        rate, power = steady(surface, g, e, demand)
        per_j = rate / power
        ok = rate >= floor and (ceiling_ms is None or
                                steady_p99_ms(surface.items_per_s(g, e), demand) <= ceiling_ms)
        table[(g_hz, e_hz)] = per_j if ok else 0.0
        if ok:
            best = max(best, per_j)
    return best, table


def steady(surface: Surface, g: float, e: float, demand: float) -> Tuple[float, float]:
    """A point's steady items/s and W at a demand: it serves what arrives up to its capacity,
    its power by the share of time it is busy."""
    cap = surface.items_per_s(g, e)
    rate = min(demand, cap)
    return rate, power_at(surface, g, e, rate / cap)


def worth(surface: Surface, ran: List[Tuple[float, float, float]], demand: float,
          floor: float) -> List[Tuple[float, float, float]]:
    """What the clocks that ran were worth at this demand: (t, items/s, W) at their steady
    figures (bench_governor.ran_within's samples; under the floor, 0 items/s)."""
    out = []
    for t, g, e in ran:
        rate, power = steady(surface, g, e, demand)
        out.append((t, rate if rate >= floor else 0.0, power))
    return out


def counter(url: str) -> Tuple[Tuple[float, float], Dict[float, float]]:
    """(frames served, frames arrived) so far, and the latency histogram's cumulative
    buckets by upper bound (s): the page read as the daemon reads it (live_rate)."""
    series = scrape(url, ["surface_items_total", "surface_arrived_total",
                          "surface_latency_seconds_bucket"], 5.0)
    served, came = (counter_value(series, Selector(name)) or 0.0
                    for name in ("surface_items", "surface_arrived"))
    return (served, came), buckets(series, Selector("surface_latency_seconds"))


# the rails' readings follow the simulated power model while the kernel runs: not state
RAIL_FILES = ("in_power", "in_current", "in_voltage", "curr", "power")


def cpu_share(pid: int, seconds: float) -> Optional[float]:
    """A running process's CPU time (user and system, /proc/PID/stat) over `seconds` of wall
    time: its share of one core; None where it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (the 14th and 15th fields)
    return ticks / os.sysconf("SC_CLK_TCK") / seconds if seconds > 0 else None


def board_state(base: Path) -> Dict[str, bytes]:
    """Every file of the tree but the state directory and the rails' readings."""
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*"))
            if p.is_file() and p.parts[len(base.parts)] != "var" and
            not (p.name.startswith(RAIL_FILES) and "input" in p.name)}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--phase-s", type=float, default=120.0)
    ap.add_argument("--window", default="10s")
    ap.add_argument("--log", type=Path, help="Write the daemon's log here.")
    ap.add_argument("--busy", action="store_true",
                    help="the daemon also reads the app's busy seconds (--busy-from)")
    ap.add_argument("--p99", action="store_true",
                    help="a tail constraint too: latency_p99_ms<=X from the app's histogram")
    ap.add_argument("--arrivals-seed", type=int, default=None,
                    help="the app's arrivals' seed (default: a fresh one, printed)")
    args = ap.parse_args(argv)
    surface = Surface.draw(args.seed)
    arrivals_seed = args.arrivals_seed if args.arrivals_seed is not None else \
        random.SystemRandom().randrange(2 ** 31)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "tx1"
        create_board("tx1", base)
        before = board_state(base)
        demand_file, busy_file = Path(tmp) / "demand", Path(tmp) / "busy"
        top_rate = surface.items_per_s(1.0, 1.0)
        demands = [s * top_rate for s in (SHARES_TAIL if args.p99 else SHARES)]
        floor = FLOOR_SHARE * demands[0]
        ceiling_ms = 1000 * TAIL_MULT / demands[0]
        demand_file.write_text(f"{demands[0]:.3f}\n")
        busy_file.write_text("0\n")
        app = subprocess.Popen([sys.executable, str(REPO / "benchmarks/surface_app.py"),
                                "--root", str(base), "--seed", str(args.seed),
                                "--arrivals-seed", str(arrivals_seed),
                                "--demand-file", str(demand_file), "--busy-file",
                                str(busy_file)], env=ENV, stdout=subprocess.PIPE, text=True)
        url = app.stdout.readline().split()[-1]  # type: ignore[union-attr]

        board_root = Root(str(base))
        board = detect(board_root)

        def watts(_t: float) -> float:
            g, e = running_shares(board_root, board)
            try:
                busy = float(busy_file.read_text())
            except (OSError, ValueError):
                busy = 0.0
            return power_at(surface, g, e, busy)

        sock = Path(tmp) / "d.sock"
        with ScpiSim(watts) as meter:
            daemon = subprocess.Popen(
                [sys.executable, "-m", "jetbench", "--root", str(base), "daemon", "--socket",
                 str(sock), "--tune", "--throughput-from", f"prometheus:{url}#surface_items",
                 "--constraint", f"items_per_s>={floor:.4g}", "--tune-knobs", "gpu,emc",
                 "--tune-window", args.window, "--meter", meter.spec + "?timeout=5s"]
                + (["--busy-from", f"prometheus:{url}#surface_busy_seconds"] if args.busy
                   else [])
                + (["--latency-from", f"prometheus:{url}#surface_latency_seconds",
                    "--constraint", f"latency_p99_ms<={ceiling_ms:.4g}"] if args.p99 else []),
                env=ENV, stderr=subprocess.PIPE, text=True)
            counts: List[Tuple[float, Tuple[float, float]]] = []
            hists: List[Dict[float, float]] = []
            held: List[Tuple[float, str, Optional[Dict[str, int]]]] = []
            ran: List[Tuple[float, float, float]] = []  # (t, GPU share, EMC share) running
            t0 = started = time.monotonic()
            space: Optional[Dict[str, List[int]]] = None
            cpu: Optional[float] = None
            try:
                while not sock.exists() and time.monotonic() - t0 < 60:
                    time.sleep(0.2)
                t0 = time.monotonic()
                for k, d in enumerate(demands):
                    demand_file.write_text(f"{d:.3f}\n")
                    while time.monotonic() - t0 < (k + 1) * args.phase_s:
                        now = time.monotonic() - t0
                        served_arrived, hist = counter(url)
                        counts.append((now, served_arrived))
                        hists.append(hist)
                        try:
                            tune = request(sock, "status").get("tune") or {}
                        except (OSError, JetbenchError):
                            tune = {}
                        space = tune.get("space_hz") or space
                        point = (tune.get("held") or {}).get("point_hz")
                        held.append((now, str(tune.get("phase")), point))
                        ran.append((now, *running_shares(board_root, board)))
                        time.sleep(1.0)
            finally:
                cpu = cpu_share(daemon.pid, time.monotonic() - started)
                daemon.send_signal(signal.SIGTERM)
                err = daemon.communicate(timeout=60)[1]
                app.send_signal(signal.SIGTERM)
                app.wait(timeout=30)
        after_state = board_state(base)
        restored = after_state == before
        changed = sorted(k for k in set(before) | set(after_state)
                         if before.get(k) != after_state.get(k))
        if args.log:
            args.log.write_text(err)
        # a stretch met the floor where it served it, or served what arrived where fewer
        # arrived (Poisson arrivals: 64/s is 4% noisy in 10 s and the floor lies 10% under;
        # no clock serves what did not come; a frame or two, and 1%, served in the next one)
        met, short, missed = [], 0, []
        tails: List[bool] = []  # --p99: each stretch after the first minute met the ceiling
        for k in range(int(counts[-1][0] // 10)):
            i0 = [i for i, (t, _) in enumerate(counts) if t >= k * 10][0]
            i1 = [i for i, (t, _) in enumerate(counts) if t >= (k + 1) * 10]
            if i1:
                (a, h0), (b, h1) = (counts[i0][1], hists[i0]), (counts[i1[0]][1], hists[i1[0]])
                if k * 10 >= 60 and h1:
                    stretch_s = quantile(0.99, {le: h1[le] - h0.get(le, 0.0) for le in h1})
                    tails.append(stretch_s is None or 1000 * stretch_s <= ceiling_ms)
                served, came = b[0] - a[0], b[1] - a[1]
                ok = served >= min(10 * floor, 0.99 * came - 2)
                met.append((k * 10 >= 60, ok))
                short += k * 10 >= 60 and came < 10 * floor
                if not ok and k * 10 >= 60:
                    missed.append(f"{k * 10}-{k * 10 + 10} s: {served / 10:.1f}/s served, "
                                  f"{came / 10:.1f}/s arrived")
        after = [ok for late, ok in met if late]
        print(f"surface {args.seed} on a simulated TX1, GPU x EMC, windows {args.window}, "
              f"demand {', '.join(f'{d:.1f}' for d in demands)}/s ({args.phase_s:g} s each), "
              f"floor {floor:.1f}/s, power from a simulated SCPI meter (--meter), "
              f"arrivals seed {arrivals_seed}")
        print(f"  10 s windows of the app's counter meeting the floor (or serving what arrived) "
              f"after the first minute: {100 * sum(after) / max(len(after), 1):.1f}% of "
              f"{len(after)} ({short} with fewer arrivals than the floor)"
              + "".join(f"\n    missed {m}" for m in missed))
        if args.p99:
            print(f"  10 s stretches whose p99 met latency_p99_ms<={ceiling_ms:.4g} after the "
                  f"first minute: {100 * sum(tails) / max(len(tails), 1):.1f}% of "
                  f"{len(tails)}; longest run missed {longest_missed(tails)}; missed at "
                  + (", ".join(f"{60 + 10 * k} s" for k, ok in enumerate(tails) if not ok)
                     or "none"))
        assert space is not None, err[-2000:]
        for k, d in enumerate(demands):
            best, table = optimum(surface, space, d, floor, ceiling_ms if args.p99 else None)
            best_at = max(table, key=lambda p: table[p])
            reached = None
            end_gap = None
            for t, phase, point in held:
                if not (k * args.phase_s <= t < (k + 1) * args.phase_s) or point is None:
                    continue
                gap = 1 - table.get((point["gpu"], point["emc"]), 0.0) / best
                end_gap = gap
                if reached is None and phase == "holding" and gap <= 0.05:
                    reached = t - k * args.phase_s
            last = [p for t, _, p in held if k * args.phase_s <= t < (k + 1) * args.phase_s and p]
            print(f"  demand {d:.1f}/s (best {best_at[0] / 1e6:.0f}/{best_at[1] / 1e6:.0f} MHz, "
                  f"held {last[-1]['gpu'] / 1e6:.0f}/{last[-1]['emc'] / 1e6:.0f} MHz at its end)"
                  if last else f"  demand {d:.1f}/s")
            clocks = ran_within(worth(surface, ran, d, floor), best, k * args.phase_s,
                                (k + 1) * args.phase_s)
            print(f"    within 5% of the optimum after "
                  f"{'never' if reached is None else f'{reached:.0f} s'}; at its end "
                  f"{'-' if end_gap is None else f'{100 * end_gap:.1f}%'} below it; its clocks "
                  f"within 5% for 10 s from "
                  f"{'never' if clocks is None else f'{clocks:.0f} s'}")
        print("  the daemon's CPU: " + ("not read" if cpu is None else
                                        f"{100 * cpu:.1f}% of a core (its start to SIGTERM)"))
        print(f"  SIGTERM restored the board byte for byte: {restored}"
              + ("" if restored else f" (differs: {', '.join(changed[:6])})"))
        if "Traceback" in err:
            print(err[-3000:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
