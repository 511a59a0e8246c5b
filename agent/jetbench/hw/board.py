"""Board detection: read the tree under a Root and describe what is there.

The result is data (`Board`), not behaviour: clock domains in `hw/clocks/` read and write through
the paths found here. Families are known from the device tree (the tables, and identification by
them, are `board_tables.py`); the knobs themselves are found by looking at which files exist, so
an L4T release that moves a file is a data change, not a branch.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .board_tables import (
    GPU_ENTRY_PATTERNS,
    GPU_OF_NODE_NAMES,
    GPU_SANE_HZ,
    GPU_SIDE_ENTRY_PATTERNS,
    SOC_NAMES,
    TOTAL_RAIL_NAMES,
    identify_family,
    parse_l4t_release,
    soc_from_compatible,
)
from .emc_info import EmcInfo, detect_emc, khz_to_hz
from .fs import Root
from .meters.sensors import FAMILIES as SENSOR_FAMILIES
from .meters.sensors import SensorFamily, point_for
from .nvml import NvmlGpu
from .nvml import detect as detect_nvml_gpus
from .nvpmodel import PowerMode, read_power_mode

SIM_MARKER = "/etc/jetbench/simulated.json"

# Where the NVIDIA driver lists its GPUs by PCI address (Thor: railgating is PCI runtime PM).
NVIDIA_GPUS_DIR = "/proc/driver/nvidia/gpus"


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
    railgate: Optional[str]  # railgate_enable, or the PCI device's power/control (Thor)
    cur_freq: str  # file with the current rate (in hz_per_unit units)
    # What the railgate file holds (kept powered, may gate): railgate_enable "0"/"1", PCI
    # runtime PM "on"/"auto".
    railgate_values: Tuple[str, str] = ("0", "1")
    side_clocks: Tuple[Tuple[str, str], ...] = ()  # (name, devfreq dir): shown, never pinned
    hz_per_unit: int = 1  # devfreq files are Hz by ABI; 1000 where values only make sense as kHz


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
    """One power-sensor channel (INA3221, INA238). Reading it is the power sources' job; this
    only says where it is. Its files and units are its sensor family's (hw/meters/sensors.py)."""

    name: str
    device: str  # iio:deviceK dir (iio) or hwmon/hwmonK dir (hwmon)
    channel: int  # as in the file names: 0-based (iio), 1-based (hwmon)
    layout: str  # "iio" | "hwmon"
    point: str  # "module_input" | "rail" | "board_input"
    sensor: str = ""  # "1-0040"
    chip: str = "ina3221"  # "ina3221" | "ina238"


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
    power_mode: Optional[PowerMode] = None  # nvpmodel's current mode, read at detection
    # Discrete NVIDIA GPUs of a generic host, controlled through NVML (hw/nvml.py).
    nvml_gpus: Tuple[NvmlGpu, ...] = ()

    @property
    def is_jetson(self) -> bool:
        return self.soc is not None

    @property
    def can_pin(self) -> bool:
        return (bool(self.cpu.policies) or self.gpu is not None or self.emc is not None
                or bool(self.nvml_gpus))


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
    gpu = _detect_gpu(root, notes) if soc else None
    emc = detect_emc(root) if soc else None
    rails = detect_rails(root)
    if soc:
        key = family.key if family else soc
        if family and family.key == "tx1" and l4t and l4t.startswith("R24"):
            key = "tx1-r24"
        total = family.total_rail if family else None
        names = {r.name for r in rails}
        if total is None or total not in names:
            # Rail names differ between releases: fall back to a board input (the whole board),
            # then any known module-input rail present.
            total = next((r.name for r in rails if r.point == "board_input"), None) or next(
                (n for n in TOTAL_RAIL_NAMES if n in names), None)
        display = model or f"NVIDIA Jetson ({SOC_NAMES.get(soc, soc)})"
    else:
        key = "generic" if cpu.policies else "none"
        total = None
        display = model or ("Generic Linux host" if cpu.policies else "Linux host (no cpufreq)")
        if not cpu.policies:
            notes.append("no cpufreq: nothing to pin here (a container or VM?)")
    nvml_gpus: Tuple[NvmlGpu, ...] = ()
    if not soc:
        # A discrete GPU is found by the driver's own list under the root; NVML controls it.
        nvml_gpus = detect_nvml_gpus(sorted(root.listdir(NVIDIA_GPUS_DIR)), notes)
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
        power_mode=read_power_mode(root),
        nvml_gpus=nvml_gpus,
    )


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
        for real, group in groups.items():
            policies.append(_policy(root, f"cpu{min(group)}", real, tuple(group)))
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
    # A table entry above cpuinfo_max_freq (some kernels list one) cannot be set: clamped off,
    # so "max" is cpuinfo_max_freq, as jetson_clocks takes it.
    available = [v for v in available if v <= hi] or available
    governors = tuple(root.read(f"{path}/scaling_available_governors", default="").split())
    return CpuPolicy(
        name=name,
        path=path,
        cpus=cpus,
        available_hz=khz_to_hz(available),
        governors=governors,
        min_hz=lo * 1000,
        max_hz=hi * 1000,
    )


def _entry_matches(entry: str, patterns: Tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(entry, p) for p in patterns)


def find_gpu_devfreq(root: Root) -> Optional[str]:
    """The GPU's devfreq node, found by its device-tree node name or, where the device has none,
    by its class entry name (never a hard-coded path)."""
    nodes = root.glob("/sys/class/devfreq/*")
    for node in nodes:
        name = root.read(f"{node}/device/of_node/name", default="")
        if name in GPU_OF_NODE_NAMES:
            return node
    for node in nodes:
        if _entry_matches(node.rsplit("/", 1)[-1], GPU_ENTRY_PATTERNS):
            return node
    return None


