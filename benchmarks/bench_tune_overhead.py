"""What a `tune` trial costs beyond its measurement, beside what a `sweep` point costs: N trials
of a GPU-only study and a sweep of the board's 13 GPU clocks, the same workload and window
(sim:alexnet on a simulated TX1), interleaved over several rounds on fresh boards. Each run's
wall time less its timed windows and warm-ups (the phases every result records), divided by its
points, is its overhead per point; the difference is what the study adds (Optuna, its storage,
the per-trial request).

Target (issue 38): a trial within 0.2 s of a sweep point's overhead.

    .venv/bin/python benchmarks/bench_tune_overhead.py [--points 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

from jetbench.hw.fs import Root
from jetbench.run.request import MeasureOptions, MeasureRequest
from jetbench.run.sweep import sweep
from jetbench.run.tune.options import TuneRequest
from jetbench.run.tune.study import tune
from jetbench.sim.create import create_board

WINDOW_S, WARMUP_S = 0.3, 0.1


def _measured_s(paths: List[Path]) -> float:
    """The timed windows and warm-ups of the results written (what is not overhead)."""
    total = 0.0
    for path in paths:
        phases = json.loads(path.read_text())["power"]["phases_s"]
        total += phases["timed_end"] - phases["warmup_start"]
    return total


def run_sweep(_points: int) -> float:
    with tempfile.TemporaryDirectory(prefix="jetbench-bench-") as tmp:
        base = Path(tmp) / "tx1"
        create_board("tx1", base)
        out = Path(tmp) / "sweep"
        request = MeasureRequest(models=("sim:alexnet",), duration_s=WINDOW_S,
                                 warmup_s=WARMUP_S, iterations=3, out_dir=out)
        t0 = time.monotonic()
        sweep(Root(base), request, "all")  # the TX1's 13 GPU clocks
        wall = time.monotonic() - t0
        paths = sorted(out.glob("*.json"))
        return (wall - _measured_s(paths)) / len(paths)


def run_tune(points: int) -> float:
    with tempfile.TemporaryDirectory(prefix="jetbench-bench-") as tmp:
        base = Path(tmp) / "tx1"
        create_board("tx1", base)
        out = Path(tmp) / "tune"
        options = MeasureOptions(model="sim:alexnet", duration=str(WINDOW_S),
                                 warmup=str(WARMUP_S), iterations=3)
        t0 = time.monotonic()
        tune(Root(base), TuneRequest(options, out, budget=points, knobs=("gpu",), seed=1))
        wall = time.monotonic() - t0
        paths = sorted((out / "trials").glob("*/*.json"))
        return (wall - _measured_s(paths)) / len(paths)


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    runs: Dict[str, Callable[[int], float]] = {"sweep point": run_sweep, "tune trial": run_tune}
    got: Dict[str, List[float]] = {name: [] for name in runs}
    for r in range(args.rounds):
        order = list(runs) if r % 2 == 0 else list(reversed(runs))  # interleaved
        for name in order:
            got[name].append(runs[name](args.points))
    for name, values in got.items():
        print(f"{name:12s} overhead per point: median {statistics.median(values):.3f} s "
              f"(min {min(values):.3f}, max {max(values):.3f}; {args.rounds} rounds)")
    gaps = [t - s for t, s in zip(got["tune trial"], got["sweep point"])]
    print(f"a trial's extra over a sweep point: median {statistics.median(gaps):.3f} s "
          f"(min {min(gaps):.3f}, max {max(gaps):.3f}); target <= 0.2 s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
