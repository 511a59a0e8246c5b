"""CPU clocks: per policy (cluster) governors and min/max/setspeed, cores online, cpuidle states,
and cpuquiet/cluster switching on TX1 with L4T R24. cpufreq files are in kHz."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Set, Tuple

from ..board import Board, CpuPolicy
from ..fs import Root
from ..mode_caps import cpu_online_file
from .runs import cpufreq_runs
from .steps import ordered_min_max, write_if_changed
from .types import ClockReading, CpuTarget, Step, Write


def _cpus_label(cpus) -> str:
    cpus = sorted(cpus)
    if cpus == list(range(cpus[0], cpus[-1] + 1)) and len(cpus) > 1:
        return f"cpu{cpus[0]}-{cpus[-1]}"
    return ",".join(f"cpu{c}" for c in cpus)


def read(root: Root, board: Board) -> List[ClockReading]:
    readings = []
    for policy in board.cpu.policies:
        cur = root.read_int(f"{policy.path}/scaling_cur_freq", default=None)
        lo = root.read_int(f"{policy.path}/scaling_min_freq", default=None)
        hi = root.read_int(f"{policy.path}/scaling_max_freq", default=None)
        readings.append(
            ClockReading(
                domain="cpu",
                name=f"{policy.name} ({_cpus_label(policy.cpus)})",
                governor=root.read(f"{policy.path}/scaling_governor", default=None),
                min_hz=lo * 1000 if lo is not None else None,
                max_hz=hi * 1000 if hi is not None else None,
                cur_hz=cur * 1000 if cur is not None else None,
                available_hz=policy.available_hz,
                online=_any_online(root, policy.cpus),
            )
        )
    return readings


@dataclass(frozen=True)
class CoreState:
    """One core as `jetson_clocks --show` lists it: online, and its disabled idle states."""

    cpu: int
    online: bool
    idle_disabled: Tuple[str, ...]  # names of the cpuidle states whose `disable` is 1


def _cpus(board: Board) -> List[int]:
    return sorted({c for p in board.cpu.policies for c in p.cpus} | {
        int(f.split("/")[-2][3:]) for f in board.cpu.online_files})


def _online(root: Root, cpu: int) -> bool:
    return root.read(cpu_online_file(cpu), default="1") != "0"


def _any_online(root: Root, cpus: Iterable[int]) -> bool:
    """Whether a cluster has a core online: read core by core until one is (one file for an
    online cluster; clocks are read every few ms while a simulated network runs)."""
    return any(_online(root, c) for c in sorted(cpus))


def cores_online(root: Root, board: Board) -> Set[int]:
    """The cores online now (cpu0 often has no `online` file: it cannot be taken offline)."""
    return {cpu for cpu in _cpus(board) if _online(root, cpu)}


def read_cores(root: Root, board: Board) -> List[CoreState]:
    base = "/sys/devices/system/cpu"
    online_now = cores_online(root, board)
    out = []
    for cpu in _cpus(board):
        online = cpu in online_now
        disabled = tuple(
            root.read(f"{path.rsplit('/', 1)[0]}/name", default=path.split("/")[-2])
            for path in board.cpu.idle_files
            if path.startswith(f"{base}/cpu{cpu}/") and root.read(path, default="0") == "1")
        out.append(CoreState(cpu, online, disabled))
    return out


def plan(root: Root, board: Board, target: CpuTarget) -> List[Step]:
    steps: List[Step] = []
    cpu = board.cpu
    if target.online:
        # cpuquiet would take cores offline again behind our back (TX1, L4T R24).
        if cpu.cpuquiet_enable:
            writes = write_if_changed(root, cpu.cpuquiet_enable, 0)
            if writes:
                steps.append(Step("cpu", "cpuquiet off", tuple(writes)))
        if cpu.cluster_active and root.read(cpu.cluster_active) != "G":
            base = cpu.cluster_active.rsplit("/", 1)[0]
            writes = write_if_changed(root, f"{base}/immediate", 1)
            writes += write_if_changed(root, f"{base}/force", 0)  # as NVIDIA's R24 script
            writes += write_if_changed(root, cpu.cluster_active, "G")
            steps.append(Step("cpu", "fast cluster (G)", tuple(writes)))
        writes = [w for f in cpu.online_files if f not in target.keep_offline
                  for w in write_if_changed(root, f, 1)]
        if writes:
            steps.append(Step("cpu", "cores online", tuple(writes)))
    for policy in board.cpu.policies:
        if all(cpu_online_file(c) in target.keep_offline for c in policy.cpus):
            continue  # a cluster the power mode switched off: left as the mode set it
        writes = _policy_writes(root, policy, target)
        if writes:
            steps.append(Step("cpu", f"cpu {policy.name} ({_cpus_label(policy.cpus)})",
                              tuple(writes)))
    if target.idle is not None:
        value = 0 if target.idle else 1
        writes = [w for f in cpu.idle_files for w in write_if_changed(root, f, value)]
        if writes:
            steps.append(Step("cpu", "cpuidle states " + ("on" if target.idle else "off"),
                              tuple(writes)))
    return steps


def _policy_writes(root: Root, policy: CpuPolicy, target: CpuTarget) -> List[Write]:
    writes: List[Write] = []
    if target.governor:
        writes += write_if_changed(root, f"{policy.path}/scaling_governor", target.governor)
    lo = hi = None
    for path, p_lo, p_hi in target.policy_hz:
        if path == policy.path:
            lo, hi = p_lo, p_hi
    writes += ordered_min_max(
        root,
        f"{policy.path}/scaling_min_freq",
        f"{policy.path}/scaling_max_freq",
        lo,
        hi,
        scale=1000,
    )
    if target.setspeed and hi is not None and target.governor == "userspace":
        # Only meaningful (and only writable) under the userspace governor, set just above.
        # The entry that runs under min/max (hw/clocks/runs.py): the file reads back the
        # running clock, so under a cap that is no table entry (min = max = 918000 kHz on a
        # Nano in 5 W) the entry below the cap is written, and read back as written.
        setspeed = f"{policy.path}/scaling_setspeed"
        old = root.read(setspeed, default="")
        value = str(setspeed_runs_khz(root, policy, lo, hi))
        if old != value:
            writes.append(Write(setspeed, value, old))
    return writes


def setspeed_runs_khz(root: Root, policy: CpuPolicy, lo: Optional[int], hi: int) -> int:
    """The entry (kHz) the policy runs once min/max hold `lo`/`hi` (Hz; None: the min file
    as it is) and scaling_setspeed holds `hi`."""
    lo_khz = lo // 1000 if lo is not None else root.read_int(
        f"{policy.path}/scaling_min_freq", default=0)
    table = [f // 1000 for f in policy.available_hz] or [hi // 1000]
    return cpufreq_runs(table, lo_khz, hi // 1000, hi // 1000)
