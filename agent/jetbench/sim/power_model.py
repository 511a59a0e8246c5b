"""The simulated board's power model (documented in docs/boards.md, "Simulated boards").

Each component draws static power plus dynamic power

    P_dyn = P_max * (f / f_max) * (V(f) / V_max)^2 * activity        (that is, C * f * V(f)^2)

where V(f) rises linearly from V_min at the lowest table frequency to V_max at the highest
(the shape of the Tegra DVFS tables), `activity` is the real CPU utilisation of the process
running jetbench (0..1 of the machine), and f is the clock currently written in the tree.
The GPU and the memory take the larger of that and the GPU's `load` file, which a simulated
workload (`--model sim:NAME`) fills with the share of each batch its GPU is busy: it sleeps
rather than computing, so its load would otherwise not show.
Rails map to components by their names; the module input (VDD_IN / POM_5V_IN) is the sum of the
components divided by the regulators' efficiency; a board input (Thor's carrier INA238, VIN) adds
the carrier board's own draw to that. Numbers are of the order of the real boards'
(TX1 ~5-6 W running AlexNet at 690 MHz) but the model is for demos and tests, never a claim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Dict, Optional, Sequence, Tuple

V_MIN = 0.80
V_MAX = 1.10
REGULATOR_EFFICIENCY = 0.90


@dataclass(frozen=True)
class PowerCoefficients:
    gpu_dyn_max_w: float
    cpu_dyn_max_w: float
    gpu_static_w: float
    cpu_static_w: float
    soc_static_w: float
    ddr_static_w: float
    ddr_dyn_max_w: float  # at the highest EMC rate
    cv_static_w: float
    sys_static_w: float  # the module's other loads (5 V domain)
    wifi_static_w: float = 0.25
    carrier_static_w: float = 2.0  # the carrier board (USB, Ethernet, fan): only in a board input


COEFFICIENTS: Dict[str, PowerCoefficients] = {
    "tegra210": PowerCoefficients(6.0, 3.0, 0.30, 0.20, 0.60, 0.30, 0.60, 0.0, 0.80),
    "tegra186": PowerCoefficients(7.0, 4.0, 0.35, 0.25, 0.80, 0.35, 0.80, 0.0, 0.90),
    "tegra194": PowerCoefficients(16.0, 8.0, 0.50, 0.40, 1.60, 0.50, 1.40, 0.30, 1.20),
    "tegra234": PowerCoefficients(25.0, 10.0, 0.60, 0.50, 2.00, 0.60, 2.00, 0.40, 1.50),
    "tegra264": PowerCoefficients(60.0, 25.0, 2.00, 1.50, 4.00, 1.00, 5.00, 1.00, 3.00,
                                  carrier_static_w=6.0),
}


def dvfs_scale(freq_hz: float, table_hz: Sequence[int]) -> float:
    """(f / f_max) * (V(f) / V_max)^2 for a frequency in a table; 0 for a stopped clock."""
    if not table_hz or freq_hz <= 0:
        return 0.0
    lo, hi = min(table_hz), max(table_hz)
    frac = 0.0 if hi == lo else min(max((freq_hz - lo) / (hi - lo), 0.0), 1.0)
    volts = V_MIN + (V_MAX - V_MIN) * frac
    return (min(freq_hz, hi) / hi) * (volts / V_MAX) ** 2


@dataclass(frozen=True)
class ClockState:
    gpu_hz: float
    gpu_table_hz: Sequence[int]
    cpu_hz: float  # mean over online cores
    cpu_table_hz: Sequence[int]
    cpu_online_fraction: float
    emc_hz: float
    emc_max_hz: float


def module_budget_w(power_modes: Sequence[Tuple[int, str]]) -> Optional[float]:
    """The most a module's nvpmodel modes allow, from their names ('15W', 'MODE_30W_ALL'):
    the top of its power range; None when a mode has no stated budget (MAXN, MAXN_SUPER) or
    there are no modes."""
    watts = []
    for _mode_id, name in power_modes:
        m = re.search(r"(\d+)W", name.upper())
        if m is None:
            return None
        watts.append(float(m.group(1)))
    return max(watts) if watts else None


def component_powers_w(soc: str, clocks: ClockState, activity: float,
                       gpu_load: Optional[float] = None,
                       budget_w: Optional[float] = None) -> Dict[str, float]:
    """Watts per component: gpu, cpu, soc, ddr, cv, sys, wifi (the module), carrier (outside).
    `gpu_load` (0..1): the simulated GPU's own utilisation (its `load` file, written by a
    simulated workload, sim/gpu_load.py); the GPU and the memory are at least that busy.
    `budget_w` (module_budget_w): the dynamic parts are scaled down so that the module input
    at full load and the highest clocks is that budget (an Orin Nano, whose modes are 15 W
    and 7 W, shares the AGX Orin's SoC coefficients but not its 60 W)."""
    c = COEFFICIENTS.get(soc, COEFFICIENTS["tegra210"])
    act = min(max(activity, 0.0), 1.0)
    gpu_act = max(act, min(max(gpu_load or 0.0, 0.0), 1.0))
    static, dynamic = _parts(c, clocks, act, gpu_act)
    if budget_w is not None:
        full = replace(clocks, gpu_hz=max(clocks.gpu_table_hz or [0]),
                       cpu_hz=max(clocks.cpu_table_hz or [0]), cpu_online_fraction=1.0,
                       emc_hz=clocks.emc_max_hz)
        _, full_dyn = _parts(c, full, 1.0, 1.0)
        room = budget_w * REGULATOR_EFFICIENCY - sum(static.values())
        scale = max(room, 0.0) / sum(full_dyn.values()) if sum(full_dyn.values()) else 1.0
        if scale < 1.0:
            dynamic = {k: v * scale for k, v in dynamic.items()}
    out = dict(static)
    for k, v in dynamic.items():
        out[k] = out.get(k, 0.0) + v
    out["carrier"] = c.carrier_static_w
    return out


def _parts(c: PowerCoefficients, clocks: ClockState, act: float,
           gpu_act: float) -> Tuple[Dict[str, float], Dict[str, float]]:
    """(static, dynamic) watts per module component."""
    # Clocks burn some power even idle (clock trees, leakage rising with V): 10% floor.
    gpu = c.gpu_dyn_max_w * dvfs_scale(clocks.gpu_hz, clocks.gpu_table_hz) * (0.1 + 0.9 * gpu_act)
    cpu = c.cpu_dyn_max_w * clocks.cpu_online_fraction * dvfs_scale(
        clocks.cpu_hz, clocks.cpu_table_hz
    ) * (0.1 + 0.9 * act)
    emc_frac = clocks.emc_hz / clocks.emc_max_hz if clocks.emc_max_hz else 0.0
    ddr = c.ddr_dyn_max_w * emc_frac * (0.3 + 0.7 * gpu_act)
    static = {"gpu": c.gpu_static_w, "cpu": c.cpu_static_w, "soc": c.soc_static_w,
              "ddr": c.ddr_static_w, "cv": c.cv_static_w, "sys": c.sys_static_w,
              "wifi": c.wifi_static_w}
    return static, {"gpu": gpu, "cpu": cpu, "soc": 0.2 * emc_frac, "ddr": ddr}


def rail_role(label: str) -> str:
    """Which components a rail name measures (names differ between boards and releases)."""
    name = label.upper()
    if name in ("VDD_IN", "POM_5V_IN"):
        return "in"
    if name == "VIN":
        return "board"
    if "GPU" in name and "CPU" in name:
        return "cpu+gpu+cv"
    if "GPU" in name and "SOC" in name:
        return "gpu+soc"
    if "CPU" in name and "CV" in name:
        return "cpu+cv"
    if "CPU" in name and "SOC" in name:
        return "cpu+soc"
    for word, role in (("GPU", "gpu"), ("CPU", "cpu"), ("SOC", "soc"), ("DDR", "ddr"),
                       ("VDDRQ", "ddr"), ("VDDQ", "ddr"), ("WIFI", "wifi"), ("SYS5V", "sys"),
                       ("VIN_SYS", "sys"), ("CV", "cv")):
        if word in name:
            return role
    return "sys"


def rail_powers_w(labels: Sequence[str], components: Dict[str, float]) -> Dict[str, float]:
    """Watts on each named rail. The module input includes everything on the module, after
    regulator losses; a board input adds the carrier board."""
    carrier = components.get("carrier", 0.0)
    total_in = (sum(components.values()) - carrier) / REGULATOR_EFFICIENCY
    out: Dict[str, float] = {}
    for label in labels:
        role = rail_role(label)
        if role == "in":
            out[label] = total_in
        elif role == "board":
            out[label] = total_in + carrier
        else:
            out[label] = sum(components.get(part, 0.0) for part in role.split("+"))
    return out


def rail_mv(label: str) -> int:
    """Bus voltage shown on a rail's sensor: module inputs at 5 V or 19 V, others as named."""
    name = label.upper()
    if "1V8" in name:
        return 1800
    if name == "VDD_IN":
        return 19000 if "5V" not in name else 5000
    if name == "VIN":
        return 20000  # Thor's dev kit input (USB-C PD, 20 V)
    return 5000
