"""The workload runner against a bare framework loop of the same model, same process, same
threads: `with torch.inference_mode(): for _ in range(n): model(x)`. Target: >= 98% of the bare
loop's throughput. Rounds alternate bare/runner so drift in the machine hits both alike.

    .venv/bin/python benchmarks/bench_runner.py [--models alexnet,googlenet,resnet50]
        [--precisions fp32,bf16,fp16] [--batches 1,16] [--rounds 9] [--seconds 0.5]
        [--budget 20] [--json F]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Any, Dict, List

import torch

from jetbench.workload.base import RunOptions
from jetbench.workload.build import build_workload
from jetbench.workload.timing.plan import TimingPlan
from jetbench.workload.timing.runner import run_timed


def bare_loop(model: Any, x: Any, iterations: int) -> float:
    """images/s of the plainest loop PyTorch allows."""
    with torch.inference_mode():
        start = time.perf_counter()
        for _ in range(iterations):
            model(x)
        wall = time.perf_counter() - start
    return x.shape[0] * iterations / wall


def bench_one(model: str, precision: str, batch: int, rounds: int, seconds: float,
              threads: int, budget_s: float) -> Dict[str, Any]:
    work = build_workload(model, precision, batch, "cpu", options=RunOptions(threads=threads))
    torch.set_num_threads(threads)
    with torch.inference_mode():  # warm both paths and size the iteration count
        work.step()
        start = time.perf_counter()
        work.step()
        one = time.perf_counter() - start
    iterations = max(1, int(seconds / one))
    # many short alternating rounds, median of the paired ratios: robust to a busy machine;
    # slow configurations (fp16 on a CPU) get fewer rounds, never fewer than 3
    rounds = max(3, min(rounds, int(budget_s / (2 * iterations * one))))
    bare: List[float] = []
    runner: List[float] = []
    for _ in range(rounds):
        bare.append(bare_loop(work.module, work.input, iterations))
        result = run_timed(work, TimingPlan(iterations=iterations, duration_s=0, warmup_s=0,
                                            warmup_iterations=0))
        runner.append(result.images_per_s)
    ratios = [r / b for r, b in zip(runner, bare)]
    ratio = statistics.median(ratios)
    return {"model": model, "precision": precision, "batch": batch, "iterations": iterations,
            "rounds": rounds, "bare_images_per_s": statistics.median(bare),
            "runner_images_per_s": statistics.median(runner), "ratio": ratio,
            "ratio_min": min(ratios), "ratio_max": max(ratios)}


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="alexnet,googlenet,resnet50")
    parser.add_argument("--precisions", default="fp32,bf16,fp16")
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=0.5, help="per measurement (min 1 it)")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds per configuration")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = []
    print(f"torch {torch.__version__}, {args.threads} threads, {platform.processor() or '?'}",
          flush=True)
    print(f"{'model':10} {'prec':5} {'batch':>5} {'bare img/s':>11} {'runner img/s':>13} "
          f"{'ratio':>6}", flush=True)
    for model in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            for precision in args.precisions.split(","):
                row = bench_one(model, precision, batch, args.rounds, args.seconds, args.threads,
                                args.budget)
                rows.append(row)
                print(f"{model:10} {precision:5} {batch:5d} {row['bare_images_per_s']:11.2f} "
                      f"{row['runner_images_per_s']:13.2f} {row['ratio']:6.3f}", flush=True)
    worst = min(r["ratio"] for r in rows)
    print(f"worst ratio {worst:.3f} (target >= 0.98)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"torch": torch.__version__, "threads": args.threads, "rows": rows}, fh,
                      indent=2)
    return 0 if worst >= 0.98 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
