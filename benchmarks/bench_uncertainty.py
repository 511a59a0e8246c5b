"""Cost of the uncertainty a result now carries (sampling/uncertainty.py): per result, the INA3221
accuracy look-up (shunt and bus files) plus the half-rate re-integration of every channel, on an
orin-nano tree's 3 rails sampled at 1 kHz, for a 3 s and a 60 s window; interleaved repeats,
median and spread.

    .venv/bin/python benchmarks/bench_uncertainty.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from jetbench.hw.board import detect_rails
from jetbench.hw.fs import Root
from jetbench.hw.meters.accuracy import channel_accuracies
from jetbench.hw.meters.ina3221 import Ina3221Source
from jetbench.sampling.trace import Trace
from jetbench.sampling.uncertainty import window_uncertainty
from jetbench.sampling.window import SourceTrace, compute_window
from jetbench.sim.create import create_board


def _setup(base: Path, seconds: float):
    create_board("orin-nano", base)
    root = Root(base)
    source = Ina3221Source(root, detect_rails(root))
    channels = tuple(source.channels())
    trace = Trace(len(channels))
    rng = np.random.default_rng(0)
    for k in range(int(seconds * 1000) + 1):
        trace.append(k * 1e-3, list(5.0 + rng.normal(0, 0.5, len(channels))))
    src = SourceTrace("ina3221", channels, source.total(), 1e-3, 1e-3, trace)
    return root, source, src, compute_window([src], 0.0, seconds)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = {s: _setup(Path(tmp) / f"b{s}", s) for s in (3.0, 60.0)}
        times = {s: [] for s in cases}
        for _ in range(args.rounds):
            for s, (root, source, src, res) in cases.items():  # interleaved
                t0 = time.perf_counter()
                window_uncertainty(res, [src], channel_accuracies(root, [source], "orin-nano"))
                times[s].append((time.perf_counter() - t0) * 1e3)
        for s, ts in times.items():
            print(f"{s:>5.0f} s window, 3 rails @ 1 kHz: median {statistics.median(ts):.2f} ms "
                  f"(min {min(ts):.2f}, max {max(ts):.2f}, n={len(ts)})")


if __name__ == "__main__":
    main()
