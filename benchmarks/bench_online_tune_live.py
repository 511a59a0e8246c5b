"""`daemon --tune` end to end against issue 40's targets: a simulated TX1 serving `jetbench sim
app` (sim:resnet18 fp16) whose demand changes, 30/s, then 60/s, then saturating, PHASE_S seconds
each; the daemon tunes the GPU clock (13 entries) in WINDOW windows under items_per_s>=LIMIT.

Then the offline optimum for each demand, by an exhaustive sweep of the same app on the same
board: every GPU clock pinned with `jetbench apply` (a profile per clock), from the top down
(a clock that falls behind builds a queue, which a higher clock measured after it would drain
and so look faster), 2 s to settle, then SWEEP_S seconds: the rate from the app's counter and
the power from the board's rails (the simulated kernel running in this process), items/J the
one over the other.

Printed:
- the share of 10 s windows of the app's counter over the whole run that met the constraint
  (target: 99%);
- for each phase, the held point at its end and its items/J in the sweep against the sweep's
  best that meets the constraint (target: within 5%);
- for each phase, the seconds from its start until the held point was within 5% of that best
  and stayed there (target: 60 s);
- the daemon's CPU over the run (utime + stime from /proc; the controller's share is measured
  beside a plain daemon by bench_online_tune.py).

    python benchmarks/bench_online_tune_live.py [--phase-s 120] [--window 5s] [--sweep-s 5]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.hw.meters.base import total_power_w
from jetbench.hw.meters.registry import auto_sources
from jetbench.profiles.profile_file import pinned_clocks_table, profile_toml
from jetbench.sim.create import create_board
from jetbench.sim.file_kernel import FileKernel

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
DEMANDS = ("30", "60", "max")
LIMIT = 27.0
SWEEP_S = 5.0
GPU = "sys/devices/57000000.gpu/devfreq/57000000.gpu"


def jetbench(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "jetbench", *args], env=ENV, **kw)


def counter(url: str) -> float:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return float(re.search(r"^sim_app_items_total (\S+)$", text, re.M).group(1))


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_daemon(base: Path, demand: Path, url: str, phase_s: float, window: str
               ) -> Tuple[List[Tuple[float, float, Optional[int], str]], float]:
    """(t, app counter, held GPU Hz, phase) every second, and the daemon's CPU seconds."""
    sock = base.parent / "d.sock"
    log = open(base.parent / "daemon.log", "w")
    daemon = jetbench("--root", str(base), "daemon", "--socket", str(sock), "--tune",
                      "--tune-knobs", "gpu", "--tune-window", window, "--throughput-from",
                      f"prometheus:{url}#sim_app_items", "--constraint",
                      f"items_per_s>={LIMIT:g}", stdout=log, stderr=log)
    from jetbench.ownership.client import request

    samples = []
    t0 = time.monotonic()
    try:
        while not sock.exists() and time.monotonic() - t0 < 30:
            time.sleep(0.1)
        t0 = time.monotonic()
        for k, level in enumerate(DEMANDS):
            demand.write_text(level + "\n")
            while time.monotonic() - t0 < (k + 1) * phase_s:
                try:
                    tune = request(sock, "status", timeout_s=5).get("tune") or {}
                except Exception:  # noqa: BLE001 - starting: no answer yet
                    tune = {}
                held = (tune.get("held") or {}).get("point_hz", {}).get("gpu")
                samples.append((time.monotonic() - t0, counter(url), held,
                                str(tune.get("phase"))))
                time.sleep(1.0)
        cpu = _cpu_s(daemon.pid)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        log.close()
    return samples, cpu


