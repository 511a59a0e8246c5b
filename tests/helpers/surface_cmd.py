"""A `--cmd` workload whose speed is a random surface's (jetbench/sim/surface.py) at the clocks
the simulated board runs: `python surface_cmd.py --root TREE --seed N [--seconds S]`.

It reads the GPU and EMC clocks from the tree while it runs (the readers measure's own clock
sampler uses), as shares of the GPU table's top and the EMC's max (the CPU at its top: a study
over GPU x EMC), paces its items by deadline at the surface's rate, and prints trtexec's summary
lines (`--throughput-from trtexec`). Its power is the simulated external meter's (the test
reads the same surface)."""

from __future__ import annotations

import argparse
import sys
import time

from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.sim.surface import Surface, running_shares

READ_EVERY_S = 0.005


def main(argv: list) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=0.6)
    ap.add_argument("--warmup", type=float, default=0.1)
    args = ap.parse_args(argv)
    root = Root(args.root)
    board = detect(root)
    surface = Surface.draw(args.seed)
    start = time.perf_counter()
    deadline, read_at, item_s = start, -1.0, 0.0
    timed_from, items = None, 0
    while True:
        now = time.perf_counter()
        if timed_from is None and now - start >= args.warmup:
            timed_from, items = now, 0
        if timed_from is not None and now - timed_from >= args.seconds:
            break
        if now - read_at >= READ_EVERY_S:
            read_at, item_s = now, 1.0 / surface.items_per_s(*running_shares(root, board))
        deadline = max(deadline, now - 0.05) + item_s
        left = deadline - time.perf_counter()
        if left > 0:
            time.sleep(left)
        items += 1
    assert timed_from is not None
    span = time.perf_counter() - timed_from
    print(f"[I] Timing trace has {items} queries over {span:.6f} s", flush=True)
    print(f"[I] Throughput: {items / span:.4f} qps")
    print(f"[I] Total Host Walltime: {span:.6f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
