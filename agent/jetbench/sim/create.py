"""`jetbench sim create`: write a simulated board's tree, file for file as on the board.

Units as the kernel shows them: cpufreq in kHz, devfreq and EMC in Hz, INA3221 in mV/mA/mW,
temperatures in millidegrees. Device-tree strings are NUL-terminated. Symlinks are relative, as
sysfs's are, so the tree can be moved or copied.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Union

from ..errors import UsageError
from ..hw.board import SIM_MARKER
from . import quirks as Q
from .boards import (
    EMC_DEVFREQ_DEVICE,
    SimBoard,
    SimCluster,
    SimIna,
    SimModeCaps,
    emc_cap_file,
    get,
    r36_or_newer,
)
from .file_kernel import FileKernel, idle_rails_mw, rail_mv

DYNAMIC_GOVERNOR_NOTE = "simulated: dynamic governors idle at the table minimum"
GPU_PLATFORM_ALIAS = "/sys/devices/platform/gpu.0"  # R35+: a link to the GPU's device


def l4t_major(board: SimBoard) -> int:
    """The L4T release's major number from its release line (0: none)."""
    match = re.match(r"#\s*R(\d+)", board.l4t_line or "")
    return int(match.group(1)) if match else 0


class _Tree:
    def __init__(self, base: Path):
        self.base = base

    def _host(self, board_path: str) -> Path:
        return self.base / board_path.lstrip("/")

    def file(self, board_path: str, content: Union[str, bytes]) -> None:
        host = self._host(board_path)
        host.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        host.write_bytes(data)

    def value(self, board_path: str, value: object) -> None:
        self.file(board_path, f"{value}\n")

    def dir(self, board_path: str) -> None:
        self._host(board_path).mkdir(parents=True, exist_ok=True)

    def link(self, board_path: str, target_board_path: str) -> None:
        host = self._host(board_path)
        host.parent.mkdir(parents=True, exist_ok=True)
        rel = os.path.relpath(self._host(target_board_path), host.parent)
        if host.is_symlink() or host.exists():
            host.unlink()
        os.symlink(rel, host)


def create_board(key: str, directory: Union[str, os.PathLike],
                 quirks: Iterable[str] = (), power_mode: Optional[int] = None) -> SimBoard:
    """Write the tree of simulated board `key` into `directory` (new or empty). `quirks`:
    names from `sim/quirks.py`, recorded in the marker for the simulated kernel. `power_mode`:
    start in that nvpmodel mode (its caps written as nvpmodel leaves them)."""
    board = get(key)
    caps = _mode_caps(board, power_mode)
    if power_mode is not None:
        board = replace(board, power_mode=power_mode)
    try:
        wanted = Q.check(quirks)
    except ValueError as err:
        raise UsageError(str(err), hint="`jetbench sim create --help` lists them") from None
    if "late-gpu" in wanted and board.gpu_kind != "devfreq":
        raise UsageError(f"--quirk late-gpu needs a devfreq GPU; {key} has a debugfs one")
    base = Path(directory)
    if base.exists() and any(base.iterdir()):
        raise UsageError(f"directory is not empty: {base}", hint="choose a new directory")
    base.mkdir(parents=True, exist_ok=True)
    tree = _Tree(base)
    _identity(tree, board, wanted)
    _cpu(tree, board)
    _gpu(tree, board)
    _emc(tree, board)
    _fan(tree, board)
    _thermal(tree, board)
    _inas(tree, board)
    if caps is not None:
        if "mode-cores-online" in wanted:  # the switch failed to take cores offline
            caps = replace(caps, offline_cpus=())
        _apply_mode_caps(tree, board, caps)
    tree.dir("/var/lib/jetbench")  # the state journal's directory, as after `jetbench` runs
    # The kernel's derived files (current frequencies) from the initial settings.
    FileKernel(base).sync()
    if "late-gpu" in wanted:  # staged: the simulated kernel moves it in LATE_GPU_S after start
        staging = base / Q.LATE_GPU_STAGING
        staging.mkdir(parents=True)
        os.replace(tree._host(f"{board.gpu_device}/devfreq"), staging / "devfreq")
        tree._host(f"/sys/class/devfreq/{board.gpu_devfreq_name}").unlink()
    return board


def check_power_mode(key: str, mode: Optional[int]) -> None:
    """UsageError when simulated board `key` has no power mode `mode`."""
    _mode_caps(get(key), mode)


