"""CLI start-up: `jetbench --help` and `jetbench info` against `python -c pass`, side by side.

Target (docs/design.md): `jetbench --help` under 0.3 s. Runs are interleaved (pass, help, info,
pass, ...) so machine noise hits all three alike; medians and ratios are printed.

    .venv/bin/python benchmarks/bench_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _time(cmd, env) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    from jetbench.sim.create import create_board

    board = os.path.join(tempfile.mkdtemp(), "tx1")
    create_board("tx1", board)
    env = dict(os.environ)
    py = sys.executable
    cmds = {
        "python -c pass": [py, "-c", "pass"],
        "jetbench --help": [py, "-m", "jetbench.cli.main", "--help"],
        "jetbench info": [py, "-m", "jetbench.cli.main", "--root", board, "info"],
    }
    times = {name: [] for name in cmds}
    for cmd in cmds.values():  # warm the page cache
        _time(cmd, env)
    for _ in range(args.runs):
        for name, cmd in cmds.items():
            times[name].append(_time(cmd, env))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':18} {'median s':>9} {'min s':>7} {'x python':>9}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:18} {med:9.3f} {min(values):7.3f} {med / base:9.2f}")
    probe = subprocess.run(
        [py, "-c", "import sys\nfrom jetbench.cli.main import app\ntry:\n app(['--help'])\n"
         "except SystemExit:\n pass\nprint(sorted(m for m in ('torch','matplotlib','numpy',"
         "'serial') if m in sys.modules))"],
        capture_output=True, text=True, check=True)
    print("heavy modules imported by --help:", probe.stdout.strip().splitlines()[-1])
    help_s = statistics.median(times["jetbench --help"])
    print(f"target --help < 0.300 s: {'met' if help_s < 0.3 else 'NOT met'} ({help_s:.3f} s)")


if __name__ == "__main__":
    main()
