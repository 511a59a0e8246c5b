"""Simulated board descriptions: data for `jetbench sim create`, following docs/hardware.md.

Frequency tables are representative of each family's stock L4T tables (the exact entries differ
between releases and nvpmodel modes); paths, file names and units are as on the boards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Dict, Optional, Tuple

from ..errors import UsageError

MHZ = 1_000_000
EMC_DEVFREQ_DEVICE = "/sys/devices/platform/bwmgr"  # tegra264's bandwidth manager (devfreq)


@dataclass(frozen=True)
class SimCluster:
    cpus: Tuple[int, ...]
    freqs_khz: Tuple[int, ...]


@dataclass(frozen=True)
class SimIna:
    driver: str  # "ina3221x" (iio) | "ina3221" (hwmon) | "ina238" (hwmon, no labels)
    bus_addr: str  # "1-0040"
    device_dir: str  # the real device dir under /sys/devices
    labels: Tuple[str, ...]  # per channel; the INA238's one channel is named VIN by jetbench
    index: int  # iio:deviceK / hwmonK


@dataclass(frozen=True)
class SimModeCaps:
    """What an nvpmodel mode sets (its conf's CPU_ONLINE / MAX_FREQ lines, as the kernel then
    reads back): `sim create --power-mode ID` writes these over the MAXN tree."""

    cpu_max_khz: Optional[int]  # every online cluster's scaling_max_freq, as the conf writes it
    gpu_max_hz: Optional[int]  # devfreq max_freq, as the conf writes it (often no table entry)
    offline_cpus: Tuple[int, ...] = ()
    emc_max_hz: Optional[int] = None  # the EMC cap file (R35 emc_iso_cap, R36+ clk_cap), Hz


@dataclass(frozen=True)
class SimBoard:
    key: str
    model: str
    compatible: Tuple[str, ...]
    l4t_line: Optional[str]
    soc: str
    clusters: Tuple[SimCluster, ...]
    cpu_governors: Tuple[str, ...]
    cpu_governor: str
    policy_dirs: bool  # kernels >= 4.x have cpufreq/policyN; R24 (3.10) has per-cpu dirs
    idle_states: Tuple[str, ...]
    gpu_kind: str  # "devfreq" | "debugfs"
    gpu_device: str  # real device dir
    gpu_devfreq_name: str
    gpu_of_node: str  # device-tree node name ("" = none: Thor's GPU is a PCI device)
    gpu_freqs_hz: Tuple[int, ...]
    gpu_governors: Tuple[str, ...]
    emc_kind: str  # "debugfs-clock" | "debugfs-clk" | "bpmp" | "devfreq" (bwmgr)
    emc_freqs_hz: Tuple[int, ...]
    # The power mode's EMC cap file in the default mode (0 = no cap; None = no such file): R35
    # and older keep it in nvpmodel_emc_cap/emc_iso_cap, R36+ in nvpmodel_clk_cap/emc
    # (emc_cap_file() says which, by the board's L4T release).
    emc_iso_cap_hz: Optional[int]
    fan_kind: str  # "pwm-fan" | "tegra_fan" | "hwmon"
    inas: Tuple[SimIna, ...]
    thermal: Tuple[Tuple[str, int], ...] = (
        ("CPU-therm", 36500),
        ("GPU-therm", 35000),
        ("AO-therm", 38000),
    )
    extra_devfreq: Tuple[Tuple[str, str, str], ...] = field(default=())  # (device, name, of_node)
    cpuquiet: bool = False
    cpu_idle_khz: Optional[int] = None  # cur freq when idle; None = the table minimum
    # nvpmodel: (id, name) of each mode and the current one; () = no nvpmodel (TX1).
    power_modes: Tuple[Tuple[int, str], ...] = ()
    power_mode: Optional[int] = None
    # Thor: the GPU is a PCI device at this address (runtime PM railgating, listed under
    # /proc/driver/nvidia/gpus); None = a platform device with railgate_enable and load.
    gpu_pci_bdf: Optional[str] = None
    enable_3d_scaling: bool = False  # the GPU device's file (Orin up to JetPack 6)
    # The capped modes `sim create --power-mode` can start in (mode id -> caps).
    mode_caps: Tuple[Tuple[int, SimModeCaps], ...] = ()
    # The GPU's device-tree `compatible` ("" = not simulated): R35+ jetson_clocks finds the GPU
    # through /sys/devices/platform/gpu.0/of_node/compatible and the devfreq node whose
    # device's of_node/compatible matches it.
    gpu_compatible: str = ""


def emc_cap_file(board: SimBoard) -> str:
    """Where nvpmodel keeps the EMC cap on this board's release (docs/hardware.md, "EMC")."""
    match = re.match(r"#\s*R(\d+)", board.l4t_line or "")
    if match and int(match.group(1)) >= 36:
        return "/sys/kernel/nvpmodel_clk_cap/emc"
    return "/sys/kernel/nvpmodel_emc_cap/emc_iso_cap"


