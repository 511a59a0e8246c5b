"""Which point `daemon --tune`'s governor reads next (governor.py): the models' proposal, the
exploration of a demand the models cannot yet rank, and a held point's neighbours."""

from __future__ import annotations

from typing import Callable, Collection, List, Optional, Sequence, Tuple

import numpy as np

from ..run.constraint import Constraint
from .demand_epoch import Epoch, is_rate_floor
from .online_tuner import SIGMAS, Point, Space, Window, _apart
from .tail_judge import TailJudge, is_tail
from .workload_model import Fitted

AHEAD = 0.0  # a point not read is read where the models put it this much ahead of the best read
# ... and beyond this many of the best read's uncertainty in items/J (a point the models put
# within one read's noise of it is left to the walk while the best is held: a probe is time)
AHEAD_SIGMAS = 1.0
# a point that meets the floors at its figures but not beyond their noise is read again until
# UNSURE_READS reads, at most UNSURE_MAX such reads a demand (Poisson arrivals at a low rate are
# 8% noisy in a 4 s probe, and a floor 10% under the demand needs three to be met beyond it)
UNSURE_READS, UNSURE_MAX = 3, 4
MODEL_MARGIN_MIN = 0.03  # the models' floor margin at least this (relative)


def propose(points: Sequence[Point], x: np.ndarray, models: Optional[Fitted], epoch: Epoch,
            judged: Sequence[Constraint], tail: TailJudge,
            best_read: Optional[Tuple[Point, Window]]) -> Optional[Point]:
    """The point not read under this demand that the models put most efficient among those
    they put within every constraint (rows `x` of `points`' shares), where ahead of the best
    read (`best_read`: its point and its windows as one) by more than AHEAD_SIGMAS of that
    read's noise: of its figure read, or of the models' own figure for it, whichever is lower
    (the models' error at a demand is much the same at both points, the read's noise is its
    own: after a fall on a flat surface the models put the optimum 5.0% ahead of their figure
    for the point read, 4.3% ahead of its read, whose noise was 4.6%, and a walk took 264 s
    to it instead); None where there is none or the models cannot say."""
    if models is None or epoch.demand is None:
        return None
    if not models.has_capacity and tail.limits:
        return None  # a tail needs the load known: explored first
    # (no capacity fitted yet: every point keeps up, as far as the models know; the power
    # model ranks them, and a point read that does not keep up is the first fitted)
    capacity = models.capacity(x)
    rate = np.minimum(epoch.demand, capacity)
    power = models.power_w(x, rate)
    margin = max(MODEL_MARGIN_MIN, 2 * models.time_rms)
    ok = np.ones(len(points), dtype=bool)
    for lim in judged:
        if lim.name == "items_per_s":
            # the margin on what the point keeps up with: the rate itself is the demand's
            # where it keeps up (a demand share's floor lies just under it). A floor is the
            # capacity's to clear: a point that clears it serves the floor where that much
            # arrives and what arrives where less does (a fall's demand read 7% under the
            # floor, within its 20% noise, left every point unproposed and a point 16% off
            # held for 150 s)
            ok &= (capacity >= lim.value * (1 + margin)) \
                if lim.op == ">=" else rate <= lim.value * (1 - margin)
        elif lim.name == "power_w":
            ok &= power >= lim.value * (1 + margin) if lim.op == ">=" else \
                power <= lim.value * (1 - margin)
        elif is_tail(lim):  # judged by reads; a queue's tail grows with its load
            ok &= epoch.demand / np.maximum(capacity, 1e-12) <= tail.load_allowed(epoch.demand)
    efficiency = rate / np.maximum(power, 1e-12)
    score = np.where(ok, efficiency, -np.inf)
    bar = -np.inf  # what a point must be put above to be read
    if best_read is not None:
        at, best = best_read
        bar = best.items_per_j
        if at in points:
            bar = min(bar, float(efficiency[list(points).index(at)]))
        bar *= 1 + AHEAD + AHEAD_SIGMAS * (best.items_per_j_uncertainty_pct or 0.0) / 100
    for k in np.argsort(-score):
        if not np.isfinite(score[k]):
            return None
        point = points[int(k)]
        if point in epoch.reads or epoch.excluded(point):
            continue
        if score[k] <= bar:
            return None  # not ahead of what was read
        return point
    return None


