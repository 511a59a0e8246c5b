"""The output check before a `--runtime` row is timed (workload/runtimes/output_check.py): the whole
check, the runtime's forward pass included, with the CPU reference on the batch's first
`SAMPLES` samples (now) against the reference on the whole batch (before 2026-11-26: set
`SAMPLES` to the batch, which is exactly the old code path). Same built workload, same process,
calls interleaved so machine drift hits both alike; medians, spread and their ratio.

    .venv/bin/python benchmarks/bench_output_check.py [--model resnet18] [--runtime onnxruntime]
        [--batch 64] [--rounds 5] [--json F]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Dict, List

import torch

from jetbench.workload.base import RunOptions
from jetbench.workload.build import build_workload
from jetbench.workload.runtimes import output_check


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--runtime", default="onnxruntime")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.batch <= output_check.SAMPLES:
        ap.error(f"--batch must be above SAMPLES ({output_check.SAMPLES}) to compare anything")
    work = build_workload(args.model, "fp32", args.batch, "cpu",
                          options=RunOptions(runtime=args.runtime))  # checked once here
    ways = {"first SAMPLES": output_check.SAMPLES, "whole batch": args.batch}
    times: Dict[str, List[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, samples in ways.items():
            output_check.SAMPLES = samples
            t0 = time.perf_counter()
            doc = output_check.check_outputs(work, args.runtime, 0)
            times[name].append(time.perf_counter() - t0)
            assert doc["checked"] and doc["samples_compared"] == samples, doc
    med = {name: statistics.median(v) for name, v in times.items()}
    print(f"{platform.python_version()} on {platform.machine()}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), {args.model} fp32 b{args.batch} under "
          f"{args.runtime}, {args.rounds} interleaved rounds")
    print("| reference on | samples | median s | min-max s |")
    print("|---|---|---|---|")
    for name, samples in ways.items():
        print(f"| {name} | {samples} | {med[name]:.3f} | "
              f"{min(times[name]):.3f}-{max(times[name]):.3f} |")
    ratio = med["whole batch"] / med["first SAMPLES"]
    print(f"whole batch / first SAMPLES: {ratio:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"times_s": times, "medians_s": med, "ratio": ratio}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
