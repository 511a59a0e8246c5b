"""Simulated networks on a busy host (issue 41): does `sim:NAME` keep its modelled speed, and
does a sweep find the same efficiency peak, with CPU burners beside it?

Side by side in one run, interleaved: each round measures once on the machine as it is ("as
is") and once beside BURNERS processes spinning `while 1: pass` ("burners"), in alternating
order. Per round and condition:

- the demo's two points (TX1, sim:alexnet batch 1 at 690 MHz -> 691.2 MHz, fp32 and fp16):
  measured img/s over the latency model's own figure at the clocks that ran (1.000 = the
  model's speed);
- a sweep of sim:alexnet fp16 batch 1 over every GPU clock of the TX1: the clock of the
  highest img/s/W, beside the model's own peak (latency model x power model, no measurement).

    .venv/bin/python benchmarks/bench_sim_pacing.py [--rounds 3] [--burners 4] [--duration 2]

Prints the load average at start and end, each round's figures, and the median (min..max)
per condition.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

from jetbench.hw.fs import Root
from jetbench.run.demo import demo_request, run_demo
from jetbench.run.request import MeasureRequest
from jetbench.run.sweep import sweep
from jetbench.sim import boards
from jetbench.sim.create import create_board
from jetbench.sim.power_model import ClockState, component_powers_w
from jetbench.sim.workload_model import FAMILIES, Clocks, NetworkCost, batch_time
from jetbench.workload.registry import get_spec


def model_ips(precision: str, gpu_hz: float, emc_hz: float, cpu_hz: float) -> float:
    spec = get_spec("alexnet")
    cost = NetworkCost(spec.macs_per_image, spec.params, spec.activation_elems_per_image)
    return 1.0 / batch_time(FAMILIES["tx1"], cost, precision, 1,
                            Clocks(gpu_hz, emc_hz, cpu_hz)).total_s


def model_peak_hz() -> float:
    """The GPU clock of the most img/s per module watt by the two models alone (no
    measurement; the carrier's constant watts left out)."""
    b = boards.get("tx1")
    emc, cpu = b.emc_freqs_hz[-1], b.clusters[0].freqs_khz[-1] * 1000.0
    spec = get_spec("alexnet")
    cost = NetworkCost(spec.macs_per_image, spec.params, spec.activation_elems_per_image)
    best = (0.0, 0.0)
    for g in b.gpu_freqs_hz:
        t = batch_time(FAMILIES["tx1"], cost, "fp16", 1, Clocks(g, emc, cpu))
        clocks = ClockState(g, b.gpu_freqs_hz, cpu, [f * 1000 for f in b.clusters[0].freqs_khz],
                            1.0, emc, emc)
        watts = sum(w for name, w in component_powers_w(b.soc, clocks, 0.0, t.gpu_busy).items()
                    if name != "carrier")
        best = max(best, (1.0 / t.total_s / watts, g))
    return best[1]


def demo_ratios(work: Path, duration_s: float) -> Dict[str, float]:
    out = work / "demo"
    result = run_demo(out, request=demo_request(out, duration_s=duration_s, iterations=3,
                                                warmup_s=0.5, idle_s=0.1))
    ratios = {}
    for doc in result.report.results:
        clocks = {c["domain"]: c["mean_hz"] for c in doc["clocks"]["observed"]
                  if c.get("mean_hz")}
        want = model_ips(doc["workload"]["precision"], clocks["gpu"], clocks["emc"],
                         max(v for k, v in clocks.items() if k.startswith("cpu")))
        ratios[doc["workload"]["precision"]] = doc["throughput"]["images_per_s"] / want
    return ratios


def sweep_peak_hz(work: Path, duration_s: float) -> float:
    base = work / "tx1"
    create_board("tx1", base)
    request = MeasureRequest(models=("sim:alexnet",), precisions=("fp16",), batches=(1,),
                             iterations=3, duration_s=duration_s, warmup_s=0.3,
                             out_dir=work / "sweep")
    report = sweep(Root(base), request, "all")
    ok = [d for d in report.results if d.get("status") == "ok"
          and (d.get("efficiency") or {}).get("images_per_j")]
    best = max(ok, key=lambda d: d["efficiency"]["images_per_j"])
    return float(best["settings"]["resolved"]["gpu_hz"])


def one(condition: str, burners: int, duration_s: float) -> Tuple[Dict[str, float], float]:
    procs: List[subprocess.Popen] = []
    if condition == "burners":
        procs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"])
                 for _ in range(burners)]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-pacing-") as tmp:
            return demo_ratios(Path(tmp), duration_s), sweep_peak_hz(Path(tmp), duration_s / 2)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def spread(values: List[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}..{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--burners", type=int, default=4)
    parser.add_argument("--duration", type=float, default=2.0, help="demo window, s")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}; model peak {model_peak_hz() / 1e6:g} MHz")
    got: Dict[str, List[Tuple[Dict[str, float], float]]] = {"as is": [], "burners": []}
    for r in range(args.rounds):
        order = ["as is", "burners"] if r % 2 == 0 else ["burners", "as is"]
        for condition in order:
            t0 = time.monotonic()
            ratios, peak = one(condition, args.burners, args.duration)
            got[condition].append((ratios, peak))
            print(f"round {r + 1} {condition:8}: fp32 {ratios['fp32']:.3f} fp16 "
                  f"{ratios['fp16']:.3f} of the model; sweep peak {peak / 1e6:g} MHz "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
    for condition, rows in got.items():
        print(f"{condition:8}: fp32 {spread([r[0]['fp32'] for r in rows])}, fp16 "
              f"{spread([r[0]['fp16'] for r in rows])} of the model; sweep peaks "
              f"{sorted({r[1] / 1e6 for r in rows})} MHz")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
