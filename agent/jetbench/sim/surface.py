"""Random workload surfaces: a workload's speed and power as formulas of the clocks, drawn per
seed (issue 62). They are written apart from the simulator's latency and power models
(sim/workload_model.py, sim/power_model.py), so a search tuned against those learns nothing
here; `benchmarks/bench_tune_surfaces.py` judges `tune` against each surface's exact optimum,
and the end-to-end test drives one through `--cmd` and a simulated external meter.

Clocks enter as shares of their table's top (g, e, c: GPU, EMC, CPU, each in (0, 1]).

Time of one item: a smooth bottleneck of a compute term and a memory term (an Lp norm: p
near 1 adds them, a large p takes the slower), plus a host term on the CPU, serial to them:

    device = ((gpu_work / g)^p + (mem_work / e)^p)^(1/p)
    t      = device + host_work / c               items/s = rate_scale / t

Power: a static part, the GPU's C V^2 f times its activity, the EMC's share-of-max times its
traffic, the CPU's C V^2 f times its busy share. Each of GPU and CPU runs at its lowest
voltage up to a knee (a share of its top clock) and its voltage then rises linearly to
`v_top` times that at the top clock: below the knee, power grows with the clock alone; above
it, with its cube. With the static part, this puts the unconstrained optimum near the knee
(often 40-70% of the GPU's top, as NVIDIA's MaxQ points), compute-bound or memory-bound as
the draw of gpu_work and mem_work has it.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..hw.board import Board
from ..hw.clocks.domains import read_clocks
from ..hw.fs import Root

READ_TRIES = 5  # running_shares: reads of a clock file found empty mid-write

# the relative clocks of a point: (g, e, c), each in (0, 1]
Shares = Tuple[float, float, float]


@dataclass(frozen=True)
class Surface:
    """One workload's speed and power over the clocks (module doc); `draw(seed)` makes one."""
    seed: int
    gpu_work: float  # the compute term at the GPU's top clock (time units)
    mem_work: float  # the memory term at the EMC's top rate
    host_work: float  # the host term at the CPU's top clock
    sharpness: float  # p of the bottleneck's Lp norm
    rate_scale: float  # items/s = rate_scale / t
    static_w: float
    gpu_w: float  # the GPU's C V^2 f at its top clock and lowest voltage, fully busy
    emc_w: float  # the EMC's power at its top rate with full traffic
    cpu_w: float  # the CPU's C V^2 f at its top clock and lowest voltage, fully busy
    gpu_knee: float  # the GPU's clock share where its voltage starts rising
    gpu_v_top: float  # its voltage at the top clock over its lowest
    cpu_knee: float
    cpu_v_top: float

    @classmethod
    def draw(cls, seed: int) -> Surface:
        rng = random.Random(seed)
        # the GPU term against the memory term: some surfaces compute-bound, some memory-bound
        balance = rng.uniform(-1.2, 1.2)
        return cls(seed=seed, gpu_work=0.5 * 2 ** balance, mem_work=0.5 * 2 ** -balance,
                   host_work=rng.uniform(0.03, 0.35), sharpness=rng.uniform(1.5, 6.0),
                   rate_scale=rng.uniform(50.0, 500.0), static_w=rng.uniform(1.0, 3.0),
                   gpu_w=rng.uniform(2.0, 8.0), emc_w=rng.uniform(0.6, 2.5),
                   cpu_w=rng.uniform(0.5, 2.5), gpu_knee=rng.uniform(0.35, 0.7),
                   gpu_v_top=rng.uniform(1.25, 1.7), cpu_knee=rng.uniform(0.3, 0.7),
                   cpu_v_top=rng.uniform(1.2, 1.6))

    # -- the formulas ----------------------------------------------------------------------------
    def _terms(self, g: float, e: float, c: float) -> Tuple[float, float, float, float]:
        compute, memory = self.gpu_work / g, self.mem_work / e
        p = self.sharpness
        device = (compute ** p + memory ** p) ** (1 / p)
        return compute, memory, device, device + self.host_work / c

    def items_per_s(self, g: float, e: float, c: float = 1.0) -> float:
        return self.rate_scale / self._terms(g, e, c)[3]

    def power_w(self, g: float, e: float, c: float = 1.0) -> float:
        compute, memory, device, t = self._terms(g, e, c)
        busy = device / t  # the share of each item the GPU and memory work
        p = self.sharpness
        compute_share = compute ** p / (compute ** p + memory ** p)
        gpu = self.gpu_w * _volts(g, self.gpu_knee, self.gpu_v_top) ** 2 * g * busy * (
            0.35 + 0.65 * compute_share)  # a GPU stalled on memory still draws a part
        emc = self.emc_w * e * (0.3 + 0.7 * busy * (0.4 + 0.6 * (1 - compute_share)))
        cpu = self.cpu_w * _volts(c, self.cpu_knee, self.cpu_v_top) ** 2 * c * (
            0.15 + 0.85 * (1 - busy))
        return self.static_w + gpu + emc + cpu

    def items_per_j(self, g: float, e: float, c: float = 1.0) -> float:
        return self.items_per_s(g, e, c) / self.power_w(g, e, c)


