"""The daemon's power readings: each source read once per check, watts per rail (an energy
counter's from its previous reading), the total as the source defines it, and the energy per
rail since the daemon started (for `jetbench_energy_joules_total`), and the wall's, from
the total and the board's calibration (run/calibration.py), where it holds.

`daemon --meter SPEC` (measure's specs, and `calibrated`) chooses the sources instead of the
board's own: the first meter given is the total the daemon's power, and so --tune's items per
joule, comes from (`power_source`: which channel, its scope and basis); `calibrated` makes it
the wall computed from the board's total by its calibration. A meter that does not open stops
the daemon before anything is pinned (service.py opens them first)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

from ..documents import CalibrationDoc
from ..errors import HardwareError, JetbenchError
from ..hw.board import Board
from ..hw.fs import Root
from ..hw.meters.base import Channel, PowerSource, power_between, scope_of, total_power_w
from ..hw.meters.registry import auto_sources, open_sources
from ..hw.nvml import nvml_available
from ..run.calibration import RANGE_MARGIN, matching_calibration
from ..sampling.calibration_fit import predict
from ..sampling.energy_totals import EnergyTotals
from .held import PowerSourceDoc, RailDoc, RailTotalDoc

if TYPE_CHECKING:
    from .live_tuning import TuneConfig


CALIBRATED = "calibrated"  # --meter calibrated: the wall, from the total and the calibration


class RailMeter:
    def __init__(self, sources: Sequence[PowerSource], on_error: Callable[[str], None]):
        self.sources = list(sources)
        self._on_error = on_error
        self._last: Dict[str, Tuple[float, float]] = {}
        # Per (rail, point, source): grows across re-pins, leases and reloads; 0 at start only.
        self._energy = EnergyTotals()
        # set by the daemon once the board is known (run/calibration.py mismatch checked)
        self.calibration: Optional[CalibrationDoc] = None
        # (monotonic t, J): the total's energy since the daemon started, as of the last read
        self.total_energy: Optional[Tuple[float, float]] = None
        self.wall_governs = False  # --meter calibrated: the calibrated wall is the total
        self.power_source: Optional[PowerSourceDoc] = None  # what the total is, as of a read

    def open_for(self, root: Root, board: Board, tune: Optional[TuneConfig],
                 meters: Sequence[str] = ()) -> None:
        """Open the daemon's power sources: `meters` (--meter specs) where given, else the
        board's own (`auto`), or under --tune of an NVIDIA GPU's clocks on a host without rails
        NVML's GPU --tune-gpu names (its items per joule are the GPU's, not the CPU package's
        that `auto` would read); and the board's calibration, where one matches it.
        JetbenchError where a source does not open (naming the --meter given)."""
        if meters:
            self._open_meters(root, board, meters)
            return
        sources = auto_sources(root, board.rails, board.total_rail)
        if tune is not None and "gpu" in (tune.knobs or ("gpu",)) and not board.rails and \
                root.is_host and nvml_available():
            from ..hw.meters.nvml import NvmlSource

            sources = [NvmlSource(tune.gpu_index)]
        for source in sources:
            source.open()
        self.sources = [s for s in sources if s.channels()]
        self.calibration = matching_calibration(root, board)

    def _open_meters(self, root: Root, board: Board, meters: Sequence[str]) -> None:
        """--meter: each spec's sources opened in the order given (the first one's total is
        the daemon's), or none kept: every one opened so far is closed again."""
        specs = [m for m in meters if m.strip().lower() != CALIBRATED]
        self.wall_governs = len(specs) < len(meters)
        self.calibration = matching_calibration(root, board)
        if self.wall_governs and self.calibration is None:
            raise HardwareError("--meter calibrated: this board has no wall calibration that "
                                "holds for it", hint="calibrate it with an external meter "
                                "(`jetbench calibrate --meter SPEC`), or import one made on "
                                "the same module and carrier (`calibrate --import FILE`)")
        opened: List[PowerSource] = []
        for spec in specs or ["auto"]:
            for source in open_sources([spec], root, rails=board.rails,
                                       total_rail=board.total_rail):
                try:
                    source.open()
                except JetbenchError as err:
                    for done in opened:
                        done.close()
                    raise HardwareError(f"--meter {spec}: {err.message}", path=err.path,
                                        hint=err.hint) from None
                opened.append(source)
        self.sources = [s for s in opened if s.channels()]
        if not self.sources:
            raise HardwareError(f"--meter {' '.join(meters)}: no power channel to read",
                                hint="see `jetbench info` for what this board has")

    def read(self) -> Tuple[List[RailDoc], Optional[RailTotalDoc]]:
        """Every rail's watts and energy so far, and the total (None: no source names one)."""
        rails: List[RailDoc] = []
        total: Optional[RailTotalDoc] = None
        for source in self.sources:
            try:
                reading = source.read()
            except JetbenchError as err:
                self._on_error(f"power reading failed: {err}")
                for channel in source.channels():  # a gap: nothing integrated across it
                    self._integrate(channel, None, time.monotonic())
                continue
            values: Dict[str, Optional[float]] = {}
            for channel, value in zip(source.channels(), reading.power_w):
                watts = self._watts(channel, value, reading.t_s)
                values[channel.name] = watts
                rails.append({"name": channel.name, "point": channel.point,
                              "source": channel.source, "power_w": watts,
                              "energy_j": self._integrate(channel, value, reading.t_s),
                              "scope": scope_of(channel.point), "basis": "measured"})
            spec = source.total()
            if total is None and spec is not None:
                total = {"name": spec.name, "point": spec.point,
                         "power_w": total_power_w(spec, values), "calibration": None}
                self.power_source = {"name": spec.name, "source": source.name,
                                     "point": spec.point, "scope": scope_of(spec.point),
                                     "basis": "measured"}
                rails += self._wall(total, reading.t_s)
        if self.wall_governs:  # --meter calibrated: the wall's watts and energy are the total's
            wall = next((r for r in rails if r.get("basis") == "calibrated"), None)
            self.power_source = {"name": "wall", "source": "calibrated", "point": "calibrated",
                                 "scope": "wall", "basis": "calibrated"}
            self.total_energy = None if wall is None or wall["power_w"] is None else \
                (time.monotonic(), wall["energy_j"])
            return rails, total
        # the measured rails' energy (the calibrated wall is another scope, not a part of it)
        self.total_energy = _total_energy([r for r in rails if r.get("basis") != "calibrated"],
                                          total)
        return rails, total

    def _wall(self, total: RailTotalDoc, t_s: float) -> List[RailDoc]:
        """The calibrated wall's watts and energy (a gap where the total is outside the range
        the calibration covered)."""
        cal = self.calibration
        if cal is None or cal.get("total") != total["name"]:
            return []
        total["calibration"] = cal.get("label")
        lo, hi = cal["range_w"]
        board_w = total["power_w"]
        watts = predict(cal["model"]["coefficients"], board_w) if board_w is not None and \
            lo * (1 - RANGE_MARGIN) <= board_w <= hi * (1 + RANGE_MARGIN) else None
        key = ("wall", "calibrated", "calibrated")
        self._energy.add_power(key, t_s, watts)
        return [{"name": "wall", "point": "calibrated", "source": "calibrated", "power_w": watts,
                 "energy_j": self._energy.joules(key), "scope": "wall", "basis": "calibrated"}]

    def total_power_w(self) -> Optional[float]:
        """The board's total power now: the sources' total, else the sum of its rails."""
        rails, total = self.read()
        if self.wall_governs:
            return next((r["power_w"] for r in rails if r.get("basis") == "calibrated"), None)
        if total is not None and total.get("power_w") is not None:
            return total["power_w"]
        watts = [r["power_w"] for r in rails if r.get("power_w") is not None
                 and r.get("basis") != "calibrated"]
        return sum(w for w in watts if w is not None) if watts else None

    def _integrate(self, channel: Channel, value: Optional[float], t_s: float) -> float:
        """The channel's energy since the daemon started (J), this reading included."""
        key = (channel.name, channel.point, channel.source)
        if channel.kind == "power":
            self._energy.add_power(key, t_s, value)
        else:
            self._energy.add_counter(key, t_s, value)
        return self._energy.joules(key)

    def _watts(self, channel: Channel, value: Optional[float], t_s: float) -> Optional[float]:
        """Watts for a power channel; for an energy counter (joules), the mean power since the
        previous reading (None on the first one, or across a counter reset)."""
        if value is None or channel.kind == "power":
            return value
        last = self._last.get(channel.key)
        self._last[channel.key] = (t_s, value)
        return power_between(last, t_s, value)


def _total_energy(rails: Sequence[RailDoc], total: Optional[RailTotalDoc]
                  ) -> Optional[Tuple[float, float]]:
    """(now, J) of the total: its own channel's energy where the total is one channel (VDD_IN,
    an NVML GPU), else the sum of every rail's; None where a part is unknown."""
    named = [r for r in rails if total is not None and r["name"] == total["name"]]
    parts = named or list(rails)
    joules = [r.get("energy_j") for r in parts]
    if not parts or any(j is None for j in joules):
        return None
    return time.monotonic(), float(sum(j for j in joules if j is not None))
