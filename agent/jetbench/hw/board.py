"""Board detection: read the tree under a Root and describe what is there.

The result is data (`Board`), not behaviour: clock domains in `hw/clocks/` read and write through
the paths found here. Families are known from the device tree; the knobs themselves are found by
looking at which files exist, so an L4T release that moves a file is a data change, not a branch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .fs import Root

SIM_MARKER = "/etc/jetbench/simulated.json"

SOC_NAMES = {
    "tegra210": "Tegra X1 (T210)",
    "tegra186": "Tegra X2 (T186)",
    "tegra194": "Xavier (T194)",
    "tegra234": "Orin (T234)",
}
# devfreq `device/of_node/name` of the GPU on each SoC generation.
GPU_OF_NODE_NAMES = ("gpu", "gp10b", "gv11b", "ga10b")


@dataclass(frozen=True)
class Family:
    key: str
    soc: str
    compatible: Tuple[str, ...]  # board part numbers that identify it
    model_words: Tuple[str, ...]  # words of /proc/device-tree/model that identify it
    total_rail: Optional[str]  # whole-module total rail; None = sum of connected channels


# Order matters: the first family whose part number or model words match wins.
FAMILIES: Tuple[Family, ...] = (
    Family("nano", "tegra210", ("nvidia,p3450-0000", "nvidia,p3448"), ("nano",), "POM_5V_IN"),
    Family("tx1", "tegra210", ("nvidia,p2371-2180", "nvidia,p2180"), ("tx1",), "VDD_IN"),
    Family("tx2-nx", "tegra186", ("nvidia,p3509-0000+p3636-0001", "nvidia,p3636"), ("tx2 nx",),
           "VDD_IN"),
    Family("tx2", "tegra186", ("nvidia,p2771-0000", "nvidia,p3310", "nvidia,p3489"), ("tx2",),
           "VDD_IN"),
    Family("xavier-nx", "tegra194", ("nvidia,p3668", "nvidia,p3509-0000+p3668-0000"),
           ("xavier nx",), "VDD_IN"),
    Family("xavier-agx", "tegra194", ("nvidia,p2972-0000", "nvidia,p2888"), ("agx xavier",),
           None),
    Family("orin-nano", "tegra234", ("nvidia,p3767", "nvidia,p3768"), ("orin nano", "orin nx"),
           "VDD_IN"),
    Family("orin-agx", "tegra234", ("nvidia,p3701", "nvidia,p3737"), ("agx orin",), None),
)
TOTAL_RAIL_NAMES = ("VDD_IN", "POM_5V_IN")


@dataclass(frozen=True)
class CpuPolicy:
    """CPUs sharing one cpufreq policy (a cluster). Frequencies in Hz (sysfs says kHz)."""

    name: str  # "policy0", or "cpu0" on kernels without policy directories
    path: str  # the cpufreq directory
    cpus: Tuple[int, ...]
    available_hz: Tuple[int, ...]
    governors: Tuple[str, ...]
    min_hz: int  # cpuinfo limits
    max_hz: int


@dataclass(frozen=True)
class CpuInfo:
    policies: Tuple[CpuPolicy, ...]
    online_files: Tuple[str, ...]  # cpuN/online files that exist (cpu0 often has none)
    idle_files: Tuple[str, ...]  # cpuN/cpuidle/stateK/disable for K >= 1
    cpuquiet_enable: Optional[str]  # TX1 on R24
    cluster_active: Optional[str]  # /sys/kernel/cluster/active (R24)


@dataclass(frozen=True)
class GpuInfo:
    kind: str  # "devfreq" | "debugfs"
    name: str
    control: str  # devfreq node dir, or the debugfs override dir
    device: Optional[str]  # the GPU device dir (railgate_enable, load)
    available_hz: Tuple[int, ...]
    max_hz: int
    min_hz: int
    railgate: Optional[str]
    cur_freq: str  # file with the current rate, Hz


@dataclass(frozen=True)
class EmcInfo:
    kind: str  # "debugfs-clock" (R24) | "debugfs-clk" (R28+) | "bpmp"
    lock: str
    lock_value: str  # what to write to lock
    rate: str
    max_hz: int  # after the emc_iso_cap rule
    available_hz: Tuple[int, ...]  # empty when the kernel lists none (any rate <= max)
    cur_freq: Optional[str]
    iso_cap_hz: Optional[int]


@dataclass(frozen=True)
class FanInfo:
    pwm: str
    manual: Optional[str]  # temp_control (write 0 for manual), if present
    max_pwm: int = 255


@dataclass(frozen=True)
class ThermalZone:
    name: str
    path: str


@dataclass(frozen=True)
class Rail:
    """One INA3221 channel. Reading it is the power sources' job; this only says where it is."""

    name: str
    device: str  # iio:deviceK dir (iio) or hwmon/hwmonK dir (hwmon)
    channel: int  # as in the file names: 0-based (iio), 1-based (hwmon)
    layout: str  # "iio" | "hwmon"
    point: str  # "module_input" | "rail"
    sensor: str = ""  # "1-0040"


