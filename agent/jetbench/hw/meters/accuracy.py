"""How accurate each power channel is: the sensor's worst-case limits, as published.

- INA3221 (TI datasheet SBOS576, docs/hardware.md "Accuracy"): gain error 0.25% max on the shunt and
  on the bus reading, shunt offset 80 uV max (over the shunt resistance: `shuntN_resistor` in
  hwmon, micro-ohms, or the board's documented shunt), bus offset 16 mV max. P = V x I, so the
  worst case is  dP = 2 x 0.25% x P  +  V x 80 uV / R  +  I x 16 mV.
  Without a shunt resistance the offset term cannot be computed: the accuracy is "unknown".
- INA238 (TI datasheet SLYS025, Thor's carrier VIN): gain error 0.1% max on the shunt and on
  the bus reading, shunt offset 5 uV max, bus offset 5 mV max; the hwmon driver shows no shunt
  resistance, so it is taken from the chip's own readings (shunt mV / current), rounded down a
  half LSB of `in0_input` (1 mV) so the offset term is never understated.
- External meters: `?accuracy=READING%+RANGEW` in the meter spec (e.g. `0.1%+0.05W`: 0.1% of the
  reading plus 0.05 W). Without it: the WT310 family's published figure, else "unknown".
- Anything else (RAPL, NVML, jtop): "unknown" (NVML says why: its energy counter integrates a
  sensor that samples only part of the time on A100/H100).

`channel_accuracies()` reads the few files it needs (shunt resistors, bus voltages) once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Optional, Sequence

from ...errors import UsageError
from ..fs import Root
from .ina3221 import RailSource

if TYPE_CHECKING:
    from ..board import Rail
    from .base import PowerSource

INA3221_GAIN_FRAC = 0.0025  # max, each of the two readings
INA3221_SHUNT_OFFSET_V = 80e-6  # max
INA3221_BUS_OFFSET_V = 0.016  # max
INA238_GAIN_FRAC = 0.001  # max, each of the two readings
INA238_SHUNT_OFFSET_V = 5e-6  # max
INA238_BUS_OFFSET_V = 0.005  # max
# Shunts documented for boards whose driver exposes no `shuntN_resistor` (docs/hardware.md:
# 5 mOhm on Orin NX / Orin Nano per public carrier designs). Others: unknown.
DOCUMENTED_SHUNT_OHM: Dict[str, float] = {"orin-nano": 0.005}
# Yokogawa WT310/WT310E/WT332/WT333 power accuracy, 45-66 Hz: 0.1% of reading + 0.05% of range;
# the range part here is for the 100 W range (0.05 W). Give ?accuracy= for your range.
WT310_DEFAULT = ("0.1%", 0.001, 0.05)

_ACCURACY_RE = re.compile(r"^\s*([0-9.]+)\s*%\s*(?:\+\s*([0-9.]+)\s*(m?W)\s*)?$", re.IGNORECASE)


@dataclass(frozen=True)
class Accuracy:
    """One channel's worst-case limits. `known` False: no figure can be given (say why)."""

    basis: str
    known: bool = True
    gain_frac: float = 0.0  # fraction of each reading (INA: applies to V and to I)
    readings: int = 1  # how many readings the gain applies to (2 for V x I)
    offset_current_a: float = 0.0  # INA: shunt offset / shunt resistance
    offset_voltage_v: float = 0.0  # INA: bus offset
    bus_v: Optional[float] = None
    range_w: float = 0.0  # meters: the range part, in watts

    def worst_case_w(self, mean_w: float) -> Optional[float]:
        """The sensor's worst-case error on a mean power, in watts (None: unknown)."""
        if not self.known:
            return None
        err = self.readings * self.gain_frac * abs(mean_w) + self.range_w
        if self.offset_current_a or self.offset_voltage_v:
            if not self.bus_v:
                return None
            err += self.bus_v * self.offset_current_a
            err += abs(mean_w) / self.bus_v * self.offset_voltage_v
        return err


UNKNOWN = Accuracy("no published accuracy for this source", known=False)


def parse_accuracy(text: str) -> Accuracy:
    """`0.1%+0.05W` (or `0.5%`, `0.1%+50mW`) -> an Accuracy; UsageError when malformed."""
    m = _ACCURACY_RE.match(text)
    if not m:
        raise UsageError(f"bad meter accuracy {text!r}",
                         hint="READING%+RANGE_W, e.g. accuracy=0.1%+0.05W")
    reading = float(m.group(1)) / 100.0
    range_w = float(m.group(2) or 0.0) * (1e-3 if (m.group(3) or "W").lower() == "mw" else 1.0)
    return Accuracy(f"meter accuracy {text.strip()} (given)", gain_frac=reading, range_w=range_w)


