"""What `jetbench info` reports: the board, its clock domains, sensors and current state, as one
JSON-ready document (also served by the daemon's status)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, TypedDict

from .documents import BoardDoc, ClockDoc
from .errors import HardwareError
from .hw import nvml
from .hw.board import Board
from .hw.clocks.cpu import read_cores
from .hw.clocks.fan import read_pwm
from .hw.clocks.types import ClockReading
from .hw.fs import Root
from .hw.readings import clock_doc, identity, read_now
from .ownership import journal
from .ownership.journal import originals

if TYPE_CHECKING:
    from .hw.meters.base import PowerSource


class CpuClusterDoc(TypedDict, total=False):
    """One row of `info`'s CPU clusters (cpu_clusters)."""
    policies: List[str]
    cpus: List[int]
    offline: List[int]
    governor: Optional[str]
    min_hz: Optional[int]
    max_hz: Optional[int]
    cur_hz: List[Optional[int]]
    available_hz: List[int]
    name: str  # 'cpu0-3', or 'cpu4-7 offline'


class ChannelDoc(TypedDict):
    name: str
    point: str
    unit: str


class SourceDoc(TypedDict):
    """A power source a measurement would record."""
    name: str
    period_s: float
    channels: List[ChannelDoc]
    total: Optional[str]


class NvmlGpuDoc(TypedDict):
    """A discrete GPU NVML controls."""
    bus_id: str
    name: str
    control: str
    graphics_max_hz: Optional[int]
    memory_max_hz: Optional[int]
    power_limit_mw: Optional[int]
    power_limits_mw: Optional[Tuple[int, int]]
    default_power_limit_mw: Optional[int]


class InfoCpuDoc(TypedDict):
    online_files: int
    idle_states: int
    cpuquiet: bool
    online: List[int]
    offline: List[int]
    idle_disabled: Dict[str, List[str]]  # "cpu3": the idle states turned off


class InfoGpuDoc(TypedDict):
    kind: str
    control: str
    railgate_file: Optional[str]
    railgate: Optional[str]
    side_clocks: List[str]
    file_unit: str
    load_pct: Optional[float]


class InfoEmcDoc(TypedDict):
    kind: str
    max_hz: int  # the highest rate it runs now: under the mode's cap and the firmware ceiling
    table_max_hz: int  # the clock's own top
    cap_hz: Optional[int]  # the power mode's cap in force, where below the top
    cap_file: Optional[str]  # where that cap is kept (R35 emc_iso_cap, R36+ nvpmodel_clk_cap)
    ceiling_hz: Optional[int]  # a firmware ceiling found this boot
    ceiling_why: Optional[str]
    control: Optional[str]


class FanDoc(TypedDict):
    pwm_file: str
    pwm: Optional[int]


class ZoneDoc(TypedDict):
    name: str
    temp_c: Optional[float]


class RailInfoDoc(TypedDict):
    name: str
    sensor: str
    channel: int
    layout: str
    point: str
    device: str
    chip: str
    is_total: bool


class PowerNowDoc(TypedDict):
    """The board's total power now: one reading of its own rails (info)."""
    name: str  # the total's name (VDD_IN; a sum's)
    channels: List[str]  # the rails it is (one) or sums
    point: str  # where it was measured (module_input)
    source: str  # the source read (ina3221)
    power_w: Optional[float]  # None: the reading had no value
    power_w_uncertainty_w: Optional[float]  # the sensors' datasheet limits; None: unknown


class InfoDoc(TypedDict):
    """`jetbench.info/1`: what `info --json` prints and `info`'s tables read."""
    schema: str
    simulated: bool
    board: BoardDoc
    clocks: List[ClockDoc]
    cpu_clusters: List[CpuClusterDoc]
    cpu: InfoCpuDoc
    gpu: Optional[InfoGpuDoc]
    emc: Optional[InfoEmcDoc]
    fan: Optional[FanDoc]
    thermal: List[ZoneDoc]
    rails: List[RailInfoDoc]
    total_rail: Optional[str]
    total: Optional[str]
    sources: List[SourceDoc]
    power_now: Optional[PowerNowDoc]
    nvml_gpus: List[NvmlGpuDoc]
    restore_pending: bool
    notes: List[str]


