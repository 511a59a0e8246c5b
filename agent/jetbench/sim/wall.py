"""A simulated carrier board and AC/DC supply, and a wall meter reading them (docs/power.md,
"Wall energy").

What the board's own sensors read (the module input VDD_IN, Thor's VIN, or a rail sum) is not
what the wall sees. Between the two sit the carrier (its regulators' losses, roughly a share of
what passes through them, and its peripherals and fan, a constant) and the supply, whose losses
are a no-load part, a part proportional to the power and a conduction (I^2 R) part:

    dc_w   = board_w * (1 + CARRIER_SHARE) + carrier_w
    wall_w = dc_w + supply_idle_w + supply_share * dc_w + dc_w^2 / supply_knee_w

so the supply's efficiency dc_w / wall_w depends on the load (it is never the identity). The
wall meter is one of sim/meters.py's instruments (any protocol, pty or loopback socket) whose
power follows the board's total, read from the simulated tree through the board's own sensors,
averaged over `average_s` (a meter integrates between its updates), `lag_s` late and with a
reading noise of `noise_pct`.
Everything measured here is simulated.
"""

from __future__ import annotations

import bisect
import os
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Deque, List, Optional, Tuple

from ..hw.board import detect
from ..hw.fs import Root
from ..hw.meters.base import PowerSource, total_power_w
from ..hw.meters.registry import open_sources
from .meters import SimMeter, sim_for

HISTORY_S = 30.0  # how far back the meter can look (its lag is far shorter)


@dataclass(frozen=True)
class CarrierSupply:
    """A carrier board and its supply, as documented above. `name`: what the simulated board's
    identity calls the carrier (a calibration made on one carrier refuses another)."""

    name: str = "sim-carrier-a"
    carrier_w: float = 1.6  # peripherals, USB, Ethernet, fan at its idle speed
    carrier_share: float = 0.06  # the carrier's regulators (12-20 V buck) per watt through them
    supply_idle_w: float = 0.45  # the brick's no-load loss
    supply_share: float = 0.035
    supply_knee_w: float = 260.0  # conduction losses: dc_w^2 / knee

    def dc_w(self, board_w: float) -> float:
        return board_w * (1.0 + self.carrier_share) + self.carrier_w

    def wall_w(self, board_w: float) -> float:
        dc = self.dc_w(board_w)
        return dc + self.supply_idle_w + self.supply_share * dc + dc * dc / self.supply_knee_w

    def efficiency(self, board_w: float) -> float:
        """The supply's efficiency at this load (dc out / wall in): never 1."""
        return self.dc_w(board_w) / self.wall_w(board_w)


CARRIERS = {c.name: c for c in (
    CarrierSupply(),
    CarrierSupply("sim-carrier-b", carrier_w=3.2, carrier_share=0.09, supply_idle_w=0.8,
                  supply_share=0.05, supply_knee_w=140.0),
)}


class BoardTotal:
    """The board's total as its own sensors give it (measure's total), read from the tree."""

    def __init__(self, base: os.PathLike):
        self.root = Root(os.fspath(base))
        self._sources: List[PowerSource] = []

    def open(self) -> None:
        board = detect(self.root)
        self._sources = open_sources(["auto"], self.root, rails=board.rails,
                                     total_rail=board.total_rail)[:1]
        for s in self._sources:
            s.open()

    def read_w(self) -> Optional[float]:
        if not self._sources:
            return None
        src = self._sources[0]
        reading = src.read()
        watts = {c.name: v for c, v in zip(src.channels(), reading.power_w)}
        return total_power_w(src.total(), watts)

    def close(self) -> None:
        for s in self._sources:
            s.close()


class SimWall:
    """The wall's power over time: the board's total through the carrier and supply, sampled
    every `interval_s` by a thread, and answered averaged over `average_s`, `lag_s` late, with
    a seeded reading noise."""

    def __init__(self, base: os.PathLike, carrier: CarrierSupply = CarrierSupply(), *,
                 lag_s: float = 0.35, noise_pct: float = 0.15, interval_s: float = 0.01,
                 average_s: float = 0.1, seed: int = 58):
        self.carrier, self.lag_s, self.noise_pct = carrier, lag_s, noise_pct
        self.average_s = average_s
        self.interval_s = interval_s
        self._board = BoardTotal(base)
        self._history: Deque[Tuple[float, float]] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._rng = random.Random(seed)

    def start(self) -> SimWall:
        self._board.open()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="sim-wall", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._board.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._sample()
            except OSError:
                pass  # the tree being rewritten under us: the next pass reads it

    def _sample(self) -> None:
        watts = self._board.read_w()
        if watts is None:
            return
        now = time.monotonic()
        with self._lock:
            self._history.append((now, watts))
            while self._history and self._history[0][0] < now - HISTORY_S:
                self._history.popleft()

    def board_w_over(self, t0: float, t1: float) -> Optional[float]:
        """The board's mean total over [t0, t1] as sampled (the last sample before t1 when
        none fell inside; None before the first sample)."""
        with self._lock:
            times = [h[0] for h in self._history]
            i0, i1 = bisect.bisect_left(times, t0), bisect.bisect_right(times, t1)
            inside = [h[1] for h in list(self._history)[i0:i1]]
            if inside:
                return sum(inside) / len(inside)
            if i1 > 0:
                return self._history[i1 - 1][1]
            return self._history[0][1] if self._history else None

    def power_w(self, t: float) -> float:
        """What the meter shows at t: the wall's power averaged over its last `average_s`
        (a power meter integrates between its updates; an instantaneous sample would alias
        a workload's per-batch pulses), `lag_s` late, with its reading noise."""
        board = self.board_w_over(t - self.lag_s - self.average_s, t - self.lag_s)
        if board is None:
            return float("nan")
        noise = 1.0 + self._rng.gauss(0.0, self.noise_pct / 100.0)
        return self.carrier.wall_w(board) * noise


def wall_meter(base: os.PathLike, protocol: str = "scpi", *,
               carrier: CarrierSupply = CarrierSupply(), transport: str = "tcp",
               **wall_kwargs: float) -> Tuple[SimWall, SimMeter]:
    """A started SimWall and the (not yet started) instrument reading it."""
    wall = SimWall(base, carrier, **wall_kwargs).start()  # type: ignore[arg-type]
    return wall, sim_for(protocol, wall.power_w, transport=transport)