def explore(space: Space, epoch: Epoch) -> Optional[Point]:
    """Each knob alone halving down its table from the top (the others at their top) until a
    window at it under this demand saturates or misses, then the next knob; then every knob at
    once at the lowest entry it kept up at alone (the knobs' savings together: a paced
    workload's best lies there more often than on one knob's line). None when done."""
    top = space.top()
    while epoch.explore_knob < len(space.knobs):
        k = epoch.explore_knob
        index = epoch.explore_at.get(k, top[k] // 2)
        probe = list(top)
        probe[k] = index
        point = tuple(probe)
        windows = epoch.reads.get(point)
        if index == top[k] or (windows and (epoch.saturated(windows[-1]) or index == 0 or
                                            point in epoch.missed)):
            epoch.explore_knob += 1
            continue
        if not windows:
            return point
        epoch.explore_at[k] = index // 2  # kept up there: further down
    corner = tuple(min([top[k]] + [p[k] for p, ws in epoch.reads.items()
                                   if p[:k] + p[k + 1:] == top[:k] + top[k + 1:]
                                   and not epoch.saturated(ws[-1]) and p not in epoch.missed])
                   for k in range(len(top)))
    if corner != top and corner not in epoch.reads and not epoch.excluded(corner):
        return corner
    return None


def neighbours(space: Space, point: Point) -> List[Point]:
    """The points next to `point`: a knob one step down, or one down and another one up (a
    knob traded against another along a constraint's edge), or a knob one step up (a point
    that does not keep up may serve more per joule a step up; one that keeps up may too: a
    workload's energy per item can fall as a clock rises, its static power spread over a
    shorter busy time)."""
    near = []
    for k, i in enumerate(point):
        if i < len(space.tables[k]) - 1:
            higher = list(point)
            higher[k] = i + 1
            near.append(tuple(higher))
        if i == 0:
            continue
        down = list(point)
        down[k] = i - 1
        near.append(tuple(down))
        for j, table in enumerate(space.tables):
            if j != k and point[j] < len(table) - 1:
                trade = list(down)
                trade[j] = point[j] + 1
                near.append(tuple(trade))
    return near


def best_neighbour(space: Space, epoch: Epoch, point: Point, judged: Sequence[Constraint],
                   predicted: Callable[[Point], Optional[Tuple[float, float]]],
                   allowed: Callable[[Point], bool],
                   capacity: Callable[[Point], Optional[float]] = lambda p: None
                   ) -> Optional[Point]:
    """The point next to a held one (`neighbours`) not read under this demand nor ruled out,
    `allowed` (a tail's load), that the models put over every rate floor (its rate at the
    demand, or its `capacity`: a demand read under a floor within noise): the most efficient
    by them (`predicted`: items/s and W); None: none. A knob up from a point that keeps up
    comes last by the models (their power is monotone in every clock at a rate served) and is
    read once the rest are: where the energy per item falls as a clock rises the walk finds it
    all the same (the TX1's surface 5 held 307/400 MHz for its first demand's 300 s, 8.5%
    below 538/400, in every seed; the fluid benchmark's first demands ended over 5% off in 36
    of 700 runs, 16 now)."""
    floors = [lim.value for lim in judged if is_rate_floor(lim)]
    scored = []
    for near in neighbours(space, point):
        if near in epoch.reads or epoch.excluded(near) or not allowed(near):
            continue
        figures, most = predicted(near), capacity(near)
        # the capacity where modelled (the rate at the demand, min(demand, capacity), is
        # under a floor the capacity clears where the demand was read under it), else the rate
        over = most if most is not None else figures[0] if figures is not None else 0.0
        if figures is not None and figures[1] > 0 and all(over >= f for f in floors):
            scored.append((figures[0] / figures[1], near))
    return max(scored)[1] if scored else None


def rival(epoch: Epoch, read: Sequence[Tuple[Point, Window]]) -> Optional[Point]:
    """A close call (the best two read within noise of each other in items/J): the second,
    where it was read fewer times than the best, to read again while the best is held (the
    best's own windows read it again); None where there is none."""
    if len(read) < 2:
        return None
    (p1, w1), (p2, w2) = sorted(read, key=lambda kv: -kv[1].items_per_j)[:2]
    if _apart(w1.items_per_j, w1.items_per_j_uncertainty_pct, w2.items_per_j,
              w2.items_per_j_uncertainty_pct, SIGMAS):
        return None
    return p2 if len(epoch.reads[p2]) < len(epoch.reads[p1]) else None


def unsure(epoch: Epoch, met: Collection[Point], judged: Sequence[Constraint],
           best: Optional[Window], top: Point) -> Optional[Point]:
    """The most efficient point read under this demand that meets every constraint the models
    judge at its figures but not beyond their noise (`met`: those that do), ahead of the best
    that does (`best`; or with none), read fewer than UNSURE_READS times; None where there is
    none or UNSURE_MAX were read again under this demand."""
    if epoch.unsure >= UNSURE_MAX:
        return None
    limits = [lim for lim in judged if not is_tail(lim)]
    out = []
    for point, ws in epoch.reads.items():
        w = epoch.mean(point)
        if point in met or w is None or epoch.excluded(point) or len(ws) >= UNSURE_READS or \
                point == top:
            continue
        each = epoch.mean(point, each=True)
        if epoch.saturated(w) and each is not None and all(w.meets(lim) for lim in limits) and \
                not all(each.meets(lim) for lim in limits):
            continue  # met beyond its windows' mean's noise, not one's (Epoch.met): more reads
            # do not narrow a window's noise
        values = [(lim, w.metric(lim.name)[0]) for lim in limits]
        if all(lim.met(v, None) for lim, v in values if v is not None) and \
                (best is None or w.items_per_j > best.items_per_j):
            out.append((w.items_per_j, point))
    return max(out)[1] if out else None
