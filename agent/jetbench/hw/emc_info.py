"""The memory clock (EMC) as the board has it: which control (a tegra210 debugfs override, the
BPMP rate lock, tegra264's `bwmgr` devfreq node), its rates, and the highest it runs now: the
clock's own top under the power mode's cap (R35 `emc_iso_cap`, R36+ `nvpmodel_clk_cap/emc`: the
lowest in force) and under a firmware ceiling found this boot (hw/boot_facts.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List, Optional, Tuple

from .board_tables import EMC_CAP_FILES, EMC_DEVFREQ_ENTRIES, EMC_LOCK_EXTRAS, EMC_OVERRIDES
from .boot_facts import EmcCeiling, emc_ceiling
from .fs import Root


@dataclass(frozen=True)
class EmcInfo:
    kind: str  # "debugfs-clock" (R24) | "debugfs-clk" (R28+) | "bpmp" | "devfreq" (tegra264)
    lock: str  # devfreq: the node's min_freq (pinning min = max locks it)
    lock_value: str  # what to write to lock (devfreq: unused, the rate itself)
    rate: str  # devfreq: the node's max_freq
    max_hz: int  # the highest rate it runs now: the table's top, under the mode's cap and ceiling
    available_hz: Tuple[int, ...]  # empty when the kernel lists none (any rate <= max)
    cur_freq: Optional[str]
    control: Optional[str] = None  # the devfreq node dir (kind "devfreq")
    min_hz: int = 0  # the lowest rate it runs (BPMP's min_rate, a table's first); 0: unknown
    table_max_hz: int = 0  # the clock's own top, before any cap (0: as max_hz)
    cap_hz: Optional[int] = None  # the power mode's cap in force, where below the top
    cap_file: Optional[str] = None  # the file it came from (board_tables.EMC_CAP_FILES)
    ceiling: Optional[EmcCeiling] = None  # a firmware ceiling found this boot (hw/boot_facts)
    lock_extras: Tuple[str, ...] = ()  # R36+: clk/emc/state, bwmgr_halt (written 1 to lock)

    @property
    def top_hz(self) -> int:
        return self.table_max_hz or self.max_hz


def _emc_cap(root: Root, top_hz: int) -> Tuple[Optional[int], Optional[str]]:
    """The lowest power-mode EMC cap in force below the clock's top, and its file: R35's
    emc_iso_cap, R36+'s nvpmodel_clk_cap/emc (docs/hardware.md, "EMC")."""
    best: Tuple[Optional[int], Optional[str]] = (None, None)
    for path, _who in EMC_CAP_FILES:
        hz = root.read_int(path, default=0)
        if 0 < hz < top_hz and (best[0] is None or hz < best[0]):
            best = (hz, path)
    return best


def emc_cap_now(root: Root, info: EmcInfo) -> Optional[int]:
    """The power mode's EMC cap in force now (after a lift, the lifted value), or None."""
    return _emc_cap(root, info.top_hz)[0]


def max_now(root: Root, info: EmcInfo) -> int:
    """The highest rate the EMC runs now: its top under the caps in force now and this boot's
    ceiling (detection's `max_hz` is both as they were when the board was read)."""
    cap = emc_cap_now(root, info)
    ceiling = emc_ceiling(root) if info.kind in ("bpmp", "devfreq") else None
    return min([info.top_hz] + ([cap] if cap else []) +
               ([ceiling.hz] if ceiling and ceiling.hz < info.top_hz else []))


def _capped_emc(root: Root, info: EmcInfo) -> EmcInfo:
    """`info` with the mode's cap and this boot's firmware ceiling applied to `max_hz`."""
    top = info.max_hz
    cap, cap_file = _emc_cap(root, top)
    ceiling = emc_ceiling(root)
    if ceiling is not None and not ceiling.hz < top:
        ceiling = None
    runs = min([top] + ([cap] if cap else []) + ([ceiling.hz] if ceiling else []))
    return replace(info, max_hz=runs, table_max_hz=top, cap_hz=cap, cap_file=cap_file,
                   ceiling=ceiling)


def detect_emc(root: Root) -> Optional[EmcInfo]:
    for entry in EMC_DEVFREQ_ENTRIES:
        node = f"/sys/class/devfreq/{entry}"
        if root.exists(f"{node}/max_freq"):
            # A devfreq node (no debugfs: works under lockdown too): pinned min = max = rate.
            real = root.resolve(node)
            table = tuple(sorted(set(root.read_ints(f"{real}/available_frequencies",
                                                    default=[]))))
            return _capped_emc(root, EmcInfo(
                kind="devfreq",
                lock=f"{real}/min_freq",
                lock_value="",
                rate=f"{real}/max_freq",
                max_hz=max(table) if table else root.read_int(f"{real}/max_freq", default=0),
                available_hz=table,
                cur_freq=f"{real}/cur_freq",
                control=real,
                min_hz=min(table) if table else 0,
            ))
    bpmp = "/sys/kernel/debug/bpmp/debug/clk/emc"
    if root.exists(f"{bpmp}/rate"):
        return _capped_emc(root, EmcInfo(
            kind="bpmp",
            lock=f"{bpmp}/mrq_rate_locked",
            lock_value="1",
            rate=f"{bpmp}/rate",
            max_hz=root.read_int(f"{bpmp}/max_rate", default=0),
            available_hz=(),
            cur_freq=f"{bpmp}/rate",
            min_hz=root.read_int(f"{bpmp}/min_rate", default=0),
            lock_extras=tuple(p for p in EMC_LOCK_EXTRAS if root.exists(p)),
        ))
    for kind, override, lock, rate, max_file, rates_file, cur in EMC_OVERRIDES:
        if root.exists(f"{override}/{rate}"):
            return EmcInfo(
                kind=kind,
                lock=f"{override}/{lock}",
                lock_value="1",
                rate=f"{override}/{rate}",
                max_hz=root.read_int(max_file, default=0),
                available_hz=khz_to_hz(root.read_ints(rates_file, default=[])),
                cur_freq=cur,
            )
    return None


def khz_to_hz(values: List[int]) -> Tuple[int, ...]:
    """kHz rate lists (cpufreq, tegra210 debugfs tables) as sorted, distinct Hz."""
    return tuple(sorted({v * 1000 for v in values}))
