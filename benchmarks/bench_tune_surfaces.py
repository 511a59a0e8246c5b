"""`tune`'s search on random workload surfaces it has never seen (issue 62), against each
surface's exact optimum, fast: the search reads the surface's formulas (jetbench/sim/surface.py)
instead of measuring windows, so hundreds of studies run in minutes.

Each seed draws a surface (speed and power from formulas tune cannot see) and a throughput
floor that binds (the unconstrained optimum misses it), moved to the nearest gap in the space's
rates that leaves every point CLEAR_PCT off it (no point sits in a reading's noise at the
floor); a seed whose space has no such gap is passed over (said). A reading is the formula
times a little noise (RATE_SD_PCT, POWER_SD_PCT), with no stated uncertainty: what a `--cmd`
(its rate from its own lines) and an external SCPI meter with no published accuracy give.

Searchers, each on the same surfaces and readings:
  tune   jetbench's own search (run/tune/search.Study), every phase as `tune` runs it, the
         measurement replaced by a reading of the surface
  tpe    Optuna's multivariate TPE alone, its constraint from the trial, the answer the best
         feasible reading
  gp     Optuna's GPSampler alone (constrained), likewise

The gap is 1 - items/J(answer) / items/J(optimum), both exact; an answer whose exact rate is
under the floor counts as under the floor and as a 100% gap.

    python benchmarks/bench_tune_surfaces.py [--boards tx1,xavier-nx] [--seeds 50]
        [--settings 'gpu,emc:8;gpu,emc,cpu:25'] [--searchers tune,tpe,gp] [--first N]
        [--jobs 2] [--show N] [--trace SEED]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

RATE_SD_PCT = 0.02  # a reading's rate noise (one standard deviation): rates exact enough
POWER_SD_PCT = 0.3  # a reading's power noise
CLEAR_PCT = 0.1  # no point's exact rate within this of the floor (5 of its noise)
SEED_OFFSET = {"gpu,emc": 0, "gpu,emc,cpu": 100_000}  # another surface per setting

Space = Dict[str, List[int]]


@dataclasses.dataclass(frozen=True)
class Case:
    board: str
    knobs: str
    budget: int
    seed: int  # the surface's seed
    floor: float
    best_ipj: float
    best: Dict[str, int]
    feasible: int
    size: int


@dataclasses.dataclass(frozen=True)
class Outcome:
    searcher: str
    case: Case
    gap_pct: float
    under: bool
    trials: int  # readings taken (points known to miss are not read)
    answer: Optional[Dict[str, int]]
    seconds: float


def spaces(boards: Sequence[str]) -> Dict[str, Space]:
    """Each board's GPU, EMC and CPU tables as tune finds them on its simulated tree."""
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.run.tune.space import probe_emc_rates, search_space
    from jetbench.sim.create import create_board

    out = {}
    for name in boards:
        with tempfile.TemporaryDirectory() as tmp:
            create_board(name, Path(tmp) / "b")
            root = Root(str(Path(tmp) / "b"))
            space = search_space(root, detect(root), ("gpu", "emc", "cpu"), False)
            space["emc"] = probe_emc_rates(root, space["emc"], False)
            out[name] = space
    return out


def cases(board: str, space: Space, knobs: str, budget: int, seeds: int, first: int = 0
          ) -> Tuple[List[Case], int]:
    """`seeds` surfaces with a clear binding floor on this board and knobs; how many drawn
    were passed over (no such floor)."""
    from jetbench.sim.surface import Surface, binding_floor, optimum

    sub = {k: space[k] for k in knobs.split(",")}
    size = math.prod(len(v) for v in sub.values())
    out: List[Case] = []
    seed, skipped = SEED_OFFSET[knobs] + first, 0
    while len(out) < seeds:
        surface = Surface.draw(seed)
        share = random.Random(f"floor-{seed}").uniform(0.1, 0.85)
        floor = binding_floor(surface, sub, share, CLEAR_PCT)
        best = optimum(surface, sub, floor) if floor is not None else None
        if floor is None or best is None:
            skipped += 1
        else:
            out.append(Case(board, knobs, budget, seed, floor, best.items_per_j,
                            best.settings, best.feasible, size))
        seed += 1
    return out, skipped


