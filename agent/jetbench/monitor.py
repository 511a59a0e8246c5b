"""`jetbench monitor`: live rails, module total, clocks and temperatures (tegrastats, readable).

The sampler reads every source in the background at the requested interval; each tick takes the
latest value of every channel (power from the last two reads for energy counters), the total as
each source defines it (VDD_IN, or a sum it names), the clocks and the temperatures.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, TextIO, Tuple

from .documents import PowerModeDoc
from .hw.board import Board
from .hw.clocks.types import ClockReading
from .hw.fs import Root
from .hw.meters.base import KIND_ENERGY, Channel, PowerSource, power_between, total_power_w
from .hw.readings import clock_doc, cpu_load_pct, read_now
from .report.digits import plus_minus, significant

if TYPE_CHECKING:
    from .hw.meters.accuracy import Accuracy
    from .sampling.sampler import Sampler


@dataclass(frozen=True)
class Row:
    t_s: float  # since the monitor started
    channels: Tuple[Tuple[Channel, Optional[float]], ...]  # watts; None = no reading yet
    total_name: Optional[str]
    total_w: Optional[float]
    clocks: Tuple[ClockReading, ...]
    temps_c: Dict[str, float]
    power_mode: Optional[PowerModeDoc] = None  # nvpmodel's mode
    gpu_load_pct: Optional[float] = None  # `load` file, or NVML (Thor); None = unknown
    # The sensor's worst-case error on each reading (channel key -> W; None = unknown), and on
    # the total (the sum of its parts' worst cases).
    uncertainty_w: Dict[str, Optional[float]] = field(default_factory=dict)
    total_uncertainty_w: Optional[float] = None
    cpu_load_pct: Dict[int, Optional[float]] = field(default_factory=dict)  # online cores
    memory_mb: Optional[Tuple[float, float]] = None  # (used, total)
    fan_pwm: Optional[int] = None

    def channel_uncertainty_w(self, channel: Channel) -> Optional[float]:
        return self.uncertainty_w.get(channel.key)

    def to_dict(self, simulated: bool) -> Dict[str, object]:  # a line of `monitor --json`
        return {
            "schema": "jetbench.monitor/1",
            "simulated": simulated,
            "t_s": round(self.t_s, 4),
            "channels": [
                {"name": c.name, "source": c.source, "point": c.point, "power_w": w,
                 "power_w_uncertainty_w": self.uncertainty_w.get(c.key)}
                for c, w in self.channels
            ],
            "total": {"name": self.total_name, "power_w": self.total_w,
                      "power_w_uncertainty_w": self.total_uncertainty_w},
            "clocks": [clock_doc(c) for c in self.clocks],
            "temperatures_c": self.temps_c,
            "power_mode": self.power_mode,
            "gpu_load_pct": self.gpu_load_pct,
            "cpu_load_pct": {f"cpu{c}": load for c, load in sorted(self.cpu_load_pct.items())},
            "memory_mb": None if self.memory_mb is None else
            {"used": round(self.memory_mb[0], 1), "total": round(self.memory_mb[1], 1)},
            "fan_pwm": self.fan_pwm,
        }


class Monitor:
    """Poll a running sampler. Use: `with Monitor(root, board, sampler) as m: m.row()`."""

    def __init__(self, root: Root, board: Board, sampler: Sampler,
                 sources: Sequence[PowerSource]):
        self.root = root
        self.board = board
        self.sampler = sampler
        self.sources = list(sources)
        self.t0 = time.monotonic()
        self.accuracies: Dict[str, Accuracy] = {}
        self._cpu_times: Dict[int, Tuple[int, int]] = {}  # the previous row's, for its load

    def _accuracies(self) -> Dict[str, Accuracy]:
        """The sensors' published limits, read once (shunt resistors, bus voltages)."""
        if not self.accuracies:
            from .hw.meters.accuracy import channel_accuracies

            self.accuracies = channel_accuracies(self.root, self.sources, self.board.family)
        return self.accuracies

    def __enter__(self) -> Monitor:
        self.sampler.start()
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sampler.stop()

    def wait_first(self, timeout_s: float = 3.0) -> bool:
        """Wait until every source has at least one sample (two for energy counters)."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if all(len(st.trace) >= (2 if _has_energy(st.channels) else 1)
                   for st in self.sampler.traces()):
                return True
            time.sleep(0.01)
        return False

    def row(self) -> Row:
        now = time.monotonic()
        channels: List[Tuple[Channel, Optional[float]]] = []
        total_name, total_w = None, None
        total_err_w: Optional[float] = None
        errors: Dict[str, Optional[float]] = {}
        accuracies = self._accuracies()
        for st in self.sampler.traces():
            t, v = st.trace.slice(-math.inf if _has_energy(st.channels) else now, now)
            values: Dict[str, Optional[float]] = {}
            for k, channel in enumerate(st.channels):
                value: Optional[float] = None
                if channel.kind == KIND_ENERGY:
                    if len(t) >= 2:
                        value = power_between((t[-2], v[-2, k]), t[-1], v[-1, k])
                elif len(t) and not math.isnan(v[-1, k]):
                    value = float(v[-1, k])
                values[channel.name] = value
                channels.append((channel, value))
                acc = accuracies.get(channel.key)
                errors[channel.key] = (acc.worst_case_w(value)
                                       if acc is not None and value is not None else None)
            if total_name is None and st.total is not None:
                total_name, total_w = st.total.name, total_power_w(st.total, values)
                parts = [errors.get(f"{st.channels[0].source}/{name}")
                         for name in st.total.channels] if st.channels else [None]
                total_err_w = (None if total_w is None or any(p is None for p in parts)
                               else float(sum(parts)))  # type: ignore[arg-type]
        board = read_now(self.root, self.board, loads=True)
        loads = cpu_load_pct(self._cpu_times, board.cpu_times)
        self._cpu_times = board.cpu_times
        return Row(now - self.t0, tuple(channels), total_name, total_w, board.clocks,
                   board.temperatures_c, board.power_mode, board.gpu_load_pct,
                   errors, total_err_w, loads, board.memory_mb, board.fan_pwm)


def _has_energy(channels: Sequence[Channel]) -> bool:
    return any(c.kind == KIND_ENERGY for c in channels)


def line(row: Row, board: Board, simulated: bool) -> str:
    """One reading on one line, tegrastats' way (what `monitor` prints when its output is not a
    terminal, or with --lines): the total first (once), the other rails, per-core CPU load at
    its cluster's clock (`off` for an offline core), GPU clock and load, EMC clock, RAM, fan,
    temperatures, the power mode. Names as `info` gives them."""
    parts = [f"t={row.t_s:.1f}s"]
    if row.total_name:
        parts.append(f"{row.total_name} {_w(row.total_w, row.total_uncertainty_w)}")
    rails = [f"{c.name} {_w(w, row.channel_uncertainty_w(c))}" for c, w in row.channels
             if c.name != row.total_name]
    if rails:
        parts.append(" ".join(rails))
    parts.append(cpu_part(row, board))
    for clock in row.clocks:
        if clock.domain == "gpu":
            load = "?" if row.gpu_load_pct is None else f"{row.gpu_load_pct:.0f}%"
            parts.append(f"GPU {load}@{_mhz(clock.cur_hz)}")
        elif clock.domain == "emc":
            parts.append(f"EMC @{_mhz(clock.cur_hz)}")
    if row.memory_mb is not None:
        parts.append(f"RAM {row.memory_mb[0]:.0f}/{row.memory_mb[1]:.0f}MB")
    if row.fan_pwm is not None:
        parts.append(f"fan {row.fan_pwm}/255")
    if row.temps_c:
        parts.append(" ".join(f"{name}@{temp:.1f}C" for name, temp in row.temps_c.items()))
    if row.power_mode:
        parts.append(f"mode {row.power_mode['text']}")
    return " | ".join(parts) + (" [SIMULATED]" if simulated else "")


def _mhz(hz: Optional[int]) -> str:
    return "?" if hz is None else f"{hz / 1e6:.0f}MHz"


def _w(watts: Optional[float], err_w: Optional[float]) -> str:
    if watts is None:
        return "-"
    if err_w is None:
        return f"{significant(watts)}W"
    return plus_minus(watts, err_w).replace(" +- ", "W+-")  # digits from the uncertainty


def cpu_part(row: Row, board: Board) -> str:
    """CPU [12%@1479,off,...]MHz: each core's load at its policy's clock, in core order."""
    hz_of = {}
    for policy, clock in zip(board.cpu.policies, [c for c in row.clocks if c.domain == "cpu"]):
        for core in policy.cpus:
            hz_of[core] = clock.cur_hz
    cores = sorted(set(hz_of) | set(row.cpu_load_pct))
    if not cores:
        return "CPU -"
    cells = []
    for core in cores:
        if core not in row.cpu_load_pct and row.cpu_load_pct:
            cells.append("off")  # /proc/stat lists online cores only
            continue
        load = row.cpu_load_pct.get(core)
        text = "?" if load is None else f"{load:.0f}%"
        hz = hz_of.get(core)
        cells.append(text + (f"@{hz / 1e6:.0f}" if hz else ""))
    return "CPU [" + ",".join(cells) + "]" + ("MHz" if hz_of else "")


def csv_header(row: Row) -> List[str]:
    return ["t_s"] + [f"{c.name}_w" for c, _ in row.channels] + ["total_w", "simulated"]


def csv_values(row: Row, simulated: bool = False) -> List[str]:
    def fmt(w: Optional[float]) -> str:
        return "" if w is None else f"{w:.4f}"

    return ([f"{row.t_s:.4f}"] + [fmt(w) for _, w in row.channels] + [fmt(row.total_w)]
            + ["yes" if simulated else "no"])


class CsvLog:
    """Appends rows to a CSV file, header first, flushed per row (nothing lost on Ctrl-C)."""

    def __init__(self, path: Path, simulated: bool):
        self.path = path
        self.simulated = simulated
        self._file: Optional[TextIO] = None

    def write(self, row: Row) -> None:
        if self._file is None:
            new = not self.path.exists() or self.path.stat().st_size == 0
            self._file = open(self.path, "a", encoding="utf-8")
            if new:  # the header is the first line: CSV readers take it as one
                self._file.write(",".join(csv_header(row)) + "\n")
        self._file.write(",".join(csv_values(row, self.simulated)) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