def _devfreq_unit(table: Tuple[int, ...], what: str, notes: List[str]) -> int:
    """Hz per file unit: 1 by the kernel ABI; 1000 when the values only make sense as kHz."""
    lo, hi = GPU_SANE_HZ
    top = max(table, default=0)
    if top and not lo <= top <= hi and lo <= top * 1000 <= hi:
        notes.append(f"{what} devfreq values ({top}) are below {lo // 1_000_000} MHz as Hz: "
                     "read as kHz")
        return 1000
    return 1


def _pci_railgate(root: Root, device: str) -> Optional[str]:
    """The GPU PCI device's runtime-PM knob, found from the NVIDIA driver's list of its GPUs
    (the devfreq node's own device first when several are listed)."""
    bdfs = sorted(root.listdir(NVIDIA_GPUS_DIR))
    real_device = root.resolve(device)
    candidates = [b for b in bdfs if root.resolve(f"/sys/bus/pci/devices/{b}") == real_device]
    for bdf in candidates + bdfs:
        control = f"/sys/bus/pci/devices/{bdf}/power/control"
        if root.exists(control):
            return root.resolve(control)
    return None


def _detect_gpu(root: Root, notes: List[str]) -> Optional[GpuInfo]:
    node = find_gpu_devfreq(root)
    if node is not None:
        real = root.resolve(node)
        device = root.resolve(f"{node}/device")
        raw = tuple(sorted(set(root.read_ints(f"{real}/available_frequencies", default=[]))))
        unit = _devfreq_unit(raw or (root.read_int(f"{real}/max_freq", default=0),), "GPU",
                             notes)
        table = tuple(v * unit for v in raw)
        enable = f"{device}/railgate_enable"
        railgate: Optional[str] = enable
        values = ("0", "1")
        if not root.exists(enable):
            # No railgate_enable (Thor): the GPU is a PCI device, gated by runtime PM.
            railgate, values = _pci_railgate(root, device), ("on", "auto")
        side = tuple(
            (n.rsplit("/", 1)[-1], root.resolve(n)) for n in root.glob("/sys/class/devfreq/*")
            if _entry_matches(n.rsplit("/", 1)[-1], GPU_SIDE_ENTRY_PATTERNS))
        return GpuInfo(
            kind="devfreq",
            name=real.rsplit("/", 1)[-1],
            control=real,
            device=device,
            available_hz=table,
            max_hz=max(table) if table else root.read_int(f"{real}/max_freq", default=0) * unit,
            min_hz=min(table) if table else root.read_int(f"{real}/min_freq", default=0) * unit,
            railgate=railgate,
            cur_freq=f"{real}/cur_freq",
            railgate_values=values,
            side_clocks=side,
            hz_per_unit=unit,
        )
    override = "/sys/kernel/debug/clock/override.gbus"
    if root.exists(f"{override}/rate"):
        # L4T R24: the clock framework's debugfs override; possible_rates is in kHz (unconfirmed).
        rates = root.read_ints("/sys/kernel/debug/clock/gbus/possible_rates", default=[])
        table = khz_to_hz(rates)
        hi = root.read_int("/sys/kernel/debug/clock/gbus/max", default=max(table, default=0))
        lo = root.read_int("/sys/kernel/debug/clock/gbus/min", default=min(table, default=0))
        gpu_device = next(iter(root.glob("/sys/devices/platform/host1x/gpu.0")), None) or next(
            iter(root.glob("/sys/devices/gpu.0")), None
        )
        railgate = f"{gpu_device}/railgate_enable" if gpu_device else None
        return GpuInfo(
            kind="debugfs",
            name="gbus",
            control=override,
            device=gpu_device,
            available_hz=table,
            max_hz=hi,
            min_hz=lo,
            railgate=railgate if railgate and root.exists(railgate) else None,
            cur_freq="/sys/kernel/debug/clock/gbus/rate",
        )
    # An unknown (future) layout: say what is there, never crash or skip silently.
    found = [n.rsplit("/", 1)[-1] for n in root.glob("/sys/class/devfreq/*")]
    notes.append("GPU: not controllable here; found devfreq nodes: "
                 + (", ".join(found) if found else "none"))
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
    """Every connected power-sensor channel of every family in the sensor table (NC channels
    and the INA3221's shunt sum skipped), the board's input first."""
    rails: List[Rail] = []
    for fam in SENSOR_FAMILIES:
        for dev in root.glob(f"/sys/bus/i2c/drivers/{fam.driver}/*-00*"):
            sensor = dev.rsplit("/", 1)[-1]
            for container in root.glob(f"{dev}/{fam.container}"):
                real = root.resolve(container)
                rails.extend(_family_rails(root, fam, real, sensor))
    return rails


def _family_rails(root: Root, fam: SensorFamily, device: str, sensor: str) -> List[Rail]:
    out = []
    for channel in fam.channels:
        label = fam.label(channel)
        name = root.read(f"{device}/{label}", default="") if label else (fam.default_label or "")
        if not name or name.upper() == "NC":
            continue
        if not label and not root.exists(f"{device}/{fam.volt_file.format(n=channel)}"):
            continue  # an unlabelled chip: only channels that have readings
        out.append(Rail(name, device, channel, fam.layout, point_for(fam, name), sensor,
                        fam.chip))
    return out