class _Reading:
    """A surface's figures at a point, with a reading's noise (deterministic per seed)."""

    def __init__(self, case: Case, space: Space, log: Optional[Callable[[str], None]] = None):
        from jetbench.sim.surface import Surface

        self.surface = Surface.draw(case.seed)
        self.space = {k: space[k] for k in case.knobs.split(",")}
        self.rng = random.Random(f"noise-{case.seed}")
        self.count = 0
        self.floor, self.log = case.floor, log

    def __call__(self, settings: Dict[str, object]) -> Tuple[float, float]:
        from jetbench.sim.surface import shares

        at = shares(self.space, settings)
        self.count += 1
        rate = self.surface.items_per_s(*at) * (1 + self.rng.gauss(0, RATE_SD_PCT / 100))
        power = self.surface.power_w(*at) * (1 + self.rng.gauss(0, POWER_SD_PCT / 100))
        if self.log:
            clocks = {k: v for k, v in settings.items() if k.endswith("_hz")}
            self.log(f"  read {self.count}: {_mhz(clocks)}: {rate:.4g}/s "  # type: ignore[arg-type]
                     f"({'meets' if rate >= self.floor else 'misses'}), {rate / power:.4g}/J")
        return rate, power


def _doc(rate: float, power: float) -> Dict[str, object]:
    """A result as measure writes one for a --cmd read through an external meter with no
    published accuracy (no figure states its uncertainty)."""
    return {"status": "ok", "validity": {"valid": True, "reasons": []},
            "throughput": {"items_per_s": rate, "latency_ms": {}},
            "power": {"total": {"mean_w": power}},
            "efficiency": {"items_per_j": rate / power, "uncertainty": {}}}


