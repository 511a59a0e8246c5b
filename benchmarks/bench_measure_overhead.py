"""Set-up overhead of `jetbench measure`: time from the call to the first timed iteration, split
into jetbench's own part (board detection, journal + pinning, read-back, sampler start) and the
workload's (model build, warm-up), and its share of a default run (10 iterations / 3 s / 1 s
warm-up), on a simulated TX1 at 690 MHz with its rails. Also the cold start a CLI user pays
(`import torch`), measured in a fresh interpreter.

    .venv/bin/python benchmarks/bench_measure_overhead.py [--model alexnet] [--rounds 3]
        [--duration 3] [--warmup 1] [--iterations 10] [--json F]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

from jetbench.hw.fs import Root
from jetbench.run.measure import measure
from jetbench.run.request import MeasureRequest
from jetbench.sim.create import create_board


def one_run(model: str, iterations: int, duration_s: float, warmup_s: float) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="jetbench-bench-") as tmp:
        base = Path(tmp) / "tx1"
        create_board("tx1-r24", base)
        request = MeasureRequest(models=(model,), gpu_freqs=("690MHz",), device="cpu",
                                 iterations=iterations, duration_s=duration_s,
                                 warmup_s=warmup_s, out_dir=Path(tmp) / "out")
        t0 = time.monotonic()
        report = measure(Root(base), request)
        total = time.monotonic() - t0
    doc = report.results[0]
    ph = doc["power"]["phases_s"]
    setup = report.setup_s
    point_setup = ph["timed_start"] - ph["start"]
    return {
        "total_s": total,
        "setup_s": setup,
        "jetbench_s": setup - point_setup,  # detect, journal, pin, read back, sampler start
        "build_s": ph["warmup_start"] - ph["start"],
        "warmup_s": ph["timed_start"] - ph["warmup_start"],
        "timed_s": ph["timed_end"] - ph["timed_start"],
        "after_s": total - setup - (ph["timed_end"] - ph["timed_start"]),
        "images_per_s": doc["throughput"]["images_per_s"],
    }


def torch_import_s() -> float:
    code = "import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip())


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="alexnet")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    runs = [one_run(args.model, args.iterations, args.duration, args.warmup)
            for _ in range(args.rounds)]
    imports = [torch_import_s() for _ in range(3)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"{platform.python_version()} on {platform.machine()}, {args.model} fp32 b1, "
          f"simulated TX1 @ 690 MHz, {args.rounds} rounds (medians)")
    print("| phase | median s | share of the run |")
    print("|---|---|---|")
    for key, name in (("jetbench_s", "jetbench set-up (detect, journal, pin, sampler)"),
                      ("build_s", "model build"), ("warmup_s", "warm-up"),
                      ("setup_s", "**start -> first timed iteration**"),
                      ("timed_s", "timed window"),
                      ("after_s", "after (correlate, restore, write)"),
                      ("total_s", "whole run")):
        print(f"| {name} | {med[key]:.3f} | {med[key] / med['total_s']:.1%} |")
    print(f"| (CLI cold start: `import torch` in a fresh interpreter) | "
          f"{statistics.median(imports):.3f} | - |")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "median": med,
                                         "torch_import_s": imports}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
