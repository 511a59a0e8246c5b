"""Whether the power mode nvpmodel reports is the one in force.

`nvpmodel -q` reads its status file, not the kernel: a mode switch that fails part way (Orin NX
modes that take cores offline fail silently over SSH; a mode that needs a reboot) leaves the
status naming the new mode while the kernel keeps the old caps. nvpmodel's conf says what each
mode sets: `< PARAM TYPE=FILE|CLOCK NAME=X >` blocks name the files (`CORE_4 /sys/.../cpu4/online`,
`MAX_FREQ /sys/.../scaling_max_freq`, R36+ also `MAX_FREQ_KNEXT`), and each
`< POWER_MODEL ID=N NAME=... >` block lists `PARAM KEY VALUE` lines (`CPU_ONLINE CORE_4 0`,
`GPU MAX_FREQ 624750000`; CPU in kHz as its files, GPU and EMC in Hz; MAX_FREQ -1 is the top,
EMC MAX_FREQ 0 no cap). This compares the reported mode's cores and maxima with the files, the
way nvpmodel left them: a value jetbench wrote since is judged by the journal's original
(`originals`), and a cap that is no table entry may read back as the nearest entry (nvpmodel
rounds caps without a word).
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..units import format_hz
from .fs import Root
from .nvpmodel import CONF_FILE, read_power_mode

_BLOCK = re.compile(r"<\s*(\w+)\b([^>]*)>")
_ATTR = re.compile(r"(\w+)\s*=\s*(\S+)")

Paths = Dict[Tuple[str, str], str]  # (PARAM name, key) -> file
Settings = Dict[int, List[Tuple[str, str, str]]]  # mode id -> (PARAM name, key, value)


def parse_conf(conf: str) -> Tuple[Paths, Settings]:
    """The files each PARAM names, and each mode's settings, from an nvpmodel.conf."""
    paths: Paths = {}
    modes: Settings = {}
    section: Optional[Tuple[str, object]] = None
    for raw in conf.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        block = _BLOCK.match(line)
        if block:
            attrs = {k.upper(): v for k, v in _ATTR.findall(block.group(2))}
            kind = block.group(1).upper()
            section = None
            if kind == "PARAM" and "NAME" in attrs:
                section = ("param", attrs["NAME"])
            elif kind == "POWER_MODEL" and attrs.get("ID", "").isdigit():
                section = ("mode", int(attrs["ID"]))
                modes.setdefault(int(attrs["ID"]), [])
            continue
        words = line.split()
        if section is None:
            continue
        if section[0] == "param" and len(words) == 2:
            paths[(str(section[1]), words[0])] = words[1]
        elif section[0] == "mode" and len(words) == 3:
            mode_id = section[1]
            assert isinstance(mode_id, int)
            modes[mode_id].append((words[0], words[1], words[2]))
    return paths, modes


def _int(text: Optional[str]) -> Optional[int]:
    text = (text or "").strip()
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def _hz(path: str, value: int) -> int:
    return value * 1000 if "/cpufreq/" in path else value


def not_in_force(root: Root, originals: Mapping[str, str]) -> List[str]:
    """What the reported mode sets that the kernel does not have ('cpu4 online: mode 4
    MODE_10W_4CORE takes it offline'); empty when they agree or nothing can be compared."""
    mode = read_power_mode(root)
    if mode is None:
        return []
    paths, modes = parse_conf(root.read(CONF_FILE, default="") or "")

    def now(path: str) -> Optional[int]:
        raw = originals.get(path)
        return _int(raw) if raw is not None else _int(root.read(path, default=None))

    out: List[str] = []
    for param, key, value in modes.get(mode.id, []):
        want = _int(value)
        path = paths.get((param, key)) or paths.get((param, f"{key}_KNEXT"))
        if want is None or path is None:
            continue
        have = now(path)
        if have is None:
            continue
        if param == "CPU_ONLINE":
            if have != want:
                cpu = path.rstrip("/").split("/")[-2]
                state = "online" if have else "offline"
                out.append(f"{cpu} {state}: mode {mode.text} "
                           f"{'takes it offline' if want == 0 else 'has it online'}")
        elif key == "MAX_FREQ" and want > 0 and have != want and \
                have not in _nearest(root, paths.get((param, "FREQ_TABLE")), want) and \
                not _cluster_offline(root, path, now):
            now_text = f"max {format_hz(_hz(path, have))}" if have > 0 else "no cap in force"
            out.append(f"{param} {now_text}: mode {mode.text} sets "
                       f"{format_hz(_hz(path, want))} ({path})")
    return out


def _cluster_offline(root: Root, path: str, now: Callable[[str], Optional[int]]) -> bool:
    """A cpufreq policy whose cores are all offline: its files say nothing of what runs, and
    nvpmodel's writes to them may not land."""
    if "/cpufreq/" not in path:
        return False
    policy = path.rsplit("/", 1)[0]
    cpus = (root.read(f"{policy}/related_cpus", default="") or "").split()
    files = [f"/sys/devices/system/cpu/cpu{c}/online" for c in cpus if c.isdigit()]
    return bool(files) and all(now(f) == 0 for f in files)


def _nearest(root: Root, table_file: Optional[str], want: int) -> Sequence[int]:
    """The table entries a cap of `want` may read back as (nvpmodel rounds to the nearest)."""
    if table_file is None:
        return ()
    table = root.read_ints(table_file, default=[])
    if not table:
        return ()
    best = min(abs(t - want) for t in table)
    return [t for t in table if abs(t - want) == best]