def run_tune(case: Case, space: Space, log: Optional[Callable[[str], None]] = None
             ) -> Tuple[Optional[Dict[str, int]], int]:
    """jetbench's search on the surface: (its answer's settings, readings taken)."""
    import optuna

    from jetbench.hw.fs import Root
    from jetbench.run.constraint import Constraint
    from jetbench.run.request import MeasureOptions
    from jetbench.run.tune.options import load_optuna
    from jetbench.run.tune.search import Study

    try:
        from jetbench.run.tune.study import make_sampler
    except ImportError:  # the code before issue 62 (--before): its sampler, as _tune made it
        def make_sampler(optuna, req, directions):  # type: ignore[no-untyped-def,misc]
            return True, optuna.samplers.TPESampler(
                seed=req.seed, multivariate=True, group=True,
                n_startup_trials=min(10, max(3, req.budget // 5)))

    load_optuna()
    read = _Reading(case, space, log)

    @dataclasses.dataclass
    class Report:
        results: List[Dict[str, object]]
        paths: List[Path]

    class SurfaceStudy(Study):
        def _measure(self, trial, settings):  # type: ignore[no-untyped-def]
            return Report([_doc(*read(settings))], [Path("surface")])

    with tempfile.TemporaryDirectory() as tmp:
        from jetbench.run.tune.options import TuneRequest

        req = TuneRequest(MeasureOptions(cmd="surface"), Path(tmp), knobs=tuple(
            case.knobs.split(",")), budget=case.budget, seed=case.seed,
            constraints=(Constraint.parse(f"items_per_s>={case.floor:.6g}"),),
            board_name="surface")
        modern, sampler = make_sampler(optuna, req, ["maximize"])
        study = optuna.create_study(direction="maximize", sampler=sampler)
        sub = {k: space[k] for k in case.knobs.split(",")}
        doc = SurfaceStudy(Root(tmp), req, optuna, lambda line: None, study, sub, True,
                           ["command"], ["fp32"], [1], ["maximize"], modern,
                           {"model": "surface"}).run().doc
    best = doc.get("best")
    settings = best["settings"] if best else None
    return ({k: v for k, v in settings.items() if k.endswith("_hz")} if settings else None,
            read.count)


def run_optuna(case: Case, space: Space, kind: str) -> Tuple[Optional[Dict[str, int]], int]:
    """Optuna's sampler alone (`tpe` or `gp`), the floor its constraint: (the best feasible
    reading's settings, readings taken)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    import warnings

    warnings.filterwarnings("ignore")
    read = _Reading(case, space)
    sub = {k: space[k] for k in case.knobs.split(",")}
    sampler = (optuna.samplers.TPESampler(seed=case.seed, multivariate=True,
                                          n_startup_trials=min(10, max(3, case.budget // 5)))
               if kind == "tpe" else optuna.samplers.GPSampler(
                   seed=case.seed, n_startup_trials=min(10, max(3, case.budget // 5))))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    seen: List[Tuple[float, Dict[str, int]]] = []

    def objective(trial: optuna.Trial) -> float:
        settings = {f"{k}_hz": v[trial.suggest_int(f"{k}_index", 0, len(v) - 1)]
                    for k, v in sub.items()}
        rate, power = read(settings)
        trial.set_constraint("floor", case.floor - rate)
        if rate >= case.floor:
            seen.append((rate / power, settings))
        return rate / power

    study.optimize(objective, n_trials=case.budget)
    return (max(seen, key=lambda s: s[0])[1] if seen else None), read.count


def judge(job: Tuple[str, Case, Space]) -> Outcome:
    from jetbench.sim.surface import Surface, shares

    searcher, case, space = job
    t0 = time.monotonic()
    answer, trials = (run_tune(case, space) if searcher == "tune"
                      else run_optuna(case, space, searcher))
    seconds = time.monotonic() - t0
    if answer is None:
        return Outcome(searcher, case, 100.0, False, trials, None, seconds)
    surface = Surface.draw(case.seed)
    at = shares({k: space[k] for k in case.knobs.split(",")}, answer)
    under = surface.items_per_s(*at) < case.floor
    gap = 100.0 if under else 100.0 * (1 - surface.items_per_j(*at) / case.best_ipj)
    return Outcome(searcher, case, gap, under, trials, answer, seconds)


def pct90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", default="tx1,xavier-nx")
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--settings", default="gpu,emc:8;gpu,emc,cpu:25",
                    help="KNOBS:BUDGET;... (the knobs searched, the trials)")
    ap.add_argument("--searchers", default="tune,tpe,gp")
    ap.add_argument("--first", type=int, default=0, metavar="N",
                    help="draw the surfaces from seed N on (another set: 1000)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--target", type=float, default=3.0)
    ap.add_argument("--worst", type=float, default=5.0)
    ap.add_argument("--json", type=Path, help="write every outcome here")
    ap.add_argument("--show", type=int, default=0, help="print the N worst of each row")
    ap.add_argument("--trace", type=int, metavar="SEED",
                    help="print one surface (each board and setting its seed is drawn for: "
                    "its items/J over two knobs) and every point tune reads on it, then stop")
    args = ap.parse_args(argv)
    boards = args.boards.split(",")
    tables = spaces(boards)
    settings = [(s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1])) for s in args.settings.split(";")]
    if args.trace is not None:
        return trace(args.trace, boards, tables, settings)
    jobs: List[Tuple[str, Case, Space]] = []
    for knobs, budget in settings:
        for board in boards:
            drawn, skipped = cases(board, tables[board], knobs, budget, args.seeds,
                                   args.first)
            feasible = [c.feasible for c in drawn]
            print(f"{board} {knobs}: {len(drawn)} surfaces ({skipped} passed over: no floor "
                  f"{CLEAR_PCT:g}% clear of every point), {drawn[0].size} points, feasible "
                  f"under the floor: median {statistics.median(feasible):g}, "
                  f"min {min(feasible)}", flush=True)
            jobs += [(s, c, tables[board]) for s in args.searchers.split(",") for c in drawn]
    t0 = time.monotonic()
    with multiprocessing.Pool(args.jobs) as pool:
        outcomes = pool.map(judge, jobs, chunksize=1)
    print(f"({len(jobs)} studies in {time.monotonic() - t0:.0f} s, {args.jobs} processes)")
    met_all = True
    print(f"{'board':10} {'knobs':12} {'trials':>6} {'searcher':8} {'median':>7} {'p90':>7} "
          f"{'worst':>7} {'under':>6} {'read':>5} {'s/study':>7}")
    for knobs, budget in settings:
        for board in boards:
            for searcher in args.searchers.split(","):
                rows = [o for o in outcomes if o.searcher == searcher and o.case.board == board
                        and o.case.knobs == knobs]
                gaps = [o.gap_pct for o in rows]
                under = sum(o.under for o in rows)
                met = (statistics.median(gaps) <= args.target and max(gaps) <= args.worst
                       and not under)
                if searcher == "tune":
                    met_all &= met
                print(f"{board:10} {knobs:12} {budget:6d} {searcher:8} "
                      f"{statistics.median(gaps):6.1f}% {pct90(gaps):6.1f}% {max(gaps):6.1f}% "
                      f"{under:3d}/{len(rows):<3d}"
                      f"{statistics.mean(o.trials for o in rows):5.1f} "
                      f"{statistics.mean(o.seconds for o in rows):7.2f}"
                      + ("  met" if met else "  NOT met"), flush=True)
                for o in sorted(rows, key=lambda o: -o.gap_pct)[:args.show]:
                    print(f"    seed {o.case.seed}: {o.gap_pct:.1f}% floor "
                          f"{o.case.floor:.4g} ({o.case.feasible} feasible) answer "
                          f"{_mhz(o.answer)} best {_mhz(o.case.best)}")
    if args.json:
        args.json.write_text(json.dumps([dict(dataclasses.asdict(o), case=dataclasses.asdict(
            o.case)) for o in outcomes], indent=1))
    print(f"target (tune): median gap <= {args.target:g}%, worst <= {args.worst:g}%, none "
          f"under the floor: {'met' if met_all else 'NOT met'}")
    return 0 if met_all else 1


def trace(seed: int, boards: Sequence[str], tables: Dict[str, Space],
          settings: Sequence[Tuple[str, int]]) -> int:
    """--trace SEED: the surface and tune's readings on it (for a seed that fails a row)."""
    from jetbench.sim.surface import Surface, shares

    found = 0
    # (the setting a seed is drawn for: the one whose offset is the nearest below it)
    mine = max((o for o in SEED_OFFSET.values() if o <= seed), default=None)
    for knobs, budget in settings:
        first = seed - SEED_OFFSET[knobs]
        for board in boards:
            if SEED_OFFSET[knobs] != mine:
                continue
            drawn, _ = cases(board, tables[board], knobs, budget, 1, first)
            if drawn[0].seed != seed:
                continue  # passed over (no clear floor)
            found += 1
            case, sub = drawn[0], {k: tables[board][k] for k in knobs.split(",")}
            print(f"{board} {knobs} in {budget} trials, seed {seed}: floor {case.floor:.4g}/s, "
                  f"{case.feasible} of {case.size} points meet it; the best "
                  f"{_mhz(case.best)}, {case.best_ipj:.4g}/J")
            if list(sub) == ["gpu", "emc"]:
                surface = Surface.draw(seed)
                print("  items/J (* meets the floor); rows EMC, columns GPU MHz: "
                      + " ".join(f"{hz / 1e6:g}" for hz in sub["gpu"]))
                for e in sub["emc"]:
                    at = [shares(sub, {"gpu_hz": g, "emc_hz": e}) for g in sub["gpu"]]
                    print(f"  {e / 1e6:7g} " + " ".join(
                        f"{surface.items_per_j(*a):6.4g}"
                        f"{'*' if surface.items_per_s(*a) >= case.floor else ' '}" for a in at))
            answer, _ = run_tune(case, tables[board], print)
            outcome = judge(("tune", case, tables[board]))
            print(f"  answer {_mhz(answer)}: gap {outcome.gap_pct:.1f}%")
    if not found:
        print(f"seed {seed} is drawn for none of these boards and settings (or passed over)")
    return 0 if found else 1


def _mhz(settings: Optional[Dict[str, int]]) -> str:
    if not settings:
        return "none"
    return "/".join(f"{v / 1e6:g}" for v in settings.values()) + " MHz"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
