"""Scaling of `jetbench measure --devices`: 1 rank against 2 ranks, the same per-rank config
(one CPU core and one thread per rank on a CPU-only machine), interleaved repeats, on a
simulated TX1 at 690 MHz (power SIMULATED; img/s is this machine's CPU).

Reports, per repeat and as median [min..max]:
  - img/s of 1 rank and of 2 ranks, and efficiency = 2-rank img/s / (2 x 1-rank img/s)
  - the in-run --scaling efficiency (rank 0's baseline alone, then both ranks)
  - the per-rank cost of keeping ranks in step, against the power window: the barrier that
    releases the ranks once rank 0 has opened the window and the end barrier (both inside the
    window; the end one is mostly waiting for the slowest rank's last iteration), and rank 0's
    gather of the rows (after the window closed), in ms and as a share of the window

    PYTHONPATH=agent .venv/bin/python benchmarks/bench_scaling.py [--model alexnet]
        [--repeats 5] [--duration 3] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Sequence

from jetbench.sim.create import create_board


def run(base: Path, out: Path, ranks: int, args: argparse.Namespace) -> Dict[str, Any]:
    """One `measure --devices N` in a fresh launcher; a 1-rank run is held to one core so each
    rank has the same share as in the 2-rank run."""
    cores = sorted(os.sched_getaffinity(0))
    share = set(cores[:len(cores) // 2]) if ranks == 1 else set(cores)
    cmd = [sys.executable, "-m", "jetbench", "--root", str(base), "measure",
           "--model", args.model, "--device", "cpu", "--freq", "690MHz",
           "--iterations", "10", "--duration", str(args.duration), "--warmup", "1",
           "--devices", str(ranks), "--out", str(out), "--json"]
    if ranks > 1:
        cmd.append("--scaling")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          preexec_fn=lambda: os.sched_setaffinity(0, share))
    if proc.returncode not in (0, 3):  # 3: marked invalid (a loaded machine), still measured
        raise SystemExit(f"measure --devices {ranks} failed:\n{proc.stderr}")
    return json.loads(proc.stdout)["results"][0]


def spread(values: Sequence[float], fmt: str = "{:.3g}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))}..{fmt.format(max(values))}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="alexnet")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows: List[Dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="jetbench-bench-") as tmp:
        base = Path(tmp) / "tx1"
        create_board("tx1", base)
        for k in range(args.repeats):
            order = (1, 2) if k % 2 == 0 else (2, 1)  # interleaved, alternating which goes first
            docs = {n: run(base, Path(tmp) / "out", n, args) for n in order}
            one, two = docs[1], docs[2]
            window = two["power"]["window"]["duration_s"]
            ips1 = one["throughput"]["images_per_s"]
            ips2 = two["throughput"]["images_per_s"]
            row = {"repeat": k, "first": order[0], "ips_1": ips1, "ips_2": ips2,
                   "efficiency": ips2 / (2 * ips1),
                   "in_run_efficiency": two["scaling"]["efficiency"],
                   "window_s": window, "gather_ms": 1e3 * two["distributed"]["gather_s"],
                   "open_barrier_ms": [1e3 * d["sync_s"]["open_barrier"]
                                       for d in two["devices"]],
                   "end_barrier_ms": [1e3 * d["sync_s"]["end_barrier"] for d in two["devices"]],
                   "valid": [one["validity"]["valid"], two["validity"]["valid"]],
                   "loadavg_1min": os.getloadavg()[0]}  # the machine is shared: say how busy
            row["overhead_share"] = [(o + b + row["gather_ms"]) / 1e3 / window
                                     for o, b in zip(row["open_barrier_ms"],
                                                     row["end_barrier_ms"])]
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, "
                   f"python {platform.python_version()}",
        "model": args.model, "duration_s": args.duration, "repeats": args.repeats,
        "ips_1": spread([r["ips_1"] for r in rows]),
        "ips_2": spread([r["ips_2"] for r in rows]),
        "efficiency": spread([r["efficiency"] for r in rows], "{:.1%}"),
        "in_run_efficiency": spread([r["in_run_efficiency"] for r in rows], "{:.1%}"),
        "open_barrier_ms": spread([b for r in rows for b in r["open_barrier_ms"]]),
        "end_barrier_ms": spread([b for r in rows for b in r["end_barrier_ms"]]),
        "gather_ms": spread([r["gather_ms"] for r in rows]),
        "overhead_share": spread([s for r in rows for s in r["overhead_share"]], "{:.2%}"),
        "loadavg_1min": spread([r["loadavg_1min"] for r in rows], "{:.1f}"),
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
