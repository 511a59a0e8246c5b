"""`tune` on random surfaces end to end (issue 62's "done when"): each surface measured through
`--cmd` (tests/helpers/surface_cmd.py, paced at the surface's rate at the clocks the simulated
board runs) and a simulated external SCPI meter (the surface's watts at those clocks), GPU x
EMC in 8 trials under a floor that binds, on simulated TX1 and Xavier NX boards; the gap of
tune's answer to the exact optimum of the surface's formulas over the space tune searched.

The floor is drawn per seed FLOOR_SHARE of the way from the unconstrained optimum's rate to the
fastest point's and moved to a gap between the space's rates CLEAR_PCT clear of every point
(a one-second window's count is off by about 1%: no point sits in that noise at the floor); a
surface with no such gap is passed over. The space is tune's (the EMC's rates as probed).

    python benchmarks/bench_tune_surfaces_cmd.py [--boards tx1,xavier-nx] [--first 3000]
        [--seeds 8]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.sim.create import create_board
from jetbench.sim.meters import ScpiSim
from jetbench.sim.surface import Surface, binding_floor, optimum, running_shares, shares

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=f"{REPO / 'agent'}{os.pathsep}{REPO / 'tests'}")
HELPER = REPO / "tests/helpers/surface_cmd.py"
CLEAR_PCT = 3.0
BUDGET = 8


def one(board_key: str, seed: int, tmp: Path, space: Dict[str, List[int]]) -> dict:
    surface = Surface.draw(seed)
    share = random.Random(seed).uniform(0.1, 0.85)
    floor = binding_floor(surface, space, share, CLEAR_PCT)
    if floor is None:
        return {"seed": seed, "skipped": "no floor clear of every point"}
    base = tmp / f"{board_key}-{seed}"
    create_board(board_key, base)
    root = Root(str(base))
    board = detect(root)
    best = optimum(surface, space, floor)
    assert best is not None
    out = tmp / f"out-{board_key}-{seed}"
    t0 = time.monotonic()
    with ScpiSim(lambda _t: surface.power_w(*running_shares(root, board), 1.0)) as meter:
        done = subprocess.run(
            [sys.executable, "-m", "jetbench", "--root", str(base), "tune",
             "--cmd", f"{sys.executable} {HELPER} --root {base} --seed {seed} --seconds 1.0",
             "--throughput-from", "trtexec", "--meter", meter.spec + "?timeout=5s",
             "--duration", "1.0", "--warmup", "0.1", "--knobs", "gpu,emc", "--budget",
             str(BUDGET), "--seed", str(seed), "--constraint", f"items_per_s>={floor:.6g}",
             "--out", str(out), "--no-plot"], capture_output=True, text=True, env=ENV,
            timeout=900)
    if done.returncode != 0:
        return {"seed": seed, "failed": done.stderr[-400:]}
    doc = json.loads((out / "tune.json").read_text())
    answer = doc["best"]["settings"]
    at = shares(space, answer)
    under = surface.items_per_s(*at) < floor
    gap = 1.0 if under else 1 - surface.items_per_j(*at) / best.items_per_j
    return {"seed": seed, "gap": gap, "under": under, "answer": answer,
            "best": best.settings, "seconds": time.monotonic() - t0,
            "trials": sum(t["state"] == "COMPLETE" for t in doc["trials"])}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boards", default="tx1,xavier-nx")
    ap.add_argument("--first", type=int, default=3000)
    ap.add_argument("--seeds", type=int, default=8, help="Surfaces run per board (those with "
                    "no clear floor passed over).")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_tune_surfaces import spaces

    boards = args.boards.split(",")
    tables = spaces(boards)  # as tune finds them: the EMC's rates probed
    with tempfile.TemporaryDirectory() as tmp:
        for key in boards:
            space = {k: list(tables[key][k]) for k in ("gpu", "emc")}
            rows: List[dict] = []
            seed = args.first
            while sum("gap" in r for r in rows) < args.seeds and seed < args.first + 20 * \
                    args.seeds:
                r = one(key, seed, Path(tmp), space)
                seed += 1
                if "skipped" in r:
                    continue
                rows.append(r)
                if "gap" in r:
                    print(f"{key} seed {seed}: gap {100 * r['gap']:.1f}%"
                          f"{' (under the floor)' if r['under'] else ''}, {r['trials']} trials,"
                          f" {r['seconds']:.0f} s; answer {r['answer']}, best {r['best']}",
                          flush=True)
                else:
                    print(f"{key} seed {seed}: {r.get('skipped') or r.get('failed')}",
                          flush=True)
            gaps = [r["gap"] for r in rows if "gap" in r]
            if gaps:
                print(f"{key}, GPU x EMC, {BUDGET} trials, {len(gaps)} surfaces through --cmd "
                      f"and a meter: gap median {100 * statistics.median(gaps):.1f}%, worst "
                      f"{100 * max(gaps):.1f}%, under the floor "
                      f"{sum(r['under'] for r in rows if 'gap' in r)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
