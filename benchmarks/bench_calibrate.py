"""Wall energy from the board's own sensors (issue 58): on simulated boards with a simulated
carrier and supply (sim/wall.py) and a simulated wall meter reading them, calibrate once
(`--plan quick`, at most three runs), then measure held-out workloads and clocks the plan never
ran (other networks, batches, precisions, GPU and EMC clocks) with the meter attached as well,
and compare the calibrated wall figure (from the board's sensors alone) with the meter's.

Reports, per board and carrier: the runs the calibration took, its model and held-out residual,
then over every held-out case: the error's p95 (|calibrated - meter| / meter), and the coverage
of the stated 95% interval (u95_pct: the calibration's residual, the sensor's and the meter's)
and of its calibration-only part (residual and meter, without the sensor's datasheet limits).

    .venv/bin/python benchmarks/bench_calibrate.py [--window 4] [--duration 2] [--warmup 1.5]
Everything here is simulated.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "agent"))

from jetbench.hw.fs import Root  # noqa: E402
from jetbench.run.calibrate import CalibrateRequest, calibrate  # noqa: E402
from jetbench.run.measure import measure  # noqa: E402
from jetbench.run.request import MeasureRequest  # noqa: E402
from jetbench.sampling.calibration_fit import u95_pct  # noqa: E402
from jetbench.sim.create import create_board  # noqa: E402
from jetbench.sim.wall import CARRIERS, wall_meter  # noqa: E402
from jetbench.units import MAX  # noqa: E402

# (network, precision, batch, GPU clock index into the table or MAX, EMC): none is a plan point
# (the plan runs sim:alexnet fp32 b16 at the lowest, middle and highest GPU clock)
HELD_OUT = (
    ("sim:resnet18", "fp32", 1, 1, None),
    ("sim:resnet18", "fp16", 8, -2, None),
    ("sim:mobilenet_v2", "fp32", 32, 2, None),
    ("sim:mobilenet_v2", "fp16", 4, -3, None),
    ("sim:alexnet", "fp16", 1, 3, None),
    ("sim:alexnet", "fp32", 64, MAX, "min"),
    ("sim:vgg16", "fp16", 2, -2, None),
    ("sim:resnet50", "fp32", 8, 1, None),
)


def _gpu_table(base: Path) -> list:
    from jetbench.hw.board import detect
    from jetbench.hw.clocks.domains import read_clocks

    root = Root(str(base))
    gpu = next(c for c in read_clocks(root, detect(root)) if c.domain == "gpu")
    return sorted(f for f in gpu.available_hz if gpu.max_hz is None or f <= gpu.max_hz)


def run_board(key: str, carrier: str, window_s: float, duration_s: float, warmup_s: float,
              tmp: Path) -> dict:
    base = tmp / f"{key}-{carrier}"
    create_board(key, base)
    root = Root(str(base))
    wall, meter = wall_meter(base, "wt310", carrier=CARRIERS[carrier])
    rows = []
    with meter:
        spec = meter.spec + "?timeout=5s"
        t0 = time.monotonic()
        rep = calibrate(root, CalibrateRequest(meter=spec, plan="quick", window_s=window_s,
                                               label=carrier))
        cal_s = time.monotonic() - t0
        cal = rep.calibration
        table = _gpu_table(base)
        for model, precision, batch, gpu, emc in HELD_OUT:
            freq = gpu if gpu is MAX else table[gpu]
            res = measure(root, MeasureRequest(
                models=(model,), precisions=(precision,), batches=(batch,), gpu_freqs=(freq,),
                emc_freq=emc, meters=("auto", spec), duration_s=duration_s, warmup_s=warmup_s,
                iterations=1))
            doc = res.results[0]
            figure = doc["power"].get("wall") or {}
            metered = [t for t in doc["power"]["totals"] if t["scope"] == "wall"][0]
            if figure.get("mean_w") is None:
                rows.append({"case": f"{model} {precision} b{batch}", "refused":
                             figure.get("refused")})
                continue
            err = 100.0 * (figure["mean_w"] - metered["mean_w"]) / metered["mean_w"]
            res_pct = cal["residual"]
            cal_only = u95_pct(res_pct["heldout_rms_pct"], *[p for p in
                                                            (res_pct.get("meter_pct"),) if p])
            rows.append({"case": f"{model} {precision} b{batch} gpu={freq} emc={emc}",
                         "board_w": figure["from_w"], "meter_w": metered["mean_w"],
                         "wall_w": figure["mean_w"], "err_pct": err,
                         "u95_pct": figure["u95_pct"], "cal_only_u95_pct": cal_only})
    wall.stop()
    return {"board": key, "carrier": carrier, "runs": len(cal["runs"]), "calibrate_s": cal_s,
            "model": cal["model"]["kind"], "lag_s": cal["lag_s"], "range_w": cal["range_w"],
            "residual_rms_pct": cal["residual"]["heldout_rms_pct"], "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=float, default=4.0, help="each calibration run's window")
    ap.add_argument("--duration", type=float, default=2.0, help="each held-out window")
    ap.add_argument("--warmup", type=float, default=1.5,
                    help="each held-out warm-up: longer than the meter's lag (~0.5 s), so "
                    "the meter's late window still sees the load, not the pin before it")
    ap.add_argument("--boards", default="orin-nano,tx1")
    args = ap.parse_args()
    errs, covered, covered_cal, refused = [], 0, 0, 0
    with tempfile.TemporaryDirectory(prefix="jetbench-bench-cal-") as tmp:
        for key in args.boards.split(","):
            for carrier in CARRIERS:
                r = run_board(key, carrier, args.window, args.duration, args.warmup, Path(tmp))
                print(f"\n{key} on {carrier}: {r['runs']} runs in {r['calibrate_s']:.0f} s, "
                      f"{r['model']}, lag {r['lag_s']:.2f} s, range "
                      f"{r['range_w'][0]:.2f}-{r['range_w'][1]:.2f} W, held-out residual "
                      f"{r['residual_rms_pct']:.3f}% RMS")
                for row in r["rows"]:
                    if "refused" in row:
                        refused += 1
                        print(f"  {row['case']}: refused: {row['refused']}")
                        continue
                    errs.append(abs(row["err_pct"]))
                    covered += abs(row["err_pct"]) <= row["u95_pct"]
                    covered_cal += abs(row["err_pct"]) <= row["cal_only_u95_pct"]
                    print(f"  {row['case']}: board {row['board_w']:.2f} W, meter "
                          f"{row['meter_w']:.3f} W, calibrated {row['wall_w']:.3f} W, error "
                          f"{row['err_pct']:+.3f}% (u95 {row['u95_pct']:.2f}%, calibration "
                          f"only {row['cal_only_u95_pct']:.2f}%)")
    n = len(errs)
    print(f"\nheld-out cases: {n} (+{refused} refused as outside the range)")
    if n:
        print(f"|error| p95 {np.percentile(errs, 95):.3f}%, max {max(errs):.3f}%, "
              f"mean {np.mean(errs):.3f}%")
        print(f"coverage of the stated 95% interval: {covered}/{n} = {covered / n:.0%}; "
              f"of its calibration-only part: {covered_cal}/{n} = {covered_cal / n:.0%}")


if __name__ == "__main__":
    main()
