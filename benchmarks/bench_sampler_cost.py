"""The sampler's cost to a GIL-holding workload (issue 64): `jetbench measure` with
`--meter ina3221?interval=1ms` (and at the sensor's own refresh, the default) against
`--meter none`, as interleaved pairs of fresh CLI runs, and the ratio of their img/s.

Run on an idle machine: .venv/bin/python benchmarks/bench_sampler_cost.py [--pairs 7]
    [--duration 4] [--board orin-nano] [--simulated] [--before TREE]
(--before TREE: also the 1 kHz arm with the jetbench of another checkout's agent/ directory,
e.g. a `git worktree` at the commit before a change, interleaved in the same rounds.)

The workload is a network whose forward pass is ~3 ms of pure Python (it holds the GIL, as a
Python-heavy network at batch 1 does). The board is an Orin Nano tree without the simulator's
marker (no simulated kernel runs beside jetbench: the rails are still files, as a tree copied
off a board), unless --simulated. Each run is its own `jetbench measure` process; the order
inside a pair alternates so that neither arm always goes first. Printed: each pair's ratio
(sampled / none), their median and spread, and the load average before and after.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "agent"))

from jetbench.sim.create import create_board  # noqa: E402

SPIN = """
import time
import torch

class _Spin(torch.nn.Module):
    def forward(self, x):
        end = time.perf_counter() + 0.003
        n = 0
        while time.perf_counter() < end:
            n += 1
        return x.mean() + 0.0 * n

def spin():
    return _Spin()
"""


def _arg(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def run_once(tree: Path, meter: str, duration_s: float, out: Path, work: Path,
             agent: Path = REPO / "agent") -> Tuple[float, str]:
    """img/s, and for a sampled run its total channel's coverage and samples per second."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(agent), str(work)]),
               JETBENCH_ROOT=str(tree))
    cmd = [sys.executable, "-m", "jetbench.cli.main", "measure", "--model", "jb_spin:spin",
           "--input-shape", "3,8,8", "--device", "cpu", "--iterations", "2",
           "--duration", f"{duration_s}s", "--warmup", "0.5s", "--meter", meter,
           "--out", str(out), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"measure failed ({proc.returncode}): {proc.stderr[-2000:]}")
    doc = json.loads(proc.stdout)
    result = (doc["results"] if isinstance(doc, dict) and "results" in doc else doc)[0]
    power = result.get("power") or {}
    channels = [c for c in power.get("channels") or [] if c.get("name") == "VDD_IN"]
    window_s = (power.get("window") or {}).get("duration_s")
    seen = ""
    if channels and window_s:
        seen = (f" (VDD_IN coverage {channels[0]['coverage']:.1%}, "
                f"{channels[0]['samples'] / window_s:.0f} samples/s)")
    return float(result["throughput"]["images_per_s"]), seen


def main() -> None:
    pairs = int(_arg("--pairs", "7"))
    duration_s = float(_arg("--duration", "4"))
    key = _arg("--board", "orin-nano")
    # (meter, label, the agent/ tree that runs it)
    arms = [("ina3221?interval=1ms", "1 kHz", REPO / "agent"),
            ("ina3221", "sensor's refresh", REPO / "agent")]
    if "--before" in sys.argv:
        arms.append(("ina3221?interval=1ms", "1 kHz, before", Path(_arg("--before", ""))))
    kernel = " (simulated kernel)" if "--simulated" in sys.argv else ""
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f} at start; {pairs} interleaved pairs of {duration_s:g} s "
          f"windows per arm, board {key}{kernel}")
    with tempfile.TemporaryDirectory(prefix="jetbench-bench-") as base:
        work = Path(base)
        (work / "jb_spin.py").write_text(SPIN)
        tree = work / key
        create_board(key, tree)
        if "--simulated" not in sys.argv:
            (tree / "etc/jetbench/simulated.json").unlink()
        ratios = {label: [] for _, label, _ in arms}
        for k in range(pairs):
            for meter, label, agent in arms:
                order = [("none", "none", REPO / "agent"), (meter, label, agent)]
                if k % 2:
                    order.reverse()
                got, seen = {}, {}
                for m, name, tree_agent in order:
                    got[name], seen[name] = run_once(tree, m, duration_s,
                                                     work / f"out-{k}-{name}", work, tree_agent)
                ratios[label].append(got[label] / got["none"])
                print(f"pair {k + 1} {label}: none {got['none']:.1f} img/s, sampled "
                      f"{got[label]:.1f} img/s{seen[label]}, ratio {ratios[label][-1]:.3f}",
                      flush=True)
        print()
        print("| arm | ratios (sampled / none), in order | median | min .. max |")
        print("|---|---|---|---|")
        for label, values in ratios.items():
            print(f"| {label} | {', '.join(f'{r:.3f}' for r in values)} | "
                  f"{statistics.median(values):.3f} | {min(values):.3f} .. {max(values):.3f} |")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