def meter_accuracy(protocol: str, given: Optional[str]) -> Accuracy:
    if given:
        return parse_accuracy(given)
    if protocol == "wt310":
        text, frac, range_w = WT310_DEFAULT
        return Accuracy(f"WT310 family published accuracy {text} of reading + 0.05% of range "
                        f"(assumed 100 W range: {range_w} W)", gain_frac=frac, range_w=range_w)
    return Accuracy(f"{protocol} meter: no published accuracy (give ?accuracy=0.1%+0.05W)",
                    known=False)


INA3221_NAMES = ("ina3221", "ina3221x")  # the driver's `name` file (hwmon / iio)


def _ina_accuracy(root: Root, rail: Rail, family: Optional[str]) -> Accuracy:
    d, n = rail.device.rstrip("/"), rail.channel
    chip = root.read(f"{d}/name", default="") or ""
    if chip == "ina238":
        return _ina238_accuracy(root, rail)
    if chip not in INA3221_NAMES:  # another sensor family: these limits are not its own
        return Accuracy(f"{rail.name}: no accuracy table for sensor {chip or 'unknown'}",
                        known=False)
    if rail.layout == "hwmon":
        micro_ohm = root.read_int(f"{d}/shunt{n}_resistor", default=None)
        bus_mv = root.read_int(f"{d}/in{n}_input", default=None)
        shunt = micro_ohm * 1e-6 if micro_ohm else None
        where = f"shunt{n}_resistor {micro_ohm} uOhm"
    else:
        micro_ohm = None
        bus_mv = root.read_int(f"{d}/in_voltage{n}_input", default=None)
        shunt = None
        where = ""
    if shunt is None and family in DOCUMENTED_SHUNT_OHM:
        shunt = DOCUMENTED_SHUNT_OHM[family]
        where = f"documented {shunt * 1e3:g} mOhm shunt of {family}"
    if shunt is None:
        return Accuracy(f"INA3221 {rail.name}: shunt resistance unknown (no shuntN_resistor, "
                        "none documented for this board)", known=False)
    return _datasheet("INA3221", INA3221_GAIN_FRAC, INA3221_SHUNT_OFFSET_V,
                      INA3221_BUS_OFFSET_V, shunt, where, bus_mv)


def _datasheet(chip: str, gain_frac: float, shunt_offset_v: float, bus_offset_v: float,
               shunt_ohm: float, shunt_text: str, bus_mv: Optional[int]) -> Accuracy:
    """An INA's worst-case limits on P = V x I (module doc), its shunt from `shunt_text`."""
    return Accuracy(
        f"{chip} datasheet max: gain {gain_frac * 100:g}% on V and I, shunt offset "
        f"{shunt_offset_v * 1e6:g} uV / {shunt_text}, bus offset {bus_offset_v * 1e3:g} mV",
        gain_frac=gain_frac, readings=2,
        offset_current_a=shunt_offset_v / shunt_ohm,
        offset_voltage_v=bus_offset_v,
        bus_v=bus_mv / 1000.0 if bus_mv else None,
    )


def _ina238_accuracy(root: Root, rail: Rail) -> Accuracy:
    d = rail.device.rstrip("/")
    shunt_mv = root.read_int(f"{d}/in0_input", default=None)
    current_ma = root.read_int(f"{d}/curr1_input", default=None)
    bus_mv = root.read_int(f"{d}/in1_input", default=None)
    if not shunt_mv or not current_ma or shunt_mv < 1 or current_ma <= 0:
        return Accuracy(f"INA238 {rail.name}: shunt resistance unknown (the driver shows none, "
                        "and no current flows to infer it from)", known=False)
    ohm = (shunt_mv - 0.5) / current_ma  # half its 1 mV LSB down: never understated
    return _datasheet("INA238", INA238_GAIN_FRAC, INA238_SHUNT_OFFSET_V, INA238_BUS_OFFSET_V,
                      ohm, f"{ohm * 1e3:.2g} mOhm (inferred: shunt mV / current, rounded down)",
                      bus_mv)


def channel_accuracies(root: Root, sources: Sequence[PowerSource],
                       family: Optional[str] = None) -> Dict[str, Accuracy]:
    """Channel key ('ina3221/VDD_IN') -> its Accuracy, for every channel of `sources`."""
    out: Dict[str, Accuracy] = {}
    for source in sources:
        rails = {r.name: r for r in getattr(source, "rails", ())}
        given = getattr(source, "accuracy_spec", None)
        protocol = getattr(source, "protocol", None)
        for ch in source.channels():
            if ch.name in rails and isinstance(source, RailSource):
                out[ch.key] = _ina_accuracy(root, rails[ch.name], family)
            elif protocol is not None or given:
                out[ch.key] = meter_accuracy(str(protocol), given)
            else:  # a source may say why its accuracy is unknown (NVML's energy counter)
                why = getattr(source, "accuracy_unknown_because", None)
                out[ch.key] = Accuracy(why, known=False) if why else UNKNOWN
    return out
