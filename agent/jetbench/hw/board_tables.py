"""What board detection recognises, as data: the families (by part number and model words), their
SoCs, the names GPU and EMC devfreq nodes go by, which rails are a module's total; and the
identification of a board from its device tree and L4T release by those tables.

`board.py` reads the tree under a Root with them; a board the tables do not know is a data change
here, not a branch there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from .meters.sensors import MODULE_INPUT_NAMES

SOC_NAMES = {
    "tegra210": "Tegra X1 (T210)",
    "tegra186": "Tegra X2 (T186)",
    "tegra194": "Xavier (T194)",
    "tegra234": "Orin (T234)",
    "tegra264": "Thor (T264)",
}
# How the GPU's devfreq node is recognised (node names are not a closed list): by the device-tree
# node name of its device (tegra210..tegra234), or by its class entry name where the device has
# no of_node (tegra264: the GPC clock, the one to pin).
GPU_OF_NODE_NAMES = ("gpu", "gp10b", "gv11b", "ga10b")
GPU_ENTRY_PATTERNS = ("gpu-gpc-*",)
# Other GPU-side clocks: shown beside the GPU, never pinned (Thor's gpu-nvd-*, meaning unconfirmed).
GPU_SIDE_ENTRY_PATTERNS = ("gpu-nvd-*",)
# EMC as a devfreq node (tegra264's bandwidth manager): pinned min = max.
EMC_DEVFREQ_ENTRIES = ("bwmgr",)
# The power mode's EMC cap, where each L4T release keeps it (nvpmodel writes it; Hz; 0 or a value
# at or above the clock's top = no cap): (file, who writes it). The lowest one in force binds.
EMC_CAP_FILES = (
    ("/sys/kernel/nvpmodel_emc_cap/emc_iso_cap", "nvpmodel's emc_iso_cap, L4T R32-R35"),
    ("/sys/kernel/nvpmodel_clk_cap/emc", "nvpmodel's clk_cap (sent to the BPMP), L4T R36+"),
)
# The EMC's lock files beyond `mrq_rate_locked` that R36+ lock recipes (NVIDIA's clock guide,
# JetPack 6.2 scripts) also set to 1 before the rate, where they exist: the BPMP clock's state,
# then the bandwidth manager halted (it would otherwise move the rate it is asked for).
EMC_LOCK_EXTRAS = (
    "/sys/kernel/debug/bpmp/debug/clk/emc/state",
    "/sys/kernel/debug/bpmp/debug/bwmgr/bwmgr_halt",
)
# A GPU clock lies between these (docs/hardware.md): devfreq values outside are checked as kHz.
GPU_SANE_HZ = (50_000_000, 4_000_000_000)


@dataclass(frozen=True)
class Family:
    key: str
    soc: str
    compatible: Tuple[str, ...]  # board part numbers that identify it
    model_words: Tuple[str, ...]  # words of /proc/device-tree/model that identify it
    total_rail: Optional[str]  # whole-module total rail; None = sum of connected channels
    compatible_suffix: str = ""  # JetPack 6.2's Super device trees end their part numbers "-super"

    def matches(self, compatible: List[str]) -> bool:
        return any(c.startswith(p) and c.endswith(self.compatible_suffix)
                   for c in compatible for p in self.compatible)


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
    # Orin Nano / Orin NX "Super" (JetPack 6.2): GPU to 1020 MHz (Nano), EMC to 3199 MHz.
    Family("orin-nano-super", "tegra234", ("nvidia,p3767", "nvidia,p3768"),
           ("nano super", "nx super", "developer kit super"), "VDD_IN", "-super"),
    Family("orin-nano", "tegra234", ("nvidia,p3767", "nvidia,p3768"), ("orin nano", "orin nx"),
           "VDD_IN"),
    Family("orin-agx", "tegra234", ("nvidia,p3701", "nvidia,p3737"), ("agx orin",), None),
    # The carrier board's INA238 input is the whole board's total (VIN_SYS_5V0 never is).
    Family("thor", "tegra264", ("nvidia,p3834", "nvidia,p4071"), ("thor",), "VIN"),
)
TOTAL_RAIL_NAMES = MODULE_INPUT_NAMES

# tegra210's debugfs EMC overrides, newest first: (kind, override dir, lock file, rate file,
# max-rate file, possible-rates file (kHz), current-rate file).
EMC_OVERRIDES = (
    ("debugfs-clk", "/sys/kernel/debug/clk/override.emc", "clk_state", "clk_update_rate",
     "/sys/kernel/debug/tegra_bwmgr/emc_max_rate", "/sys/kernel/debug/clk/emc/clk_possible_rates",
     "/sys/kernel/debug/clk/emc/clk_rate"),  # L4T R28+
    ("debugfs-clock", "/sys/kernel/debug/clock/override.emc", "state", "rate",
     "/sys/kernel/debug/clock/emc/max", "/sys/kernel/debug/clock/emc/possible_rates",
     "/sys/kernel/debug/clock/emc/rate"),  # L4T R24
)


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
        if family.matches(compatible):
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