def r36_or_newer(board: SimBoard) -> bool:
    return emc_cap_file(board).endswith("clk_cap/emc")


_T210_CPU = (102000, 204000, 306000, 408000, 510000, 612000, 714000, 816000, 918000, 1020000,
             1122000, 1224000, 1326000, 1428000, 1530000, 1632000, 1734000, 1836000, 1912500)
_NANO_CPU = (102000, 204000, 307200, 403200, 518400, 614400, 710400, 825600, 921600, 1036800,
             1132800, 1224000, 1326000, 1428000, 1479000)
_T210_GPU = tuple(int(76.8 * MHZ * k) for k in range(1, 14))  # 76.8 .. 998.4 MHz
_T210_EMC = (40800000, 68000000, 102000000, 204000000, 408000000, 665600000, 800000000,
             1065600000, 1331200000, 1600000000)
_T186_CPU = (345600, 499200, 652800, 806400, 960000, 1113600, 1267200, 1420800, 1574400,
             1728000, 1881600, 2035200)
_T186_GPU = (114750000, 216750000, 318750000, 420750000, 522750000, 624750000, 726750000,
             828750000, 930750000, 1032750000, 1134750000, 1236750000, 1300500000)
_T194_CPU = (115200, 192000, 268800, 345600, 422400, 499200, 576000, 652800, 729600, 806400,
             883200, 960000, 1036800, 1113600, 1190400, 1267200, 1344000, 1420800, 1497600,
             1574400, 1651200, 1728000, 1804800, 1881600, 1907200, 1958400, 2035200, 2112000,
             2188800, 2265600)
_T194_GPU = (114750000, 216750000, 318750000, 420750000, 522750000, 624750000, 675750000,
             828750000, 905250000, 1032750000, 1198500000, 1236750000, 1338750000, 1377000000)
_NX_GPU = _T194_GPU[:9] + (1032750000, 1100250000)
_T234_CPU = (115200, 192000, 268800, 345600, 422400, 499200, 576000, 652800, 729600, 806400,
             883200, 960000, 1036800, 1113600, 1190400, 1267200, 1344000, 1420800, 1497600,
             1574400, 1651200, 1728000, 1804800, 1881600, 1958400, 2035200, 2112000, 2188800,
             2201600)
_T234_GPU = (306000000, 408000000, 510000000, 612000000, 714000000, 816000000, 918000000,
             1020000000, 1122000000, 1224000000, 1300500000)
_ORIN_NANO_GPU = (306000000, 408000000, 510000000, 624750000)
# JetPack 6.2 "Super": the Orin Nano's GPU table reaches 1020 MHz in MAXN_SUPER.
_ORIN_NANO_SUPER_GPU = (306000000, 408000000, 510000000, 612000000, 714000000, 816000000,
                        918000000, 1020000000)
_T264_CPU = (972000, 1188000, 1404000, 1620000, 1836000, 2052000, 2268000, 2484000, 2601000)
_T264_GPU = (306000000, 459000000, 612000000, 765000000, 918000000, 1071000000, 1224000000,
             1377000000, 1530000000, 1575000000)
