"""`make bench`: every benchmark in this folder, one after another, with its own defaults.

Each prints its ratios (measured side by side, interleaved repeats, spread); record the figures
in RESULTS.md only from a run on an idle machine. Exit status: the number of benchmarks that
failed (0: all ran)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list) -> int:
    only = set(argv)  # `run_all.py bench_startup bench_sampler` runs just those
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        if only and script.stem not in only:
            continue
        print(f"== {script.name}", flush=True)
        t0 = time.monotonic()
        code = subprocess.call([sys.executable, str(script)])
        print(f"== {script.name}: exit {code} after {time.monotonic() - t0:.0f} s", flush=True)
        if code:
            failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return len(failed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