def modes_text(board: SimBoard) -> str:
    """'0 MAXN (usual), 1 5W': the modes a simulated board can start in, with their names."""
    names = dict(board.power_modes)
    ids = sorted({board.power_mode, *dict(board.mode_caps)} - {None})
    return ", ".join(f"{m} {names.get(m, '?')}" + (" (usual)" if m == board.power_mode else "")
                     for m in ids if m is not None)


def power_mode_id(key: str, mode: Optional[str]) -> Optional[int]:
    """A `--power-mode` as typed (an id, or a name: `5W`, `maxn`, `MODE_10W_4CORE`, or a
    part of one that names a single mode) -> its id; UsageError naming the modes otherwise."""
    if mode is None:
        return None
    board = get(key)
    text = mode.strip()
    if text.isdigit():
        return int(text)
    startable = {board.power_mode, *dict(board.mode_caps)}
    names = {m: name for m, name in board.power_modes if m in startable}
    exact = [m for m, name in names.items() if name.lower() == text.lower()]
    near = exact or [m for m, name in names.items() if text.lower() in name.lower()]
    if len(near) == 1:
        return near[0]
    said = "names more than one" if near else "is no mode's name or id"
    raise UsageError(f"--power-mode {mode!r} {said} on simulated {board.key}",
                     hint=f"its simulated modes: {modes_text(board) or 'none (no nvpmodel)'}")


def _mode_caps(board: SimBoard, mode: Optional[int]) -> Optional[SimModeCaps]:
    """The caps of `mode` on `board`; None for its default mode; UsageError for another."""
    if mode is None or mode == board.power_mode:
        return None
    caps = dict(board.mode_caps)
    if mode not in caps:
        raise UsageError(f"simulated {board.key} has no power mode {mode}",
                         hint=f"its simulated modes: {modes_text(board) or 'none (no nvpmodel)'}")
    return caps[mode]


def _apply_mode_caps(tree: _Tree, board: SimBoard, caps: SimModeCaps) -> None:
    """What nvpmodel leaves after switching to a capped mode: cores off, CPU and GPU max lowered
    (min is left, as nvpmodel writes only the max)."""
    base = "/sys/devices/system/cpu"
    for cpu in caps.offline_cpus:
        tree.value(f"{base}/cpu{cpu}/online", 0)
    online = [c for cl in board.clusters for c in cl.cpus if c not in caps.offline_cpus]
    tree.value(f"{base}/online", _cpu_ranges(sorted(online)))
    for cluster in board.clusters:
        if caps.cpu_max_khz is None or set(cluster.cpus) <= set(caps.offline_cpus):
            continue
        tree.value(f"{_policy_dir(board, cluster)}/scaling_max_freq",
                   min(caps.cpu_max_khz, cluster.freqs_khz[-1]))
    if caps.gpu_max_hz is not None and board.gpu_kind == "devfreq":
        node = f"{board.gpu_device}/devfreq/{board.gpu_devfreq_name}"
        tree.value(f"{node}/max_freq", caps.gpu_max_hz)
    if caps.emc_max_hz is not None and board.emc_iso_cap_hz is not None:
        tree.value(emc_cap_file(board), caps.emc_max_hz)


