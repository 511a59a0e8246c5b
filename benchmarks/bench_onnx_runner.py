"""The workload runner on an ONNX model against bare ONNX Runtime loops on the same session, same
process, same threads: `session.run(None, feeds)` (the plainest loop) and
`session.run_with_iobinding(binding)` (what the runner's step calls). Target: >= 98% of the bare
loop's throughput. Rounds alternate so drift in the machine hits all alike. The models are
jetbench's own networks exported with torch.onnx (torch is needed here, not by the runner).

    .venv/bin/python benchmarks/bench_onnx_runner.py [--models resnet18,mobilenet_v2]
        [--batches 1,8] [--rounds 7] [--seconds 0.5] [--threads 2] [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

from jetbench.workload.base import RunOptions
from jetbench.workload.build import build_workload
from jetbench.workload.timing.plan import TimingPlan
from jetbench.workload.timing.runner import run_timed


def export(name: str, directory: Path) -> Path:
    import torch

    from jetbench.workload.registry import get_spec

    spec = get_spec(name)
    path = directory / f"{name}.onnx"
    torch.onnx.export(spec.build(0).eval(), (torch.randn(1, *spec.input_shape),), str(path),
                      dynamo=False, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, opset_version=17)
    return path


def rate(loop: Callable[[], None], iterations: int, batch: int) -> float:
    start = time.perf_counter()
    for _ in range(iterations):
        loop()
    return batch * iterations / (time.perf_counter() - start)


def bench_one(path: Path, batch: int, rounds: int, seconds: float, threads: int
              ) -> Dict[str, Any]:
    import onnxruntime as ort

    work = build_workload(str(path), "fp32", batch, "cpu", options=RunOptions(threads=threads))
    session, x = work.module, work.input
    feeds = {"x": x}
    binding = session.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output("y", "cpu", 0)
    plain: Callable[[], None] = lambda: session.run(None, feeds)  # noqa: E731
    bound: Callable[[], None] = lambda: session.run_with_iobinding(binding)  # noqa: E731
    for _ in range(3):
        plain(), bound(), work.step()
    start = time.perf_counter()
    work.step()
    iterations = max(3, int(seconds / (time.perf_counter() - start)))
    out: Dict[str, List[float]] = {"run": [], "iobinding": [], "runner": []}
    for _ in range(rounds):
        out["run"].append(rate(plain, iterations, batch))
        out["iobinding"].append(rate(bound, iterations, batch))
        out["runner"].append(run_timed(work, TimingPlan(iterations=iterations, duration_s=0,
                                                        warmup_s=0,
                                                        warmup_iterations=0)).images_per_s)
    med = {k: statistics.median(v) for k, v in out.items()}
    return {"model": path.stem, "batch": batch, "iterations": iterations, "rounds": rounds,
            "onnxruntime": ort.__version__, **{f"{k}_images_per_s": v for k, v in med.items()},
            "runner_over_run": statistics.median(
                r / b for r, b in zip(out["runner"], out["run"])),
            "runner_over_iobinding": statistics.median(
                r / b for r, b in zip(out["runner"], out["iobinding"]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            path = export(name, Path(tmp))
            for batch in map(int, args.batches.split(",")):
                row = bench_one(path, batch, args.rounds, args.seconds, args.threads)
                rows.append(row)
                print(f"{row['model']:14s} b{batch:<3d} run {row['run_images_per_s']:8.1f}  "
                      f"iobinding {row['iobinding_images_per_s']:8.1f}  runner "
                      f"{row['runner_images_per_s']:8.1f} img/s  runner/run "
                      f"{row['runner_over_run']:.3f}  runner/iobinding "
                      f"{row['runner_over_iobinding']:.3f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"python": sys.version.split()[0], "rows": rows},
                                        indent=1))


if __name__ == "__main__":
    main()
