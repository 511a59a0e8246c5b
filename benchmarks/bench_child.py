"""--workload-python's child against the in-process runner: the same network, precision, batch
and timing rule, timed in this process (`run_timed`) and in a child under an interpreter
(`run_in_child`, this one by default). Rounds alternate so drift in the machine hits both alike;
the figure is the median of the per-round ratios child/in-process img/s (the pipe protocol is
outside the timed loop, so the target is the runner's own: >= 0.98). Also: the child's start
(interpreter, torch import, network build) until its first warm-up progress line (0.1 s in).

    .venv/bin/python benchmarks/bench_child.py [--python PATH] [--models alexnet,resnet18]
        [--rounds 5] [--seconds 2] [--json F]
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

from jetbench.workload.build import build_workload
from jetbench.workload.child.parent import ChildWorkload, run_in_child
from jetbench.workload.timing.plan import TimingPlan
from jetbench.workload.timing.runner import run_timed


def bench_one(python: str, model: str, rounds: int, seconds: float) -> Dict[str, Any]:
    inproc: List[float] = []
    child: List[float] = []
    start_s: List[float] = []
    for _ in range(rounds):
        work = build_workload(model, "fp32", 1, "cpu")
        inproc.append(run_timed(work, TimingPlan(iterations=1, duration_s=seconds, warmup_s=0.5))
                      .images_per_s)
        del work
        t0 = time.monotonic()
        marks: Dict[str, float] = {}

        def first_progress(phase: str, fraction: float, marks: Dict[str, float] = marks) -> None:
            marks.setdefault("ready", time.monotonic())

        result = run_in_child(ChildWorkload(python, model, device="cpu"), TimingPlan(iterations=1,
                                                                                     duration_s=seconds,
                                                                                     warmup_s=0.5,
                                                                                     progress=first_progress))
        child.append(result.images_per_s)
        start_s.append(marks.get("ready", time.monotonic()) - t0)
    ratios = [c / i for c, i in zip(child, inproc)]
    return {"model": model, "rounds": rounds, "in_process_images_per_s": statistics.median(inproc),
            "child_images_per_s": statistics.median(child), "ratio": statistics.median(ratios),
            "ratio_min": min(ratios), "ratio_max": max(ratios),
            "child_start_s": statistics.median(start_s)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--models", default="alexnet,resnet18")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = [bench_one(args.python, m, args.rounds, args.seconds)
            for m in args.models.split(",")]
    print(f"# python {platform.python_version()}, torch {torch.__version__}, child {args.python}")
    print("| model | in-process img/s | child img/s | child / in-process (min-max) "
          "| child start to warm-up s |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['in_process_images_per_s']:.2f} | "
              f"{r['child_images_per_s']:.2f} | {r['ratio']:.3f} ({r['ratio_min']:.3f}-"
              f"{r['ratio_max']:.3f}) | {r['child_start_s']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