def _cpu_ranges(cpus: List[int]) -> str:
    """[0, 3, 4, 5] -> '0,3-5' (the kernel's cpu list format)."""
    parts: List[str] = []
    for cpu in cpus:
        if parts and cpu == int(parts[-1].split("-")[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{cpu}"
        else:
            parts.append(str(cpu))
    return ",".join(parts)


def _identity(tree: _Tree, board: SimBoard, quirks: Iterable[str] = ()) -> None:
    marker = {"board": board.key, "format": 1, "note": "jetbench simulated board: not hardware",
              "quirks": list(quirks)}
    tree.file(SIM_MARKER, json.dumps(marker, indent=1) + "\n")
    dt = "/sys/firmware/devicetree/base"
    tree.file(f"{dt}/model", board.model + "\0")
    tree.file(f"{dt}/compatible", "".join(c + "\0" for c in board.compatible))
    tree.link("/proc/device-tree", dt)
    if board.l4t_line:
        tree.file("/etc/nv_tegra_release", board.l4t_line + "\n")
    if board.power_modes:
        _nvpmodel(tree, board)
    # the kernel's boot id: this boot's facts (hw/boot_facts.py) are keyed by it
    tree.file("/proc/sys/kernel/random/boot_id", f"{uuid.uuid4()}\n")


def _nvpmodel(tree: _Tree, board: SimBoard) -> None:
    """The current mode, and a conf in nvpmodel's format (not NVIDIA's file: the simulated
    boards' representative caps): PARAM blocks naming the files, then each mode's settings
    (hw/mode_in_force.py compares the reported mode with them)."""
    conf = f"/etc/nvpmodel/nvpmodel_sim_{board.key}.conf"
    base = "/sys/devices/system/cpu"
    cpus = sorted(c for cl in board.clusters for c in cl.cpus)[1:]
    lines = ["# jetbench simulated board: representative caps, not NVIDIA's conf (not hardware)",
             "< PARAM TYPE=FILE NAME=CPU_ONLINE >"]
    lines += [f"CORE_{c} {base}/cpu{c}/online" for c in cpus]
    for k, cluster in enumerate(board.clusters):
        policy = _policy_dir(board, cluster)
        lines += [f"< PARAM TYPE=CLOCK NAME=CPU_CLUSTER{k} >",
                  f"FREQ_TABLE {policy}/scaling_available_frequencies",
                  f"MAX_FREQ {policy}/scaling_max_freq"]
    gpu = f"{board.gpu_device}/devfreq/{board.gpu_devfreq_name}" \
        if board.gpu_kind == "devfreq" else None
    if gpu:
        lines += ["< PARAM TYPE=CLOCK NAME=GPU >", f"FREQ_TABLE {gpu}/available_frequencies",
                  f"MAX_FREQ {gpu}/max_freq"]
    emc = board.emc_iso_cap_hz is not None
    if emc:
        key = "MAX_FREQ_KNEXT" if r36_or_newer(board) else "MAX_FREQ"
        lines += ["< PARAM TYPE=CLOCK NAME=EMC >", f"{key} {emc_cap_file(board)}"]
    caps = dict(board.mode_caps)
    default = get(board.key).power_mode  # the board's usual mode (its tree is that mode's)
    for mode_id, name in board.power_modes:
        lines.append(f"< POWER_MODEL ID={mode_id} NAME={name} >")
        mode = caps.get(mode_id)
        if mode is None and mode_id != default:
            continue  # a mode the simulator does not model: its settings are not listed
        offline = mode.offline_cpus if mode else ()
        lines += [f"CPU_ONLINE CORE_{c} {0 if c in offline else 1}" for c in cpus]
        for k in range(len(board.clusters)):
            cap = mode.cpu_max_khz if mode and mode.cpu_max_khz else -1
            lines.append(f"CPU_CLUSTER{k} MAX_FREQ {cap}")
        if gpu:
            lines.append(f"GPU MAX_FREQ {mode.gpu_max_hz if mode and mode.gpu_max_hz else -1}")
        if emc:
            emc_cap = mode.emc_max_hz if mode and mode.emc_max_hz else board.emc_iso_cap_hz
            lines.append(f"EMC MAX_FREQ {emc_cap}")
    lines.append(f"< PM_CONFIG DEFAULT={default} >")
    tree.file(conf, "\n".join(lines) + "\n")
    tree.link("/etc/nvpmodel.conf", conf)
    tree.file("/var/lib/nvpmodel/status", f"pmode:{board.power_mode:04d} fmode:quiet\n")


def _policy_dir(board: SimBoard, cluster: SimCluster) -> str:
    owner = min(cluster.cpus)
    base = "/sys/devices/system/cpu"
    return f"{base}/cpufreq/policy{owner}" if board.policy_dirs else f"{base}/cpu{owner}/cpufreq"


def _cpu(tree: _Tree, board: SimBoard) -> None:
    base = "/sys/devices/system/cpu"
    all_cpus = sorted(c for cl in board.clusters for c in cl.cpus)
    tree.value(f"{base}/online", f"0-{all_cpus[-1]}")
    for index, cluster in enumerate(board.clusters):
        owner = min(cluster.cpus)
        if board.policy_dirs:
            policy = f"{base}/cpufreq/policy{owner}"
        else:
            policy = f"{base}/cpu{owner}/cpufreq"
        freqs = cluster.freqs_khz
        files: Dict[str, object] = {
            "affected_cpus": " ".join(map(str, cluster.cpus)),
            "related_cpus": " ".join(map(str, cluster.cpus)),
            "cpuinfo_min_freq": freqs[0],
            "cpuinfo_max_freq": freqs[-1],
            "cpuinfo_transition_latency": 300000,
            "scaling_available_frequencies": " ".join(map(str, freqs)) + " ",
            "scaling_available_governors": " ".join(board.cpu_governors) + " ",
            "scaling_driver": "tegra_cpufreq" if index == 0 else "tegra_cpufreq",
            "scaling_governor": board.cpu_governor,
            "scaling_min_freq": freqs[0],
            "scaling_max_freq": freqs[-1],
            "scaling_cur_freq": freqs[0],
            "cpuinfo_cur_freq": freqs[0],
            "scaling_setspeed": "<unsupported>",
        }
        for name, value in files.items():
            tree.value(f"{policy}/{name}", value)
        for cpu in cluster.cpus:
            if board.policy_dirs or cpu != owner:
                tree.link(f"{base}/cpu{cpu}/cpufreq", policy)
    for cpu in all_cpus:
        if cpu != 0:
            tree.value(f"{base}/cpu{cpu}/online", 1)
        for k, name in enumerate(board.idle_states):
            state = f"{base}/cpu{cpu}/cpuidle/state{k}"
            tree.value(f"{state}/name", name)
            tree.value(f"{state}/disable", 0)
            tree.value(f"{state}/usage", 0)
    if board.cpuquiet:
        tree.value(f"{base}/cpuquiet/tegra_cpuquiet/enable", 1)
        tree.value(f"{base}/cpuquiet/current_governor", "runnable")
        tree.value("/sys/kernel/cluster/active", "G")
        tree.value("/sys/kernel/cluster/immediate", 0)
        tree.value("/sys/kernel/cluster/force", 0)


def _gpu(tree: _Tree, board: SimBoard) -> None:
    freqs = board.gpu_freqs_hz
    device = board.gpu_device
    if board.gpu_pci_bdf:
        # A PCI GPU (Thor): runtime PM instead of railgate_enable, no load file, no of_node.
        tree.value(f"{device}/power/control", "auto")
        tree.value(f"{device}/power/runtime_status", "suspended")
        tree.link(f"/sys/bus/pci/devices/{board.gpu_pci_bdf}", device)
        tree.file(f"/proc/driver/nvidia/gpus/{board.gpu_pci_bdf}/information",
                  f"Model: \t\t NVIDIA Thor\nBus Location: \t {board.gpu_pci_bdf}\n")
    else:
        tree.value(f"{device}/railgate_enable", 1)
        tree.value(f"{device}/load", 0)
    if board.enable_3d_scaling:
        tree.value(f"{device}/enable_3d_scaling", 1)
    if board.gpu_of_node:
        of_node = (f"/sys/firmware/devicetree/base/{board.gpu_of_node}"
                   f"@{device.rsplit('.', 1)[0][-8:]}")
        tree.file(f"{of_node}/name", board.gpu_of_node + "\0")
        if board.gpu_compatible:
            tree.file(f"{of_node}/compatible", board.gpu_compatible + "\0")
        tree.link(f"{device}/of_node", of_node)
    if board.gpu_compatible and l4t_major(board) >= 35 and device != GPU_PLATFORM_ALIAS:
        tree.link(GPU_PLATFORM_ALIAS, device)  # where R35+ jetson_clocks looks for the GPU
    if board.gpu_kind == "debugfs":
        clock = "/sys/kernel/debug/clock"
        tree.value(f"{clock}/override.gbus/rate", 0)
        tree.value(f"{clock}/override.gbus/state", 0)
        # The override clock's limits, read by R24 jetson_clocks (it pins override.gbus/max).
        tree.value(f"{clock}/override.gbus/max", freqs[-1])
        tree.value(f"{clock}/override.gbus/min", freqs[0])
        tree.value(f"{clock}/gbus/max", freqs[-1])
        tree.value(f"{clock}/gbus/min", freqs[0])
        tree.value(f"{clock}/gbus/rate", freqs[0])
        tree.value(f"{clock}/gbus/possible_rates", " ".join(str(f // 1000) for f in freqs))
        return
    _devfreq(tree, device, board.gpu_devfreq_name, freqs, board.gpu_governors, "nvhost_podgov")
    for dev, name, node_name in board.extra_devfreq:
        if node_name:
            node = f"/sys/firmware/devicetree/base/{node_name}@{name.split('.')[0]}"
            tree.file(f"{node}/name", node_name + "\0")
            tree.link(f"{dev}/of_node", node)
        _devfreq(tree, dev, name, (115200000, 332800000, 601600000), ("userspace",
                 "performance", "simple_ondemand"), "simple_ondemand")


def _devfreq(tree: _Tree, device: str, name: str, freqs, governors, governor: str) -> None:
    node = f"{device}/devfreq/{name}"
    files: Dict[str, object] = {
        "available_frequencies": " ".join(map(str, freqs)),
        "available_governors": " ".join(governors),
        "governor": governor if governor in governors else governors[0],
        "min_freq": freqs[0],
        "max_freq": freqs[-1],
        "cur_freq": freqs[0],
        "target_freq": freqs[0],
        "polling_interval": 0,
    }
    for key, value in files.items():
        tree.value(f"{node}/{key}", value)
    tree.link(f"{node}/device", device)
    tree.link(f"/sys/class/devfreq/{name}", node)


def _emc(tree: _Tree, board: SimBoard) -> None:
    freqs = board.emc_freqs_hz
    if board.emc_kind == "debugfs-clock":
        tree.value("/sys/kernel/debug/clock/override.emc/rate", 0)
        tree.value("/sys/kernel/debug/clock/override.emc/state", 0)
        tree.value("/sys/kernel/debug/clock/override.emc/max", freqs[-1])
        tree.value("/sys/kernel/debug/clock/override.emc/min", freqs[0])
        tree.value("/sys/kernel/debug/clock/emc/max", freqs[-1])
        tree.value("/sys/kernel/debug/clock/emc/rate", freqs[-1])
        tree.value("/sys/kernel/debug/clock/emc/possible_rates",
                   " ".join(str(f // 1000) for f in freqs))
    elif board.emc_kind == "debugfs-clk":
        tree.value("/sys/kernel/debug/clk/override.emc/clk_update_rate", 0)
        tree.value("/sys/kernel/debug/clk/override.emc/clk_state", 0)
        tree.value("/sys/kernel/debug/clk/emc/clk_rate", freqs[-1])
        # The override clock's running rate (the simulated kernel keeps it with emc/clk_rate).
        tree.value("/sys/kernel/debug/clk/override.emc/clk_rate", freqs[-1])
        tree.value("/sys/kernel/debug/tegra_bwmgr/emc_max_rate", freqs[-1])
        tree.value("/sys/kernel/debug/tegra_bwmgr/emc_min_rate", freqs[0])
    elif board.emc_kind == "devfreq":
        _devfreq(tree, EMC_DEVFREQ_DEVICE, "bwmgr", freqs, ("performance", "userspace",
                 "simple_ondemand"), "simple_ondemand")
    else:
        bpmp = "/sys/kernel/debug/bpmp/debug/clk/emc"
        tree.value(f"{bpmp}/rate", freqs[-1])
        tree.value(f"{bpmp}/max_rate", freqs[-1])
        tree.value(f"{bpmp}/min_rate", freqs[0])
        tree.value(f"{bpmp}/mrq_rate_locked", 0)
        if r36_or_newer(board):  # the R36 lock recipe's other files (docs/hardware.md, "EMC")
            tree.value(f"{bpmp}/state", 0)
            tree.value("/sys/kernel/debug/bpmp/debug/bwmgr/bwmgr_halt", 0)
    if board.emc_iso_cap_hz is not None:  # nvpmodel's EMC cap, where this release keeps it
        tree.value(emc_cap_file(board), board.emc_iso_cap_hz)


def _fan(tree: _Tree, board: SimBoard) -> None:
    if board.fan_kind == "pwm-fan":
        tree.value("/sys/devices/pwm-fan/target_pwm", 0)
        tree.value("/sys/devices/pwm-fan/temp_control", 1)
        tree.value("/sys/devices/pwm-fan/cur_pwm", 0)
    elif board.fan_kind == "tegra_fan":
        tree.value("/sys/kernel/debug/tegra_fan/target_pwm", 0)
    else:
        hwmon = "/sys/devices/platform/pwm-fan/hwmon/hwmon0"
        tree.value(f"{hwmon}/pwm1", 0)
        tree.value(f"{hwmon}/name", "pwmfan")


def _thermal(tree: _Tree, board: SimBoard) -> None:
    for k, (name, temp) in enumerate(board.thermal):
        zone = f"/sys/devices/virtual/thermal/thermal_zone{k}"
        tree.value(f"{zone}/type", name)
        tree.value(f"{zone}/temp", temp)
        tree.value(f"{zone}/trip_point_0_temp", 97000)
        tree.value(f"{zone}/trip_point_0_type", "critical")
        tree.link(f"/sys/class/thermal/thermal_zone{k}", zone)


def _inas(tree: _Tree, board: SimBoard) -> None:
    idle = idle_rails_mw(board)
    for ina in board.inas:
        tree.value(f"{ina.device_dir}/name", ina.driver)
        tree.link(f"/sys/bus/i2c/drivers/{ina.driver}/{ina.bus_addr}", ina.device_dir)
        tree.link(f"/sys/bus/i2c/devices/{ina.bus_addr}", ina.device_dir)
        if ina.driver == "ina3221x":
            _iio(tree, ina, idle)
        elif ina.driver == "ina238":
            _ina238(tree, ina, idle)
        else:
            _hwmon(tree, ina, idle)


def _ina238(tree: _Tree, ina: SimIna, idle: Dict[str, float]) -> None:
    """Mainline hwmon ina238: no labels; in0 shunt mV, in1 bus mV, curr1 mA, power1 uW."""
    d = f"{ina.device_dir}/hwmon/hwmon{ina.index}"
    label = ina.labels[0]
    mw = idle.get(label, 0.0)
    mv = rail_mv(label)
    tree.value(f"{d}/name", "ina238")
    tree.value(f"{d}/in0_input", int(round(mw / mv * 2)))  # shunt mV across 2 mOhm
    tree.value(f"{d}/in1_input", mv)
    tree.value(f"{d}/curr1_input", int(round(mw * 1000 / mv)))
    tree.value(f"{d}/power1_input", int(round(mw * 1000)))
    tree.value(f"{d}/power1_max", 300_000_000)  # a limit, not a reading
    tree.value(f"{d}/temp1_input", 38000)


def _iio(tree: _Tree, ina: SimIna, idle: Dict[str, float]) -> None:
    d = f"{ina.device_dir}/iio:device{ina.index}"
    tree.value(f"{d}/name", "ina3221x")
    for ch, label in enumerate(ina.labels):
        mw = idle.get(label, 0.0)
        mv = rail_mv(label)
        tree.value(f"{d}/rail_name_{ch}", label)
        tree.value(f"{d}/in_voltage{ch}_input", mv)
        tree.value(f"{d}/in_current{ch}_input", int(round(mw * 1000 / mv)))
        tree.value(f"{d}/in_power{ch}_input", int(round(mw)))
        tree.value(f"{d}/warn_current_limit_{ch}", 3000)
        tree.value(f"{d}/crit_current_limit_{ch}", 4000)


def _hwmon(tree: _Tree, ina: SimIna, idle: Dict[str, float]) -> None:
    d = f"{ina.device_dir}/hwmon/hwmon{ina.index}"
    tree.value(f"{d}/name", "ina3221")
    tree.value(f"{d}/update_interval", 1)
    tree.value(f"{d}/samples", 4)
    for ch, label in enumerate(ina.labels, start=1):
        tree.value(f"{d}/in{ch}_label", label)
        if label == "NC":
            tree.value(f"{d}/in{ch}_input", 0)
            tree.value(f"{d}/curr{ch}_input", 0)
            continue
        mw = idle.get(label, 0.0)
        mv = rail_mv(label)
        tree.value(f"{d}/in{ch}_input", mv)
        tree.value(f"{d}/curr{ch}_input", int(round(mw * 1000 / mv)))
        tree.value(f"{d}/shunt{ch}_resistor", 5000 if ch != 2 else 10000)
        tree.value(f"{d}/curr{ch}_max", 6480)
        tree.value(f"{d}/curr{ch}_crit", 8000)
        tree.value(f"{d}/in{ch + 3}_input", int(round(mw * 1000 / mv * 5)))  # shunt uV
    tree.value(f"{d}/in7_input", 0)
    tree.value(f"{d}/in7_label", "sum of shunt voltages")
