"""Power-sensor families: the one table that knows each family's files and units.

A family is a chip and a driver layout (docs/hardware.md, "Power rails" and "INA238"):

- `ina3221-iio` (driver `ina3221x`): `iio:deviceK/`, labels `rail_name_N`, channels 0-2,
  power `in_powerN_input` in mW (else `in_voltageN_input` mV x `in_currentN_input` mA);
- `ina3221-hwmon` (driver `ina3221`): `hwmon/hwmonK/`, labels `inN_label`, channels 1-3,
  no power file: `inN_input` mV x `currN_input` mA;
- `ina238` (driver `ina238`): `hwmon/hwmonK/`, no labels (one channel, named VIN), power
  `power1_input` in microwatts (`in1_input` bus mV, `curr1_input` mA).

Board detection finds rails with it, the reader reads them with it: a new sensor is a new row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

# Names of module-input rails: the whole module's total where a board has one.
MODULE_INPUT_NAMES = ("VDD_IN", "POM_5V_IN")


@dataclass(frozen=True)
class SensorFamily:
    key: str
    chip: str  # what a power source reading these rails is called ("ina3221", "ina238")
    driver: str  # /sys/bus/i2c/drivers/<driver>/<bus>-00<addr>
    container: str  # glob below the device: where the channel files are
    layout: str  # "iio" | "hwmon"
    channels: Tuple[int, ...]  # channel numbers as in the file names
    label_file: Optional[str]  # "{n}" is the channel; None: the chip has no labels
    default_label: Optional[str]  # the name of an unlabelled channel
    point: Optional[str]  # fixed measurement point; None: from the rail name
    power_file: Optional[str]  # one file giving power, when the driver has one
    power_w_per_unit: float
    volt_file: str  # bus voltage, mV
    curr_file: str  # current, mA
    interval_file: Optional[str]  # one conversion cycle, ms (hwmon `update_interval`)
    default_period_s: float
    samples_file: Optional[str] = None  # averaging count: a reading refreshes every cycle x it

    def label(self, n: int) -> Optional[str]:
        return self.label_file.format(n=n) if self.label_file else None

    def power(self, n: int) -> Optional[str]:
        return self.power_file.format(n=n) if self.power_file else None

    def volts_amps(self, n: int) -> Tuple[str, str]:
        return self.volt_file.format(n=n), self.curr_file.format(n=n)

    @property
    def unit(self) -> str:
        return {1e-3: "mW", 1e-6: "uW"}[self.power_w_per_unit] if self.power_file else "mV x mA"


MV_X_MA_TO_W = 1e-6

FAMILIES: Tuple[SensorFamily, ...] = (
    # The carrier board's input first: where present it is the whole board's total.
    SensorFamily(
        key="ina238", chip="ina238", driver="ina238", container="hwmon/hwmon*", layout="hwmon",
        channels=(1,), label_file=None, default_label="VIN", point="board_input",
        power_file="power{n}_input", power_w_per_unit=1e-6,  # microwatts
        volt_file="in{n}_input", curr_file="curr{n}_input",  # in0 is the shunt voltage
        # No update_interval in the mainline driver; its default ADC setting (three 1052 us
        # conversions, 16 averages) updates about every 50 ms (unconfirmed on Thor's kernel).
        interval_file=None, default_period_s=0.05,
    ),
    SensorFamily(
        key="ina3221-iio", chip="ina3221", driver="ina3221x", container="iio:device*",
        layout="iio", channels=(0, 1, 2), label_file="rail_name_{n}", default_label=None,
        point=None, power_file="in_power{n}_input", power_w_per_unit=1e-3,  # milliwatts
        volt_file="in_voltage{n}_input", curr_file="in_current{n}_input",
        # The iio driver exposes no update interval; its continuous mode converts in ~ms.
        interval_file=None, default_period_s=0.01,
    ),
    SensorFamily(
        key="ina3221-hwmon", chip="ina3221", driver="ina3221", container="hwmon/hwmon*",
        layout="hwmon", channels=(1, 2, 3),  # in7 is the shunt-voltage sum: never a rail
        label_file="in{n}_label", default_label=None, point=None,
        power_file=None, power_w_per_unit=MV_X_MA_TO_W,  # no power file: P = V x I
        volt_file="in{n}_input", curr_file="curr{n}_input",
        # The mainline driver's update_interval is one conversion cycle, channels x (bus +
        # shunt conversion time), without the averaging (NVIDIA's 2022 fix made writing it
        # agree): a reading refreshes every update_interval x samples (TI SBOS576 8.4.2.2).
        interval_file="update_interval", default_period_s=0.01, samples_file="samples",
    ),
)
BY_KEY = {f.key: f for f in FAMILIES}


def family(key: str) -> SensorFamily:
    try:
        return BY_KEY[key]
    except KeyError:
        raise ValueError(f"unknown sensor family {key!r}") from None


def family_for(chip: str, layout: str) -> SensorFamily:
    """The family of a (chip, layout) pair: ('ina3221', 'iio') -> ina3221-iio."""
    for fam in FAMILIES:
        if fam.chip == chip and fam.layout == layout:
            return fam
    raise ValueError(f"unknown sensor {chip!r} with layout {layout!r}")


def point_for(fam: SensorFamily, name: str) -> str:
    """Where a channel measures: the family's fixed point, else the module input by name."""
    if fam.point:
        return fam.point
    return "module_input" if name.upper() in MODULE_INPUT_NAMES else "rail"