def _volts(share: float, knee: float, v_top: float) -> float:
    """A clock's voltage over its lowest: flat to the knee, then linear to v_top at the top."""
    return 1.0 if share <= knee else 1.0 + (v_top - 1.0) * (share - knee) / (1.0 - knee)


def running_shares(root: Root, board: Board) -> Tuple[float, float]:
    """(GPU, EMC) clocks a simulated board runs now, as shares of the GPU table's top and the
    EMC's max (read as measure's clock sampler reads them): a surface's workload at them. A
    clock file read empty while a pin rewrites it is read again (a few times, 2 ms apart)."""
    for _ in range(READ_TRIES):
        now, top = {}, {"emc": float(board.emc.max_hz)} if board.emc else {}
        for r in read_clocks(root, board):
            if r.domain in ("gpu", "emc") and r.cur_hz:
                now[r.domain] = float(r.cur_hz)
                if r.available_hz:
                    top[r.domain] = float(max(r.available_hz))
        if "gpu" in now and "emc" in now and "gpu" in top:
            return (min(1.0, now["gpu"] / top["gpu"]), min(1.0, now["emc"] / top["emc"]))
        time.sleep(0.002)
    raise RuntimeError(f"the simulated board's GPU and EMC clocks could not be read "
                       f"({READ_TRIES} tries)")


def shares(space: Mapping[str, Sequence[int]], settings: Mapping[str, object]) -> Shares:
    """A point's clocks (`<knob>_hz`) as shares of their tables' tops; a knob not searched
    runs at its top (1.0)."""
    out: List[float] = []
    for knob in ("gpu", "emc", "cpu"):
        hz = settings.get(f"{knob}_hz")
        table = space.get(knob)
        out.append(float(hz) / max(table) if table and isinstance(hz, int) else 1.0)
    return out[0], out[1], out[2]


def points(space: Mapping[str, Sequence[int]]) -> Iterator[Dict[str, int]]:
    """Every point of a space (its knobs' tables), as `<knob>_hz` settings."""
    knobs = list(space)

    def walk(k: int, acc: Dict[str, int]) -> Iterator[Dict[str, int]]:
        if k == len(knobs):
            yield dict(acc)
            return
        for hz in space[knobs[k]]:
            acc[f"{knobs[k]}_hz"] = hz
            yield from walk(k + 1, acc)

    return walk(0, {})


@dataclass(frozen=True)
class Optimum:
    """A surface's exact answer over a space under a floor: the best point and its items/J."""
    settings: Dict[str, int]
    items_per_j: float
    feasible: int  # points meeting the floor


def optimum(surface: Surface, space: Mapping[str, Sequence[int]],
            floor: Optional[float]) -> Optional[Optimum]:
    """The point of the space with the most items/J among those whose rate is at least
    `floor` (None where none is)."""
    best: Optional[Tuple[float, Dict[str, int]]] = None
    feasible = 0
    for s in points(space):
        at = shares(space, s)
        if floor is not None and surface.items_per_s(*at) < floor:
            continue
        feasible += 1
        value = surface.items_per_j(*at)
        if best is None or value > best[0]:
            best = (value, s)
    return None if best is None else Optimum(best[1], best[0], feasible)


def binding_floor(surface: Surface, space: Mapping[str, Sequence[int]], share: float,
                  clear_pct: float) -> Optional[float]:
    """A floor that binds (the unconstrained optimum misses it), `share` of the way from the
    optimum's rate to the fastest point's, moved to the nearest gap between the space's rates
    that leaves every point at least `clear_pct` percent off it (no point sits in a reading's
    noise at the floor); None where the space has no such gap."""
    free = optimum(surface, space, None)
    assert free is not None
    free_rate = surface.items_per_s(*shares(space, free.settings))
    rates = sorted({surface.items_per_s(*shares(space, s)) for s in points(space)})
    want = free_rate + share * (rates[-1] - free_rate)
    # (the rates sorted: a gap's midpoint is clear of every rate when of its two ends)
    gaps = [((a * b) ** 0.5, a, b) for a, b in zip(rates, rates[1:])]
    clear = [f for f, a, b in gaps if f > free_rate * (1 + clear_pct / 100)
             and (1 - a / f) * 100 >= clear_pct and (b / f - 1) * 100 >= clear_pct]
    return min(clear, key=lambda f: abs(f - want), default=None)