_T264_EMC = (204000000, 665600000, 1600000000, 2133000000, 3199000000, 4266000000)

_GOV_ARM = ("interactive", "conservative", "ondemand", "userspace", "powersave", "performance",
            "schedutil")
_GOV_R24 = ("interactive", "conservative", "ondemand", "userspace", "powersave", "performance")
_DEVFREQ_GOV = ("wmark_active", "wmark_simple", "nvhost_podgov", "userspace", "performance",
                "simple_ondemand")
_T210_L4T32 = ("# R32 (release), REVISION: 7.1, GCID: 29818004, BOARD: t210ref, EABI: aarch64, "
               "DATE: Sat Feb 19 17:05:08 UTC 2022")

BOARDS: Dict[str, SimBoard] = {}


def _add(board: SimBoard) -> None:
    BOARDS[board.key] = board


_add(SimBoard(
    key="tx1-r24",
    model="NVIDIA Jetson TX1 Developer Kit",
    compatible=("nvidia,p2371-2180", "nvidia,tegra210"),
    l4t_line="# R24 (release), REVISION: 2.1, GCID: 8028265, BOARD: t210ref, EABI: aarch64, "
    "DATE: Thu Nov 10 03:51:59 UTC 2016",
    soc="tegra210",
    clusters=(SimCluster((0, 1, 2, 3), _T210_CPU),),
    cpu_governors=_GOV_R24,
    cpu_governor="interactive",
    policy_dirs=False,
    idle_states=("WFI", "C7", "CC6"),
    gpu_kind="debugfs",
    gpu_device="/sys/devices/platform/host1x/gpu.0",
    gpu_devfreq_name="",
    gpu_of_node="gpu",
    gpu_freqs_hz=_T210_GPU,
    gpu_governors=(),
    emc_kind="debugfs-clock",
    emc_freqs_hz=_T210_EMC,
    emc_iso_cap_hz=None,
    fan_kind="tegra_fan",
    inas=(SimIna("ina3221x", "1-0040", "/sys/devices/platform/7000c400.i2c/i2c-1/1-0040",
                 ("VDD_IN", "VDD_GPU", "VDD_CPU"), 0),),
    cpuquiet=True,
))
_add(SimBoard(
    key="tx1",
    model="NVIDIA Jetson TX1 Developer Kit",
    compatible=("nvidia,p2371-2180", "nvidia,tegra210"),
    l4t_line=_T210_L4T32,
    soc="tegra210",
    clusters=(SimCluster((0, 1, 2, 3), _T210_CPU),),
    cpu_governors=_GOV_ARM,
    cpu_governor="schedutil",
    policy_dirs=True,
    idle_states=("WFI", "C7", "CC6"),
    gpu_kind="devfreq",
    gpu_device="/sys/devices/57000000.gpu",
    gpu_devfreq_name="57000000.gpu",
    gpu_of_node="gpu",
    gpu_freqs_hz=_T210_GPU,
    gpu_governors=_DEVFREQ_GOV,
    emc_kind="debugfs-clk",
    emc_freqs_hz=_T210_EMC,
    emc_iso_cap_hz=None,
    fan_kind="pwm-fan",
    inas=(SimIna("ina3221x", "1-0040", "/sys/devices/7000c400.i2c/i2c-1/1-0040",
                 ("VDD_IN", "VDD_GPU", "VDD_CPU"), 0),),
    extra_devfreq=(("/sys/devices/50000000.host1x", "50000000.host1x", "host1x"),),
))
_add(SimBoard(
    key="nano",
    model="NVIDIA Jetson Nano Developer Kit",
    compatible=("nvidia,p3450-0000", "nvidia,jetson-nano", "nvidia,tegra210"),
    l4t_line=_T210_L4T32,
    soc="tegra210",
    clusters=(SimCluster((0, 1, 2, 3), _NANO_CPU),),
    cpu_governors=_GOV_ARM,
    cpu_governor="schedutil",
    policy_dirs=True,
    idle_states=("WFI", "C7", "CC6"),
    gpu_kind="devfreq",
    gpu_device="/sys/devices/57000000.gpu",
    gpu_devfreq_name="57000000.gpu",
    gpu_of_node="gpu",
    gpu_freqs_hz=_T210_GPU[:12],
    gpu_governors=_DEVFREQ_GOV,
    emc_kind="debugfs-clk",
    emc_freqs_hz=_T210_EMC,
    emc_iso_cap_hz=None,
    fan_kind="pwm-fan",
    inas=(SimIna("ina3221x", "6-0040", "/sys/devices/7000c400.i2c/i2c-6/6-0040",
                 ("POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"), 0),),
    power_modes=((0, "MAXN"), (1, "5W")),
    power_mode=0,
    # NVIDIA's Nano conf, mode 1: cores 2-3 off, CPU max 918000 kHz, GPU max 640 MHz: neither
    # is a table entry (the kernel runs 825.6 MHz and 614.4 MHz under them).
    mode_caps=((1, SimModeCaps(918000, 640000000, (2, 3))),),
))
_add(SimBoard(
    key="tx2",
    model="quill",
    compatible=("nvidia,p2771-0000", "nvidia,tegra186"),
    l4t_line="# R32 (release), REVISION: 7.1, GCID: 29818004, BOARD: t186ref, EABI: aarch64, "
    "DATE: Sat Feb 19 17:07:00 UTC 2022",
    soc="tegra186",
    # Denver (cpu1-2) and A57 (cpu0, 3-5) clusters.
    clusters=(SimCluster((0, 3, 4, 5), _T186_CPU), SimCluster((1, 2), _T186_CPU)),
    cpu_governors=_GOV_ARM,
    cpu_governor="schedutil",
    policy_dirs=True,
    idle_states=("WFI", "c6", "c7"),
    gpu_kind="devfreq",
    gpu_device="/sys/devices/17000000.gp10b",
    gpu_devfreq_name="17000000.gp10b",
    gpu_of_node="gp10b",
    gpu_freqs_hz=_T186_GPU,
    gpu_governors=_DEVFREQ_GOV,
    emc_kind="bpmp",
    emc_freqs_hz=(40800000, 204000000, 665600000, 1062400000, 1331200000, 1600000000,
                  1866000000),
    emc_iso_cap_hz=0,  # nvpmodel's EMC cap file; 0 = no cap (R32 jetson_clocks reads it)
    fan_kind="pwm-fan",
    inas=(
        SimIna("ina3221x", "0-0040", "/sys/devices/3160000.i2c/i2c-0/0-0040",
               ("VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_4V0_WIFI"), 0),
        SimIna("ina3221x", "0-0041", "/sys/devices/3160000.i2c/i2c-0/0-0041",
               ("VDD_IN", "VDD_SYS_CPU", "VDD_SYS_DDR"), 1),
    ),
    power_modes=((0, "MAXN"), (1, "MAXQ"), (2, "MAXP_CORE_ALL"), (3, "MAXP_CORE_ARM"),
                 (4, "MAXP_CORE_DENVER")),
    power_mode=0,
    # MAXQ: the Denver cores (cpu1-2) off, A57 at most 1.2 GHz, GPU 850 MHz (the table runs
    # 1113.6 MHz and 828.75 MHz under them).
    mode_caps=((1, SimModeCaps(1200000, 850000000, (1, 2))),),
    gpu_compatible="nvidia,gp10b",
))
_add(SimBoard(
    key="xavier-agx",
    model="Jetson-AGX",
    compatible=("nvidia,p2972-0000", "nvidia,galen", "nvidia,tegra194"),
    l4t_line="# R32 (release), REVISION: 7.1, GCID: 29818004, BOARD: t186ref, EABI: aarch64, "
    "DATE: Sat Feb 19 17:07:00 UTC 2022",
    soc="tegra194",
    clusters=tuple(SimCluster((2 * k, 2 * k + 1), _T194_CPU) for k in range(4)),
    cpu_governors=_GOV_ARM,
    cpu_governor="schedutil",
    policy_dirs=True,
    idle_states=("C1", "c6", "c7"),
    gpu_kind="devfreq",
    gpu_device="/sys/devices/17000000.gv11b",
    gpu_devfreq_name="17000000.gv11b",
    gpu_of_node="gv11b",
    gpu_freqs_hz=_T194_GPU,
    gpu_governors=_DEVFREQ_GOV,
    emc_kind="bpmp",
    emc_freqs_hz=(204000000, 665600000, 1065600000, 1331200000, 1600000000, 2133000000),
    emc_iso_cap_hz=0,
    fan_kind="pwm-fan",
    inas=(
        SimIna("ina3221x", "1-0040", "/sys/devices/3160000.i2c/i2c-1/1-0040",
               ("GPU", "CPU", "SOC"), 0),
        SimIna("ina3221x", "1-0041", "/sys/devices/3160000.i2c/i2c-1/1-0041",
               ("CV", "VDDRQ", "SYS5V"), 1),
    ),
    extra_devfreq=(("/sys/devices/15340000.vic", "15340000.vic", "vic"),),
    power_modes=((0, "MAXN"), (1, "MODE_10W"), (2, "MODE_15W"), (3, "MODE_30W_ALL")),
    power_mode=0,
    gpu_compatible="nvidia,gv11b",
))
_add(SimBoard(
    key="xavier-nx",
    model="NVIDIA Jetson Xavier NX Developer Kit",
    compatible=("nvidia,p3509-0000+p3668-0000", "nvidia,jetson-xavier-nx", "nvidia,tegra194"),
    l4t_line="# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, "
    "DATE: Tue Aug  1 19:57:35 UTC 2023",
    soc="tegra194",
    clusters=tuple(SimCluster((2 * k, 2 * k + 1), _T194_CPU[:25]) for k in range(3)),
    cpu_governors=_GOV_ARM,
    cpu_governor="schedutil",
    policy_dirs=True,
    idle_states=("C1", "c6", "c7"),
    gpu_kind="devfreq",
    gpu_device="/sys/devices/17000000.gv11b",
    gpu_devfreq_name="17000000.gv11b",
    gpu_of_node="gv11b",
    gpu_freqs_hz=_NX_GPU,
    gpu_governors=_DEVFREQ_GOV,
    emc_kind="bpmp",
    emc_freqs_hz=(204000000, 665600000, 1065600000, 1331200000, 1600000000, 1866000000),
    emc_iso_cap_hz=1600000000,  # nvpmodel caps EMC ISO bandwidth in some modes
    fan_kind="pwm-fan",
    # JetPack 5 (R35) uses the mainline hwmon driver.
    inas=(SimIna("ina3221", "7-0040", "/sys/devices/c250000.i2c/i2c-7/7-0040",
                 ("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"), 1),),
    power_modes=((0, "MODE_15W_2CORE"), (1, "MODE_15W_4CORE"), (2, "MODE_15W_6CORE"),
                 (3, "MODE_10W_2CORE"), (4, "MODE_10W_4CORE")),
    power_mode=2,
    # A 10 W mode, with caps between table entries (representative values, not NVIDIA's conf):
    # cpu4-5 off, CPU 1.2 GHz (1190.4 MHz runs), GPU 800 MHz (675.75 MHz runs).
    mode_caps=((4, SimModeCaps(1200000, 800000000, (4, 5))),),
    gpu_compatible="nvidia,gv11b",
))
_add(SimBoard(
    key="orin-agx",
    model="NVIDIA Jetson AGX Orin Developer Kit",
    compatible=("nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234"),
    l4t_line="# R36 (release), REVISION: 4.0, GCID: 37537400, BOARD: generic, EABI: aarch64, "
    "DATE: Fri Sep 13 04:36:44 UTC 2024",
    soc="tegra234",
    clusters=tuple(SimCluster(tuple(range(4 * k, 4 * k + 4)), _T234_CPU) for k in range(3)),
    cpu_governors=("conservative", "ondemand", "userspace", "powersave", "performance",
                   "schedutil"),
    cpu_governor="schedutil",
    policy_dirs=True,
    idle_states=("WFI", "c7"),
    gpu_kind="devfreq",
    gpu_device="/sys/devices/platform/bus@0/17000000.gpu",
    gpu_devfreq_name="17000000.gpu",
    gpu_of_node="gpu",
    gpu_freqs_hz=_T234_GPU,
    gpu_governors=("userspace", "performance", "simple_ondemand", "nvhost_podgov"),
    emc_kind="bpmp",
    emc_freqs_hz=(204000000, 665600000, 2133000000, 3199000000),
    emc_iso_cap_hz=0,
    fan_kind="hwmon",
    inas=(
        SimIna("ina3221", "1-0040", "/sys/devices/platform/bus@0/c240000.i2c/i2c-1/1-0040",
               ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"), 1),
        SimIna("ina3221", "1-0041", "/sys/devices/platform/bus@0/c240000.i2c/i2c-1/1-0041",
               ("NC", "VDDQ_VDD2_1V8AO", "NC"), 2),
    ),
    extra_devfreq=(("/sys/devices/platform/bus@0/15340000.vic", "15340000.vic", "vic"),),
    power_modes=((0, "MAXN"), (1, "MODE_15W"), (2, "MODE_30W"), (3, "MODE_50W")),
    power_mode=0,
    # 15 W and 30 W with caps between table entries (representative values, not NVIDIA's
    # conf): 15 W cpu4-11 off, CPU 1.2 GHz (1190.4 MHz runs), GPU 420 MHz (408 MHz runs);
    # 30 W cpu8-11 off, CPU 1.75 GHz (1728 MHz runs), GPU 620 MHz (612 MHz runs).
    mode_caps=((1, SimModeCaps(1200000, 420000000, tuple(range(4, 12)))),
               (2, SimModeCaps(1750000, 620000000, tuple(range(8, 12))))),
    enable_3d_scaling=True,
    gpu_compatible="nvidia,ga10b",  # Orin's GPU, whatever its node is named (gpu, ga10b)
))
_add(SimBoard(
    key="orin-nano",
    model="NVIDIA Jetson Orin Nano Developer Kit",
    compatible=("nvidia,p3768-0000+p3767-0005", "nvidia,p3767-0005", "nvidia,tegra234"),
    l4t_line="# R36 (release), REVISION: 4.0, GCID: 37537400, BOARD: generic, EABI: aarch64, "
    "DATE: Fri Sep 13 04:36:44 UTC 2024",
    soc="tegra234",
    clusters=(SimCluster((0, 1, 2, 3), _T234_CPU[:21]), SimCluster((4, 5), _T234_CPU[:21])),
    cpu_governors=("conservative", "ondemand", "userspace", "powersave", "performance",
                   "schedutil"),
    cpu_governor="schedutil",
    policy_dirs=True,
    idle_states=("WFI", "c7"),
    gpu_kind="devfreq",
    gpu_device="/sys/devices/platform/bus@0/17000000.gpu",
    gpu_devfreq_name="17000000.gpu",
    gpu_of_node="gpu",
    gpu_freqs_hz=_ORIN_NANO_GPU,
    gpu_governors=("userspace", "performance", "simple_ondemand", "nvhost_podgov"),
    emc_kind="bpmp",
    emc_freqs_hz=(204000000, 665600000, 2133000000),
    emc_iso_cap_hz=0,
    fan_kind="hwmon",
    inas=(SimIna("ina3221", "1-0040", "/sys/devices/platform/bus@0/c240000.i2c/i2c-1/1-0040",
                 ("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"), 1),),
    power_modes=((0, "15W"), (1, "7W")),
    power_mode=0,
    # 7 W with caps between table entries (representative values, not NVIDIA's conf): cpu4-5
    # off, CPU 980 MHz (960 MHz runs), GPU 420 MHz (408 MHz runs).
    mode_caps=((1, SimModeCaps(980000, 420000000, (4, 5))),),
    gpu_compatible="nvidia,ga10b",
))

# JetPack 5 on the same module: the GPU node is named after the GPU (ga10b) and sits directly
# under /sys/devices (JetPack 6 moved it under bus@0 as 17000000.gpu); the fan is pwm-fan.
_add(replace(
    BOARDS["orin-agx"],
    key="orin-agx-jp5",
    model="Jetson AGX Orin",
    compatible=("nvidia,p3737-0000+p3701-0000", "nvidia,p3701-0000", "nvidia,tegra234"),
    l4t_line="# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, "
    "DATE: Tue Aug  1 19:57:35 UTC 2023",
    gpu_device="/sys/devices/17000000.ga10b",
    gpu_devfreq_name="17000000.ga10b",
    gpu_of_node="ga10b",
    fan_kind="pwm-fan",
    inas=tuple(replace(ina, device_dir=ina.device_dir.replace("platform/bus@0/c240000",
                                                              "3160000"))
               for ina in BOARDS["orin-agx"].inas),
    extra_devfreq=(),
))

# JetPack 7.2 (L4T R39.2) on the same module: 17000000.gpu stays, enable_3d_scaling is gone
# (scaling is the governor's business).
_add(replace(
    BOARDS["orin-agx"],
    key="orin-agx-jp7",
    l4t_line="# R39 (release), REVISION: 2.0, GCID: 43000000, BOARD: generic, EABI: aarch64, "
    "DATE: Mon Jun  1 00:00:00 UTC 2026",
    enable_3d_scaling=False,
))

# Orin Nano with JetPack 6.2's Super device tree (`-super` part numbers): GPU to 1020 MHz,
# EMC to 3199 MHz, CPU to 1.728 GHz in the MAXN_SUPER mode.
_add(replace(
    BOARDS["orin-nano"],
    key="orin-nano-super",
    model="NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super",
    compatible=("nvidia,p3768-0000+p3767-0005-super", "nvidia,p3767-0005-super",
                "nvidia,tegra234"),
    l4t_line="# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, "
    "DATE: Wed Jan  8 01:49:37 UTC 2025",
    clusters=(SimCluster((0, 1, 2, 3), _T234_CPU[:22]), SimCluster((4, 5), _T234_CPU[:22])),
    gpu_freqs_hz=_ORIN_NANO_SUPER_GPU,
    emc_freqs_hz=(204000000, 665600000, 2133000000, 3199000000),
    power_modes=((0, "15W"), (1, "25W"), (2, "MAXN_SUPER"), (3, "7W")),
    power_mode=2,
    # nvpmodel_clk_cap/emc per mode (representative caps, not NVIDIA's conf): 15 W and 7 W hold
    # the EMC at 2133 MHz, 25 W writes the table's top (no cap in effect), MAXN_SUPER 0.
    mode_caps=((0, SimModeCaps(1500000, 620000000, (), emc_max_hz=2133000000)),
               (1, SimModeCaps(1750000, 920000000, (), emc_max_hz=3199000000)),
               (3, SimModeCaps(980000, 420000000, (4, 5), emc_max_hz=2133000000))),
))

# Jetson AGX Thor developer kit (JetPack 7, L4T R38): the GPU is a PCI device (0000:01:00.0)
# whose devfreq class entries have no of_node (gpu-gpc-0 to pin, gpu-nvd-0 beside it); EMC is
# the bwmgr devfreq node; the carrier's INA238 reads the whole board's input (VIN).
_add(SimBoard(
    key="thor",
    model="NVIDIA Jetson AGX Thor Developer Kit",
    compatible=("nvidia,p4071-0000+p3834-0008", "nvidia,p3834-0008", "nvidia,tegra264"),
    l4t_line="# R38 (release), REVISION: 2.0, GCID: 41844464, BOARD: generic, EABI: aarch64, "
    "DATE: Fri Aug 22 00:55:42 UTC 2025",
    soc="tegra264",
    # 14 Neoverse-V3AE cores, one cpufreq policy each.
    clusters=tuple(SimCluster((k,), _T264_CPU) for k in range(14)),
    cpu_governors=("conservative", "ondemand", "userspace", "powersave", "performance",
                   "schedutil"),
    cpu_governor="schedutil",
    policy_dirs=True,
    idle_states=("WFI", "c7"),
    gpu_kind="devfreq",
    gpu_device="/sys/devices/pci0000:00/0000:00:00.0/0000:01:00.0",
    gpu_devfreq_name="gpu-gpc-0",
    gpu_of_node="",
    gpu_freqs_hz=_T264_GPU,
    gpu_governors=("performance", "nvhost_podgov"),
    emc_kind="devfreq",
    emc_freqs_hz=_T264_EMC,
    emc_iso_cap_hz=None,
    fan_kind="hwmon",
    inas=(
        SimIna("ina238", "2-0044", "/sys/devices/platform/bus@0/c250000.i2c/i2c-2/2-0044",
               ("VIN",), 2),
        SimIna("ina3221", "1-0040", "/sys/devices/platform/bus@0/c240000.i2c/i2c-1/1-0040",
               ("VDD_GPU", "VDD_CPU_SOC_MSS", "VIN_SYS_5V0"), 1),
    ),
    thermal=(("cpu-thermal", 41000), ("gpu-thermal", 39000), ("tj-thermal", 42000)),
    extra_devfreq=(("/sys/devices/pci0000:00/0000:00:00.0/0000:01:00.0", "gpu-nvd-0", ""),),
    power_modes=((0, "MAXN"), (1, "120W")),
    power_mode=0,
    # 120 W with caps between table entries (representative values, not NVIDIA's conf): CPU
    # 2 GHz (1836 MHz runs), GPU 1.4 GHz (1377 MHz runs); every core stays online.
    mode_caps=((1, SimModeCaps(2000000, 1400000000)),),
    gpu_pci_bdf="0000:01:00.0",
))

# Other spellings of a board, each naming exactly one (`jetbench sim list` shows them).
ALIASES = {"tx1-r32": "tx1", "agx-xavier": "xavier-agx", "agx-orin": "orin-agx",
           "agx-thor": "thor"}
# Names that could mean several boards, or a board that is not simulated: refused, saying which
# boards come closest (an Orin NX's tables are not an Orin Nano's: no guess is made).
NOT_ONE_BOARD = {
    "xavier": "Xavier is two boards here: xavier-agx or xavier-nx",
    "orin": "Orin is several boards here: orin-agx, orin-agx-jp5, orin-agx-jp7, orin-nano, "
            "orin-nano-super",
    "orin-nx": "there is no simulated Orin NX (its tables are not the Orin Nano's); the "
               "closest are orin-nano and orin-nano-super",
    "orin-nx-super": "there is no simulated Orin NX (its tables are not the Orin Nano's); the "
                     "closest is orin-nano-super",
}


def get(key: str) -> SimBoard:
    return BOARDS[board_key(key)]


def board_key(key: str) -> str:
    """The simulated board's key for `key` (a key or another name of it); else a UsageError
    with the closest names."""
    word = key.lower()
    if word in NOT_ONE_BOARD:
        raise UsageError(f"unknown simulated board {key!r}: {NOT_ONE_BOARD[word]}",
                         hint="`jetbench sim list` shows the boards and their other names")
    name = ALIASES.get(word, word)
    if name not in BOARDS:
        import difflib

        close = difflib.get_close_matches(word, [*BOARDS, *ALIASES], n=1, cutoff=0.6)
        raise UsageError(
            f"unknown simulated board {key!r}"
            + (f" (did you mean {ALIASES.get(close[0], close[0])!r}?)" if close else ""),
            hint="choose one of: " + ", ".join(sorted(BOARDS))
            + " (`jetbench sim list` shows their other names)",
        )
    return name