@dataclass(frozen=True)
class Board:
    model: str
    family: str
    soc: Optional[str]
    l4t: Optional[str]
    simulated: bool
    cpu: CpuInfo
    gpu: Optional[GpuInfo]
    emc: Optional[EmcInfo]
    fan: Optional[FanInfo]
    thermal_zones: Tuple[ThermalZone, ...]
    rails: Tuple[Rail, ...]
    total_rail: Optional[str]  # None with rails present = the sum of connected channels
    notes: Tuple[str, ...] = field(default=())

    @property
    def is_jetson(self) -> bool:
        return self.soc is not None

    @property
    def can_pin(self) -> bool:
        return bool(self.cpu.policies) or self.gpu is not None or self.emc is not None


# -- identification ------------------------------------------------------------------------------


def parse_l4t_release(text: str) -> Optional[str]:
    """'# R32 (release), REVISION: 7.1, ...' -> 'R32.7.1'."""
    match = re.search(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*([0-9.]+)", text)
    if not match:
        return None
    return f"R{match.group(1)}.{match.group(2).rstrip('.')}"


def identify_family(model: str, compatible: List[str]) -> Optional[Family]:
    lowered = model.lower()
    for family in FAMILIES:
        if any(c.startswith(p) for c in compatible for p in family.compatible):
            return family
    for family in FAMILIES:
        if any(word in lowered for word in family.model_words):
            return family
    return None


def soc_from_compatible(compatible: List[str]) -> Optional[str]:
    for entry in compatible:
        match = re.match(r"nvidia,(tegra\d+)$", entry)
        if match:
            return match.group(1)
    return None


# -- detection -----------------------------------------------------------------------------------


def detect(root: Root) -> Board:
    """Describe the board under `root`. Never raises for a missing optional file."""
    model = root.read("/proc/device-tree/model", default="")
    compatible = root.read_strings("/proc/device-tree/compatible", default=[])
    soc = soc_from_compatible(compatible)
    family = identify_family(model, compatible) if (soc or model) else None
    if soc is None and family is not None:
        soc = family.soc
    l4t = parse_l4t_release(root.read("/etc/nv_tegra_release", default=""))
    marker = root.read(SIM_MARKER, default="")
    simulated = bool(marker)
    notes: List[str] = []
    if simulated:
        try:
            notes.append(f"simulated board ({json.loads(marker).get('board', '?')})")
        except ValueError:
            notes.append("simulated board")

    cpu = _detect_cpu(root)
    gpu = _detect_gpu(root) if soc else None
    emc = _detect_emc(root) if soc else None
    rails = detect_rails(root)
    if soc:
        key = family.key if family else soc
        if family and family.key == "tx1" and l4t and l4t.startswith("R24"):
            key = "tx1-r24"
        total = family.total_rail if family else None
        names = {r.name for r in rails}
        if total is None or total not in names:
            # Rail names differ between releases: fall back to any known total rail present.
            total = next((n for n in TOTAL_RAIL_NAMES if n in names), None)
        display = model or f"NVIDIA Jetson ({SOC_NAMES.get(soc, soc)})"
    else:
        key = "generic" if cpu.policies else "none"
        total = None
        display = model or ("Generic Linux host" if cpu.policies else "Linux host (no cpufreq)")
        if not cpu.policies:
            notes.append("no cpufreq: nothing to pin here (a container or VM?)")
    return Board(
        model=display,
        family=key,
        soc=soc,
        l4t=l4t,
        simulated=simulated,
        cpu=cpu,
        gpu=gpu,
        emc=emc,
        fan=_detect_fan(root),
        thermal_zones=_detect_thermal(root),
        rails=tuple(rails),
        total_rail=total,
        notes=tuple(notes),
    )


def _khz_to_hz(values: List[int]) -> Tuple[int, ...]:
    return tuple(sorted({v * 1000 for v in values}))


def _detect_cpu(root: Root) -> CpuInfo:
    base = "/sys/devices/system/cpu"
    cpu_dirs = [n for n in root.listdir(base) if re.fullmatch(r"cpu\d+", n)]
    cpu_dirs.sort(key=lambda n: int(n[3:]))
    policies: List[CpuPolicy] = []
    policy_names = [n for n in root.listdir(f"{base}/cpufreq") if re.fullmatch(r"policy\d+", n)]
    policy_names.sort(key=lambda n: int(n[6:]))
    if policy_names:
        for name in policy_names:
            path = f"{base}/cpufreq/{name}"
            cpus = tuple(root.read_ints(f"{path}/related_cpus", default=[int(name[6:])]))
            policies.append(_policy(root, name, path, cpus))
    else:
        # Kernels before policy directories (L4T R24, 3.10): cpuN/cpufreq, shared ones are links.
        groups: Dict[str, List[int]] = {}
        for name in cpu_dirs:
            if root.exists(f"{base}/{name}/cpufreq/scaling_governor"):
                real = root.resolve(f"{base}/{name}/cpufreq")
                groups.setdefault(real, []).append(int(name[3:]))
        for real, cpus in groups.items():
            policies.append(_policy(root, f"cpu{min(cpus)}", real, tuple(cpus)))
    policies = [p for p in policies if p.governors]
    online = tuple(f"{base}/{n}/online" for n in cpu_dirs if root.exists(f"{base}/{n}/online"))
    idle: List[str] = []
    for name in cpu_dirs:
        states = [s for s in root.listdir(f"{base}/{name}/cpuidle") if s.startswith("state")]
        for state in sorted(states, key=lambda s: int(s[5:])):
            # state0 is WFI/polling: it cannot (and need not) be disabled.
            disable = f"{base}/{name}/cpuidle/{state}/disable"
            if state != "state0" and root.exists(disable):
                idle.append(disable)
    cpuquiet = f"{base}/cpuquiet/tegra_cpuquiet/enable"
    cluster = "/sys/kernel/cluster/active"
    return CpuInfo(
        policies=tuple(policies),
        online_files=online,
        idle_files=tuple(idle),
        cpuquiet_enable=cpuquiet if root.exists(cpuquiet) else None,
        cluster_active=cluster if root.exists(cluster) else None,
    )


def _policy(root: Root, name: str, path: str, cpus: Tuple[int, ...]) -> CpuPolicy:
    available = root.read_ints(f"{path}/scaling_available_frequencies", default=[])
    lo = root.read_int(f"{path}/cpuinfo_min_freq", default=min(available, default=0))
    hi = root.read_int(f"{path}/cpuinfo_max_freq", default=max(available, default=0))
    governors = tuple(root.read(f"{path}/scaling_available_governors", default="").split())
    return CpuPolicy(
        name=name,
        path=path,
        cpus=cpus,
        available_hz=_khz_to_hz(available),
        governors=governors,
        min_hz=lo * 1000,
        max_hz=hi * 1000,
    )


def find_gpu_devfreq(root: Root) -> Optional[str]:
    """The GPU's devfreq node, found by its device-tree node name (never a hard-coded path)."""
    for node in root.glob("/sys/class/devfreq/*"):
        name = root.read(f"{node}/device/of_node/name", default="")
        if name in GPU_OF_NODE_NAMES:
            return node
    return None


def _detect_gpu(root: Root) -> Optional[GpuInfo]:
    node = find_gpu_devfreq(root)
    if node is not None:
        real = root.resolve(node)
        device = root.resolve(f"{node}/device")
        table = tuple(sorted(set(root.read_ints(f"{real}/available_frequencies", default=[]))))
        railgate = f"{device}/railgate_enable"
        return GpuInfo(
            kind="devfreq",
            name=real.rsplit("/", 1)[-1],
            control=real,
            device=device,
            available_hz=table,
            max_hz=max(table) if table else root.read_int(f"{real}/max_freq", default=0),
            min_hz=min(table) if table else root.read_int(f"{real}/min_freq", default=0),
            railgate=railgate if root.exists(railgate) else None,
            cur_freq=f"{real}/cur_freq",
        )
    override = "/sys/kernel/debug/clock/override.gbus"
    if root.exists(f"{override}/rate"):
        # L4T R24: the clock framework's debugfs override; possible_rates is in kHz (unconfirmed).
        rates = root.read_ints("/sys/kernel/debug/clock/gbus/possible_rates", default=[])
        table = _khz_to_hz(rates)
        hi = root.read_int("/sys/kernel/debug/clock/gbus/max", default=max(table, default=0))
        lo = root.read_int("/sys/kernel/debug/clock/gbus/min", default=min(table, default=0))
        device = next(iter(root.glob("/sys/devices/platform/host1x/gpu.0")), None) or next(
            iter(root.glob("/sys/devices/gpu.0")), None
        )
        railgate = f"{device}/railgate_enable" if device else None
        return GpuInfo(
            kind="debugfs",
            name="gbus",
            control=override,
            device=device,
            available_hz=table,
            max_hz=hi,
            min_hz=lo,
            railgate=railgate if railgate and root.exists(railgate) else None,
            cur_freq="/sys/kernel/debug/clock/gbus/rate",
        )
    return None


# tegra210's debugfs EMC overrides, newest first: (kind, override dir, lock file, rate file,
# max-rate file, possible-rates file (kHz), current-rate file).
_EMC_OVERRIDES = (
    ("debugfs-clk", "/sys/kernel/debug/clk/override.emc", "clk_state", "clk_update_rate",
     "/sys/kernel/debug/tegra_bwmgr/emc_max_rate", "/sys/kernel/debug/clk/emc/clk_possible_rates",
     "/sys/kernel/debug/clk/emc/clk_rate"),  # L4T R28+
    ("debugfs-clock", "/sys/kernel/debug/clock/override.emc", "state", "rate",
     "/sys/kernel/debug/clock/emc/max", "/sys/kernel/debug/clock/emc/possible_rates",
     "/sys/kernel/debug/clock/emc/rate"),  # L4T R24
)


def _detect_emc(root: Root) -> Optional[EmcInfo]:
    bpmp = "/sys/kernel/debug/bpmp/debug/clk/emc"
    if root.exists(f"{bpmp}/rate"):
        hi = root.read_int(f"{bpmp}/max_rate", default=0)
        cap = root.read_int("/sys/kernel/nvpmodel_emc_cap/emc_iso_cap", default=0)
        capped = cap if 0 < cap < hi else hi
        return EmcInfo(
            kind="bpmp",
            lock=f"{bpmp}/mrq_rate_locked",
            lock_value="1",
            rate=f"{bpmp}/rate",
            max_hz=capped,
            available_hz=(),
            cur_freq=f"{bpmp}/rate",
            iso_cap_hz=cap or None,
        )
    for kind, override, lock, rate, max_file, rates_file, cur in _EMC_OVERRIDES:
        if root.exists(f"{override}/{rate}"):
            return EmcInfo(
                kind=kind,
                lock=f"{override}/{lock}",
                lock_value="1",
                rate=f"{override}/{rate}",
                max_hz=root.read_int(max_file, default=0),
                available_hz=_khz_to_hz(root.read_ints(rates_file, default=[])),
                cur_freq=cur,
                iso_cap_hz=None,
            )
    return None


def _detect_fan(root: Root) -> Optional[FanInfo]:
    if root.exists("/sys/devices/pwm-fan/target_pwm"):
        manual = "/sys/devices/pwm-fan/temp_control"
        return FanInfo("/sys/devices/pwm-fan/target_pwm", manual if root.exists(manual) else None)
    for pwm in root.glob("/sys/devices/platform/pwm-fan/hwmon/hwmon*/pwm1"):
        return FanInfo(pwm, None)
    if root.exists("/sys/kernel/debug/tegra_fan/target_pwm"):
        return FanInfo("/sys/kernel/debug/tegra_fan/target_pwm", None)
    return None


def _detect_thermal(root: Root) -> Tuple[ThermalZone, ...]:
    zones = []
    for path in root.glob("/sys/class/thermal/thermal_zone*"):
        name = root.read(f"{path}/type", default="")
        if name:
            zones.append(ThermalZone(name, path))
    zones.sort(key=lambda z: int(re.sub(r"\D", "", z.path.rsplit("/", 1)[-1]) or 0))
    return tuple(zones)


def detect_rails(root: Root) -> List[Rail]:
    """Every connected INA3221 channel, both driver layouts (NC and the shunt sum skipped)."""
    rails: List[Rail] = []
    for dev in root.glob("/sys/bus/i2c/drivers/ina3221x/*-00*"):
        sensor = dev.rsplit("/", 1)[-1]
        for iio in root.glob(f"{dev}/iio:device*"):
            real = root.resolve(iio)
            for channel in range(3):
                name = root.read(f"{real}/rail_name_{channel}", default="")
                if name and name.upper() != "NC":
                    rails.append(Rail(name, real, channel, "iio", _point(name), sensor))
    for dev in root.glob("/sys/bus/i2c/drivers/ina3221/*-00*"):
        sensor = dev.rsplit("/", 1)[-1]
        for hwmon in root.glob(f"{dev}/hwmon/hwmon*"):
            real = root.resolve(hwmon)
            for channel in (1, 2, 3):  # in7 is the shunt-voltage sum: never a rail
                name = root.read(f"{real}/in{channel}_label", default="")
                if name and name.upper() != "NC":
                    rails.append(Rail(name, real, channel, "hwmon", _point(name), sensor))
    return rails


def _point(name: str) -> str:
    return "module_input" if name in TOTAL_RAIL_NAMES else "rail"