def describe_sources(sources: Sequence[PowerSource]) -> List[SourceDoc]:
    """The power sources a measurement would record (constructed, not opened)."""
    out: List[SourceDoc] = []
    for source in sources:
        total = source.total()
        out.append({
            "name": source.name,
            "period_s": source.period_s,
            "channels": [{"name": c.name, "point": c.point, "unit": c.unit}
                         for c in source.channels()],
            "total": total.describe() if total else None,
        })
    return out


def power_now(root: Root, board: Board, sources: Sequence[PowerSource]
              ) -> Optional[PowerNowDoc]:
    """The board's total power now, with its uncertainty (the sensors' datasheet limits, as
    monitor states it), from one reading of the board's own rails (INA3221/INA238 files: a
    few reads). None where the board has no rails among `sources` or they cannot be read: an
    external meter, RAPL or NVML is not opened here (a port, or two readings of a counter)."""
    from .hw.meters.accuracy import channel_accuracies
    from .hw.meters.base import total_power_w
    from .hw.meters.ina3221 import RailSource

    rails = next((s for s in sources if isinstance(s, RailSource) and s.total()), None)
    total = rails.total() if rails else None
    if rails is None or total is None:
        return None
    try:
        rails.open()
        try:
            reading = rails.read()
        finally:
            rails.close()
    except HardwareError:  # (a rail file gone or unreadable: info still answers)
        return None
    channels = list(rails.channels())
    watts = {c.name: w for c, w in zip(channels, reading.power_w)}
    value = total_power_w(total, watts)
    accuracy = channel_accuracies(root, [rails], board.family)
    parts = [accuracy[f"{rails.name}/{n}"].worst_case_w(watts[n] or 0.0)
             if f"{rails.name}/{n}" in accuracy else None for n in total.channels]
    err = None if value is None or any(p is None for p in parts) else float(
        sum(p for p in parts if p is not None))
    return {"name": total.name, "channels": list(total.channels), "point": total.point,
            "source": rails.name,
            "power_w": value, "power_w_uncertainty_w": err}


def cpu_label(cpus: Sequence[int]) -> str:
    """(0, 1, 2, 3, 6) -> 'cpu0-3,6'."""
    runs: List[Tuple[int, int]] = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], c)
        else:
            runs.append((c, c))
    return "cpu" + ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def cpu_clusters(board: Board, readings: Sequence[ClockReading],
                 offline: Sequence[int] = ()) -> List[CpuClusterDoc]:
    """One row per cluster (a policy shared by several cores), with its online cores (and the
    offline ones apart). Per-core policies (a policy per CPU, as on Thor) in the same state are
    one row, so 14 cores fit a screen."""
    cpu = [r for r in readings if r.domain == "cpu"]
    groups: List[CpuClusterDoc] = []
    last_key: Optional[Tuple[object, ...]] = None  # the last group's state
    for policy, r in zip(board.cpu.policies, cpu):
        # Only single-core policies merge: a real cluster keeps its own row.
        key = (len(policy.cpus) == 1, r.governor, r.min_hz, r.max_hz, tuple(r.available_hz))
        if groups and key[0] and last_key == key:
            group = groups[-1]
        else:
            group = {"policies": [], "cpus": [], "offline": [], "governor": r.governor,
                     "min_hz": r.min_hz, "max_hz": r.max_hz, "cur_hz": [],
                     "available_hz": list(r.available_hz)}
            groups.append(group)
            last_key = key
        group["policies"].append(policy.name)
        group["cpus"].extend(c for c in policy.cpus if c not in offline)
        group["offline"].extend(c for c in policy.cpus if c in offline)
        group["cur_hz"].append(r.cur_hz)
    for group in groups:
        group["name"] = cpu_label(group["cpus"]) if group["cpus"] else \
            f"{cpu_label(group['offline'])} offline"
    return groups


