"""A black-box workload for `tune --cmd` benchmarks: a command whose speed follows the simulated
board's clocks by a shape of its own, not the simulator's latency model (sim/workload_model.py),
so a search that has learned the simulator's formula learns nothing here.

    python benchmarks/blackbox_cmd.py --root TREE --shape compute|memory|host|smooth \
        [--seconds 0.4] [--warmup 0.1] [--item-ms 5]

Each item takes `item-ms` times the shape's factor at the clocks the board runs when the item
starts (read from the tree with the readers measure's clock sampler uses), relative to each
clock's table top (g, e, c: GPU, EMC, CPU, each 0..1):

    compute   0.9/g + 0.1                    the GPU's clock is all that matters
    memory    0.75/e + 0.25/g                memory-bound: the EMC first, the GPU a little
    host      0.6/c + 0.4/g                  a host thread and a GPU kernel, one after the other
    smooth    ((0.5/g)^3 + (0.45/e)^3 + (0.35/c)^3)^(1/3)
                                             a soft bottleneck: whichever is slowest, blended

and the GPU's `load` file shows the share of each item the GPU is busy (the simulated power
model reads it, as it does a `sim:NAME` network's). Items are paced by deadline, so a busy host
does not slow it. It runs `warmup` s, then `seconds` s timed, and prints trtexec's summary
lines (`--throughput-from trtexec`: the power window is its timed queries only).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Callable, Dict, Tuple

from jetbench.hw.board import detect
from jetbench.hw.clocks.domains import read_clocks
from jetbench.hw.fs import Root
from jetbench.sim import gpu_load
from jetbench.workload.sim_run import FIXED_CPU_GOVERNORS

CLOCK_READ_EVERY_S = 0.005

# (time factor, GPU-busy share) of one item at relative clocks g, e, c
Shape = Callable[[float, float, float], Tuple[float, float]]


def _compute(g: float, e: float, c: float) -> Tuple[float, float]:
    t = 0.9 / g + 0.1
    return t, 0.9 / g / t


def _memory(g: float, e: float, c: float) -> Tuple[float, float]:
    # a memory-bound kernel keeps the GPU busy (stalled on memory) the whole item
    return 0.75 / e + 0.25 / g, 0.95


def _host(g: float, e: float, c: float) -> Tuple[float, float]:
    t = 0.6 / c + 0.4 / g
    return t, 0.4 / g / t


def _smooth(g: float, e: float, c: float) -> Tuple[float, float]:
    parts = (0.5 / g, 0.45 / e, 0.35 / c)
    t = sum(p ** 3 for p in parts) ** (1 / 3)
    return t, min(1.0, parts[0] / t + 0.2)


SHAPES: Dict[str, Shape] = {"compute": _compute, "memory": _memory, "host": _host,
                            "smooth": _smooth}


def main(argv: list) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--seconds", type=float, default=0.4)
    ap.add_argument("--warmup", type=float, default=0.1)
    ap.add_argument("--item-ms", type=float, default=5.0)
    args = ap.parse_args(argv)
    root = Root(args.root)
    board = detect(root)
    shape = SHAPES[args.shape]
    load_file = gpu_load.load_path(root.base, board.gpu.device if board.gpu else None)

    def relative() -> Tuple[float, float, float]:
        """Each clock as a share of its top: the GPU's and CPU's tables, the EMC's max. A CPU
        under a load-following governor runs at its policy's max under load (as a kernel
        would raise it; the simulated kernel does not model that ramp)."""
        now: Dict[str, float] = {}
        top: Dict[str, float] = {"emc": float(board.emc.max_hz)} if board.emc else {}
        for r in read_clocks(root, board):
            if r.available_hz:
                top[r.domain] = max(top.get(r.domain, 0.0), float(max(r.available_hz)))
            hz = r.cur_hz
            if r.domain == "cpu" and r.governor not in FIXED_CPU_GOVERNORS and r.max_hz:
                hz = r.max_hz
            if hz:
                now[r.domain] = max(now.get(r.domain, 0.0), float(hz))
        return tuple(min(1.0, now[d] / top[d]) if now.get(d) and top.get(d) else 1.0
                     for d in ("gpu", "emc", "cpu"))  # type: ignore[return-value]

    read_at, factor, busy_shown = -1.0, (1.0, 1.0), None
    start = time.perf_counter()
    deadline = start
    timed_from, items = None, 0
    try:
        while True:
            now = time.perf_counter()
            if timed_from is None and now - start >= args.warmup:
                timed_from, items = now, 0
            if timed_from is not None and now - timed_from >= args.seconds:
                break
            if now - read_at >= CLOCK_READ_EVERY_S:
                read_at, factor = now, shape(*relative())
                busy = round(factor[1], 3)
                if busy != busy_shown:
                    gpu_load.write_load(load_file, busy)
                    busy_shown = busy
            deadline = max(deadline, now - 0.05) + factor[0] * args.item_ms / 1e3
            left = deadline - time.perf_counter()
            if left > 0:
                time.sleep(left)
            items += 1
        span = time.perf_counter() - timed_from
    finally:
        gpu_load.write_load(load_file, 0.0)
    print(f"[I] Timing trace has {items} queries over {span:.6f} s", flush=True)
    print(f"[I] Throughput: {items / span:.4f} qps")
    print(f"[I] Total Host Walltime: {span:.6f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