def sweep(base: Path, demand: Path, url: str, table: List[int], sweep_s: float
          ) -> Dict[str, Dict[int, Tuple[float, float]]]:
    """demand -> GPU Hz -> (items/s, W), every clock pinned in turn."""
    root = Root(str(base))
    board = detect(root)
    sources = auto_sources(root, board.rails, board.total_rail)
    for s in sources:
        s.open()
    out: Dict[str, Dict[int, Tuple[float, float]]] = {}
    with FileKernel(base):
        for level in DEMANDS:
            demand.write_text(level + "\n")
            out[level] = {}
            for hz in table:
                path = base.parent / f"gpu{hz}.toml"
                path.write_text(profile_toml(pinned_clocks_table(f"{hz}", board.family,
                                                                 gpu_hz=hz)))
                subprocess.run([sys.executable, "-m", "jetbench", "--root", str(base), "apply",
                                str(path)], env=ENV, check=True, capture_output=True)
                time.sleep(2.0)  # the new speed settles
                c0, t0 = counter(url), time.monotonic()
                watts = []
                while time.monotonic() - t0 < sweep_s:
                    for s in sources:
                        r = s.read()
                        spec = s.total()
                        if spec is not None:
                            w = total_power_w(spec, {c.name: v for c, v in
                                                     zip(s.channels(), r.power_w)})
                            if w is not None:
                                watts.append(w)
                    time.sleep(0.25)
                rate = (counter(url) - c0) / (time.monotonic() - t0)
                out[level][hz] = (rate, statistics.fmean(watts))
                subprocess.run([sys.executable, "-m", "jetbench", "--root", str(base),
                                "restore"], env=ENV, check=True, capture_output=True)
    return out


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phase-s", type=float, default=120.0)
    parser.add_argument("--window", default="5s")
    parser.add_argument("--sweep-s", type=float, default=SWEEP_S)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "tx1"
        create_board("tx1", base)
        table = [int(v) for v in (base / GPU / "available_frequencies").read_text().split()]
        demand = Path(tmp) / "demand"
        demand.write_text("30\n")
        app = jetbench("sim", "app", str(base), "--port", "0", "--demand-file", str(demand),
                       "--model", "sim:resnet18", stdout=subprocess.PIPE, text=True)
        try:
            url = re.search(r"(http://\S+)", app.stdout.readline()).group(1)
            samples, cpu = run_daemon(base, demand, url, args.phase_s, args.window)
            grid = sweep(base, demand, url, sorted(table, reverse=True), args.sweep_s)
        finally:
            app.send_signal(signal.SIGTERM)
            app.wait(timeout=30)
    # 10 s windows of the app's counter over the whole run
    windows = []
    i = 0
    while i < len(samples):
        j = i
        while j < len(samples) and samples[j][0] - samples[i][0] < 10.0:
            j += 1
        if j >= len(samples):
            break
        windows.append((samples[j][1] - samples[i][1]) / (samples[j][0] - samples[i][0]))
        i = j
    met = sum(r >= LIMIT for r in windows) / len(windows)
    print(f"daemon --tune on a simulated TX1 (sim app, sim:resnet18 fp16, GPU knob, "
          f"{args.window} windows, items_per_s>={LIMIT:g}), demand "
          f"{', '.join(DEMANDS)} for {args.phase_s:g} s each")
    print(f"  10 s windows meeting the constraint: {100 * met:.1f}% of {len(windows)}; "
          f"the daemon's CPU: {100 * cpu / samples[-1][0]:.2f}% of a core")
    for k, level in enumerate(DEMANDS):
        points = grid[level]
        best_hz, (r_b, w_b) = max(((hz, v) for hz, v in points.items() if v[0] >= LIMIT),
                                  key=lambda item: item[1][0] / item[1][1])
        best = r_b / w_b
        phase = [s for s in samples if k * args.phase_s <= s[0] < (k + 1) * args.phase_s]
        held = phase[-1][2]
        gap = None if held is None else 1 - (points[held][0] / points[held][1]) / best
        within = None
        for idx, s in enumerate(phase):
            if all(x[2] is not None and points[x[2]][0] / points[x[2]][1] >= 0.95 * best
                   and points[x[2]][0] >= LIMIT for x in phase[idx:]):
                within = s[0] - k * args.phase_s
                break
        print(f"  demand {level}: sweep's best {best_hz / 1e6:.0f} MHz {best:.2f} items/J "
              f"({r_b:.1f}/s, {w_b:.2f} W); held at the end "
              f"{'-' if held is None else f'{held / 1e6:.0f} MHz'}, "
              f"{'-' if gap is None else f'{100 * gap:.1f}%'} below; within 5% from "
              f"{'never' if within is None else f'{within:.0f} s'} on")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