def nvml_gpus_doc(board: Board) -> List[NvmlGpuDoc]:
    """The discrete GPUs NVML controls: tables, and the power limit now and its bounds."""
    out: List[NvmlGpuDoc] = []
    for g in board.nvml_gpus:
        try:
            limit: Optional[int] = int(nvml.read_setting(
                nvml.key(g.bus_id, nvml.POWER_LIMIT)))
        except HardwareError:
            limit = None
        out.append({"bus_id": g.bus_id, "name": g.name, "control": "nvml",
                    "graphics_max_hz": max(g.graphics_hz, default=None),
                    "memory_max_hz": max(g.memory_hz, default=None),
                    "power_limit_mw": limit, "power_limits_mw": g.power_limits_mw,
                    "default_power_limit_mw": g.default_power_mw})
    return out


def describe(root: Root, board: Board,
             sources: Sequence[PowerSource] = ()) -> InfoDoc:
    now = read_now(root, board)
    readings = now.clocks
    cores = read_cores(root, board)
    rails: List[RailInfoDoc] = [
        {
            "name": rail.name,
            "sensor": rail.sensor,
            "channel": rail.channel,
            "layout": rail.layout,
            "point": rail.point,
            "device": rail.device,
            "chip": rail.chip,
            "is_total": rail.name == board.total_rail,
        }
        for rail in board.rails
    ]
    temps = now.temperatures_c
    return {
        "schema": "jetbench.info/1",
        "simulated": board.simulated,
        "board": identity(root, board, originals(root)),
        "clocks": [clock_doc(r, table=True) for r in readings],
        "cpu_clusters": cpu_clusters(board, readings,
                                     [c.cpu for c in cores if not c.online]),
        "cpu": {
            "online_files": len(board.cpu.online_files),
            "idle_states": len(board.cpu.idle_files),
            "cpuquiet": board.cpu.cpuquiet_enable is not None,
            # as `jetson_clocks --show`: which cores are online, which idle states are off
            "online": [c.cpu for c in cores if c.online],
            "offline": [c.cpu for c in cores if not c.online],
            "idle_disabled": {f"cpu{c.cpu}": list(c.idle_disabled) for c in cores
                              if c.idle_disabled},
        },
        "gpu": None if board.gpu is None else {
            "kind": board.gpu.kind, "control": board.gpu.control,
            "railgate_file": board.gpu.railgate,
            "railgate": root.read(board.gpu.railgate, default=None)
            if board.gpu.railgate else None,
            "side_clocks": [name for name, _node in board.gpu.side_clocks],
            # devfreq is Hz by ABI; values that only make sense as kHz are read as kHz (a note).
            "file_unit": {1: "Hz", 1000: "kHz"}.get(board.gpu.hz_per_unit, "?"),
            "load_pct": now.gpu_load_pct,
        },
        "emc": None if board.emc is None else {
            "kind": board.emc.kind, "max_hz": board.emc.max_hz,
            "table_max_hz": board.emc.top_hz, "cap_hz": board.emc.cap_hz,
            "cap_file": board.emc.cap_file,
            "ceiling_hz": board.emc.ceiling.hz if board.emc.ceiling else None,
            "ceiling_why": board.emc.ceiling.why if board.emc.ceiling else None,
            "control": board.emc.control,
        },
        "fan": None if board.fan is None else {"pwm_file": board.fan.pwm,
                                                "pwm": read_pwm(root, board)},
        "thermal": [{"name": z.name, "temp_c": temps.get(z.name)} for z in board.thermal_zones],
        "rails": rails,
        "total_rail": board.total_rail,
        "total": (board.total_rail or ("sum of " + ", ".join(r.name for r in board.rails)))
        if board.rails else None,
        "sources": describe_sources(sources),
        "power_now": power_now(root, board, sources),
        "nvml_gpus": nvml_gpus_doc(board),
        "restore_pending": bool(journal.load(root)),
        "notes": list(board.notes),
    }
