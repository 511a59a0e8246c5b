"""The limits the active power mode set: what NVIDIA's `jetson_clocks` takes as "max".

nvpmodel applies a mode by lowering each CPU policy's `scaling_max_freq` and the GPU's devfreq
`max_freq`, taking cores offline (`cpuN/online` = 0) and capping EMC (R35 `emc_iso_cap`, R36+
`nvpmodel_clk_cap/emc`: hw/board_tables.EMC_CAP_FILES). jetson_clocks then pins min = those
maxima and leaves offline cores alone, so a 10 W mode stays a 10 W budget. jetbench does the
same unless told to go past the mode.

The values are the mode's, not what jetbench wrote: `originals` (the state journal's saved raw
values, path -> raw) win over what the files hold now, so a board jetbench already pinned
past its mode still shows the mode's caps. Boards without nvpmodel (TX1 on R24, a PC) have none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

from .board import Board
from .board_tables import EMC_CAP_FILES
from .fs import Root
from .nvpmodel import CONF_FILE, PowerMode, parse_mode_names, read_power_mode


@dataclass(frozen=True)
class ModeCaps:
    mode: PowerMode
    cpu_max_hz: Dict[str, int]  # cpufreq policy dir -> the mode's max, where below the hardware's
    gpu_max_hz: Optional[int]  # the mode's devfreq max_freq, where below the table's top
    offline: Tuple[str, ...]  # cpuN/online files the mode left at 0
    unconstrained_id: Optional[int]  # the board's MAXN mode (the way out), if its conf names one
    emc_max_hz: Optional[int] = None  # the mode's EMC cap, where below the clock's top
    emc_cap_file: Optional[str] = None  # the file it is kept in (R35 emc_iso_cap, R36+ clk_cap)
    simulated: bool = False  # a simulated board's (its way out is another board, not nvpmodel)

    @property
    def any(self) -> bool:
        return bool(self.cpu_max_hz or self.gpu_max_hz is not None or self.offline or
                    self.emc_max_hz is not None)

    def way_out(self) -> str:
        """How to get past the caps: another mode (nvpmodel on a board; on a simulated one, a
        board made in that mode), or --beyond-power-mode."""
        mode = str(self.unconstrained_id) if self.unconstrained_id is not None else "ID"
        if self.simulated:
            return (f"a simulated board's mode is chosen when it is made: `jetbench sim create "
                    f"--power-mode {mode} DIR` (`jetbench sim list` names each board's modes), "
                    "or pass --beyond-power-mode to go past it")
        switch = (f"`sudo nvpmodel -m {self.unconstrained_id}` (a mode without these caps)"
                  if self.unconstrained_id is not None else "`sudo nvpmodel -m ID` (another mode)")
        return f"switch the mode with {switch}, or pass --beyond-power-mode to go past it"


def cpu_online_file(cpu: int) -> str:
    return f"/sys/devices/system/cpu/cpu{cpu}/online"


def read_mode_caps(root: Root, board: Board, originals: Mapping[str, str]) -> Optional[ModeCaps]:
    """The active mode's caps, or None on a board without nvpmodel."""
    mode = read_power_mode(root)
    if mode is None:
        return None

    def value(path: str) -> Optional[int]:
        raw = originals.get(path)
        text = raw.strip() if raw is not None else root.read(path, default=None)
        return int(text) if text is not None and text.isdigit() else None

    cpu: Dict[str, int] = {}
    for policy in board.cpu.policies:
        khz = value(f"{policy.path}/scaling_max_freq")
        if khz is not None and 0 < khz * 1000 < policy.max_hz:
            cpu[policy.path] = khz * 1000
    gpu_hz = None
    gpu = board.gpu
    if gpu is not None and gpu.kind == "devfreq":
        units = value(f"{gpu.control}/max_freq")
        if units is not None and 0 < units * gpu.hz_per_unit < gpu.max_hz:
            gpu_hz = units * gpu.hz_per_unit
    offline = tuple(f for f in board.cpu.online_files if value(f) == 0)
    names = parse_mode_names(root.read(CONF_FILE, default=""))
    maxn = sorted(k for k, name in names.items() if name.upper().startswith("MAXN"))
    emc_hz: Optional[int] = None
    emc_file: Optional[str] = None
    if board.emc is not None:
        for path, _who in EMC_CAP_FILES:
            hz = value(path)
            if hz is not None and 0 < hz < board.emc.top_hz and (emc_hz is None or hz < emc_hz):
                emc_hz, emc_file = hz, path
    return ModeCaps(mode, cpu, gpu_hz, offline, maxn[-1] if maxn else None, emc_hz, emc_file,
                    board.simulated)
