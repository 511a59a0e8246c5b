"""A simulated board's kernel, attribute by attribute: what each sysfs/debugfs file shows and
how its store function answers a write, as the drivers do (served by `sim/fuse_board.py`).

Unlike the file-based simulator (`sim/file_kernel.py`, which undoes refused values later from a
thread), every write here is judged *synchronously*, the moment it is made, and a refused write
fails with the errno the driver returns. Reads are computed when they are made. The rules that
decide what runs (`cpufreq_relation_l`, `devfreq_running`, `override_running`,
`highest_at_or_below`, `ina3221_period_s`) are the file-based kernel's too: one copy.

Semantics, per driver (L4T R32's 4.9 kernels unless said):
- cpufreq `scaling_min_freq`/`scaling_max_freq`: an unsigned integer (else EINVAL); a min above
  the current max or a max below the current min is refused (EINVAL); an accepted value is
  clamped to `cpuinfo_min_freq` .. `cpuinfo_max_freq` (the policy keeps off-table values).
  `scaling_governor`: one of `scaling_available_governors` (else EINVAL). `scaling_setspeed`:
  writable only under `userspace` (EINVAL otherwise), shows `<unsupported>` under any other
  governor and the current frequency under `userspace`. `scaling_cur_freq`: performance runs at
  max, powersave at min, userspace at the set speed, dynamic governors between min and max by
  load; always a table entry (RELATION_L: the lowest at or above the target within min/max;
  with no entry inside min/max, the highest not above max).
- devfreq `min_freq`/`max_freq`: an integer; min above max, or max below min, is EINVAL; kept
  as written (a cap between two OPPs reads back as written);
  `governor` one of `available_governors`; `cur_freq`/`target_freq` the highest table entry at
  or below the governor's target (performance/userspace: max; others: min, the GPU idle).
- tegra210 debugfs clock overrides (`override.gbus`, `override.emc`): `rate` an integer from 0
  to the clock's maximum (EINVAL above it), kept as written; `state` 0 or 1; the clock runs at
  the highest table rate at or below the override rate while `state` is 1.
- BPMP EMC (`bpmp/debug/clk/emc/rate`): an integer within `min_rate` .. `max_rate` (EINVAL
  outside), rounded down to a rate of the table; `mrq_rate_locked` 0 or 1.
- Fans: `target_pwm`/`pwm1` 0..255 (EINVAL otherwise), `temp_control` 0 or 1; `cur_pwm`
  follows target_pwm under manual control (temp_control 0), else the thermal curve (0 here).
- CPU `online`: 0 or 1; taking the last online CPU down is EBUSY. `cpuidle/*/disable`,
  `railgate_enable`, cpuquiet's `enable`: integers.
- INA3221 readings come from the power model (`power_model.py`), unpadded, recomputed once per
  `update_interval` (hwmon, ms: one conversion cycle) x `samples` (the averaging) and kept in
  between, as the chip's conversion registers are.
- Files without a store function (everything else under /sys) refuse opening for writing with
  EACCES, as sysfs does for read-only attributes, even for root.

The real-kernel quirks of `sim/quirks.py` are applied here when the board lists them.
"""

from __future__ import annotations

import errno
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import quirks as q
from .boards import EMC_DEVFREQ_DEVICE, SimBoard, emc_cap_file, r36_or_newer
from .power_model import (
    ClockState,
    component_powers_w,
    module_budget_w,
    rail_mv,
    rail_powers_w,
)

EXTRA_DEVFREQ_HZ = (115200000, 332800000, 601600000)  # the table sim/create.py gives them
IIO_UPDATE_S = 0.001  # the old ina3221x driver has no update_interval file
ACTIVITY_TAU_S = 0.03
PWM_MAX = 255


class Refused(OSError):
    """A store function's answer: the write fails with this errno."""

    def __init__(self, code: int):
        super().__init__(code, os.strerror(code))


def parse_uint(text: str) -> int:
    """What `sscanf(buf, "%u")`/`kstrtoul` accept: a decimal number, surrounding blanks."""
    word = text.strip()
    if not word.isdigit():
        raise Refused(errno.EINVAL)
    return int(word)


def parse_bool(text: str) -> int:
    value = parse_uint(text)
    if value not in (0, 1):
        raise Refused(errno.EINVAL)
    return value


@dataclass
class Attribute:
    show: Callable[[], str]
    store: Optional[Callable[[str], None]] = None

    @property
    def writable(self) -> bool:
        return self.store is not None


@dataclass
class Value:
    """A plain value attribute with a validating store."""

    text: str
    check: Callable[[str], str] = field(default=lambda t: str(parse_uint(t)))

    def attribute(self) -> Attribute:
        return Attribute(lambda: self.text, self._store)

    def _store(self, data: str) -> None:
        self.text = self.check(data)


def round_emc(rate_hz: int) -> int:
    """round-emc: the nearest rate the memory controller can run (a multiple of the step)."""
    return max(1, round(rate_hz / q.EMC_ROUND_STEP_HZ)) * q.EMC_ROUND_STEP_HZ


def highest_at_or_below(table: Sequence[int], target: float) -> int:
    below = [f for f in table if f <= target]
    return max(below) if below else min(table)


def cpufreq_relation_l(table: Sequence[int], lo: int, hi: int, want: float) -> int:
    """cpufreq's target with CPUFREQ_RELATION_L inside the policy's limits: the lowest entry
    at or above `want` among those in lo..hi; with none above it, the highest inside; with
    none inside (min = max = a cap that is no entry), the highest entry not above max."""
    want = min(max(want, lo), hi)
    inside = [f for f in table if lo <= f <= hi] or [highest_at_or_below(table, hi)]
    above = [f for f in inside if f >= want]
    return min(above) if above else max(inside)


def devfreq_running(table: Sequence[int], lo: int, hi: int, governor: str) -> int:
    """A devfreq node's clock: the governor's target (performance/userspace: max; the others
    idle at min) clamped to min..max, at the highest OPP not above it (max wins over min)."""
    target = hi if governor in ("performance", "userspace") else lo
    return highest_at_or_below(table, min(max(target, lo), hi))


def override_running(table: Sequence[int], rate: int, on: bool, idle: int) -> int:
    """A tegra210 debugfs override: on, the highest table rate not above its rate."""
    return highest_at_or_below(table, rate) if on and rate > 0 else idle


# -- activity: the machine's CPU load, or a fixed value ---------------------------------------
class HostLoad:
    """The host's CPU utilisation (all cores, from /proc/stat), smoothed like the sensor's
    averaging would, or a fixed fraction when one is given."""

    def __init__(self, fixed: Optional[float] = None, stat: str = "/proc/stat"):
        self.fixed = fixed
        self.stat = stat
        self.cores = os.cpu_count() or 1
        self._mark = (time.monotonic(), *self._ticks())
        self._value = 0.0

    def _ticks(self) -> Tuple[int, int]:
        try:
            with open(self.stat) as f:
                words = f.readline().split()[1:]
        except OSError:
            return 0, 0
        ticks = [int(w) for w in words]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
        return sum(ticks) - idle, sum(ticks)

    def __call__(self) -> float:
        if self.fixed is not None:
            return self.fixed
        now = time.monotonic()
        busy, total = self._ticks()
        then, busy0, total0 = self._mark
        if total - total0 <= 0:
            return self._value
        raw = (busy - busy0) / (total - total0)
        self._value += (raw - self._value) * (1.0 - math.exp(-(now - then) / ACTIVITY_TAU_S))
        self._mark = (now, busy, total)
        return self._value


# -- the clock domains --------------------------------------------------------------------------
@dataclass
class CpuPolicy:
    table_khz: Tuple[int, ...]
    governors: Tuple[str, ...]
    governor: str
    min_khz: int
    max_khz: int
    idle_khz: int
    speed_khz: int = 0  # userspace's set speed

    def store_governor(self, data: str) -> None:
        name = data.strip()
        if name not in self.governors:
            raise Refused(errno.EINVAL)
        if name == "userspace" and self.governor != "userspace":
            self.speed_khz = self.target_khz(0.0)  # userspace starts where the clock was
        self.governor = name

    def _clamp(self, value: int) -> int:
        return min(max(value, self.table_khz[0]), self.table_khz[-1])

    def store_min(self, data: str) -> None:
        value = parse_uint(data)
        if value > self.max_khz:
            raise Refused(errno.EINVAL)
        self.min_khz = self._clamp(value)

    def store_max(self, data: str) -> None:
        value = parse_uint(data)
        if value < self.min_khz:
            raise Refused(errno.EINVAL)
        self.max_khz = self._clamp(value)

    def store_setspeed(self, data: str) -> None:
        if self.governor != "userspace":
            raise Refused(errno.EINVAL)
        self.speed_khz = parse_uint(data)

    def show_setspeed(self, load: float) -> str:
        return str(self.target_khz(load)) if self.governor == "userspace" else "<unsupported>"

    def target_khz(self, load: float) -> int:
        lo, hi = self.min_khz, self.max_khz
        if self.governor == "performance":
            want = hi
        elif self.governor == "powersave":
            want = lo
        elif self.governor == "userspace":
            want = self.speed_khz or lo
        else:
            want = max(lo, self.idle_khz) + (hi - max(lo, self.idle_khz)) * load
        return cpufreq_relation_l(self.table_khz, lo, hi, want)


@dataclass
class Devfreq:
    table_hz: Tuple[int, ...]
    governors: Tuple[str, ...]
    governor: str
    min_hz: int
    max_hz: int

    def store_min(self, data: str) -> None:
        value = parse_uint(data)
        if value > self.max_hz:
            raise Refused(errno.EINVAL)
        self.min_hz = value

    def store_max(self, data: str) -> None:
        value = parse_uint(data)
        if value < self.min_hz:
            raise Refused(errno.EINVAL)
        self.max_hz = value

    def store_governor(self, data: str) -> None:
        name = data.strip()
        if name not in self.governors:
            raise Refused(errno.EINVAL)
        self.governor = name

    def running_hz(self) -> int:
        return devfreq_running(self.table_hz, self.min_hz, self.max_hz, self.governor)


@dataclass
class Override:
    """A tegra210 debugfs clock override (`override.<clk>/rate` + `state`)."""

    table_hz: Tuple[int, ...]
    idle_hz: int  # the rate while the override is off
    rate_hz: int = 0
    on: int = 0
    round_step_hz: int = 0  # round-emc

    def store_rate(self, data: str) -> None:
        value = parse_uint(data)
        if value > self.table_hz[-1]:
            raise Refused(errno.EINVAL)
        self.rate_hz = value  # the knob keeps what was written

    def store_state(self, data: str) -> None:
        self.on = parse_bool(data)

    def running_hz(self) -> int:
        if self.on and self.rate_hz > 0 and self.round_step_hz:
            return round_emc(self.rate_hz)  # round-emc: the controller runs the nearest step
        return override_running(self.table_hz, self.rate_hz, bool(self.on), self.idle_hz)


@dataclass
class BpmpEmc:
    table_hz: Tuple[int, ...]
    rate_hz: int
    locked: int = 0
    round_step_hz: int = 0  # round-emc
    # The caps the BPMP applies to a rate (the power mode's cap files, emc-boot-cap): the rate
    # asked above them runs the highest rate under them, without an error.
    caps_hz: Callable[[], Sequence[int]] = lambda: ()

    def store_rate(self, data: str) -> None:
        value = parse_uint(data)
        if not self.table_hz[0] <= value <= self.table_hz[-1]:
            raise Refused(errno.EINVAL)
        if self.round_step_hz:  # round-emc: accepted, and the file shows what was kept
            self.rate_hz = round_emc(value)
        else:
            self.rate_hz = highest_at_or_below(self.table_hz, value)

    def running_hz(self) -> int:
        """The rate the `rate` file shows (clk_get_rate): the kept rate under every cap."""
        caps = [c for c in self.caps_hz() if c > 0]
        if not caps or self.rate_hz <= min(caps):
            return self.rate_hz
        return highest_at_or_below(self.table_hz, min(caps))

    def store_locked(self, data: str) -> None:
        self.locked = parse_bool(data)


def _pwm(data: str) -> str:
    value = parse_uint(data)
    if value > PWM_MAX:
        raise Refused(errno.EINVAL)
    return str(value)


def _per_mille(text: str) -> str:
    value = parse_uint(text)
    if value > 1000:
        raise Refused(errno.EINVAL)
    return str(value)


def _uint_text(data: str) -> str:
    return str(parse_uint(data))


def _bool_text(data: str) -> str:
    return str(parse_bool(data))


def _runtime_pm(data: str) -> str:
    """A device's power/control: `auto` or `on`, anything else EINVAL (drivers/base/power)."""
    text = data.strip()
    if text not in ("auto", "on"):
        raise Refused(errno.EINVAL)
    return text


class KernelModel:
    """Every attribute of one simulated board, keyed by board path ('/sys/...').

    `initial` reads the starting values from a tree written by `sim/create.py` (one description
    per board); `quirks` are names from `sim/quirks.py`."""

    def __init__(self, board: SimBoard, initial: Callable[[str], str],
                 quirks: Sequence[str] = (), load: Optional[HostLoad] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.board = board
        self.quirks = q.check(quirks)
        self.load = load or HostLoad()
        self.clock = clock
        self.started = clock()
        self.attrs: Dict[str, Attribute] = {}
        self._initial = initial
        self.policies: List[CpuPolicy] = []
        self.gpu: Optional[Devfreq] = None
        self.gbus: Optional[Override] = None
        self.devfreqs: Dict[str, Devfreq] = {}
        self.online: Dict[int, Value] = {}
        self._ina_cache: Dict[str, Tuple[int, Dict[str, float]]] = {}
        self._refloor: Optional[Tuple[float, int]] = None  # emc-refloor: (share, rate)
        self._cpu()
        self._gpu()
        self._emc()
        self._fan()
        self._simple()
        self._inas()

    # -- helpers ---------------------------------------------------------------------------------
    def _int(self, path: str) -> int:
        return int(self._initial(path).split()[0])

    def has(self, quirk: str) -> bool:
        return quirk in self.quirks

    def hidden(self, path: str) -> bool:
        """late-gpu: the GPU devfreq node is absent for LATE_GPU_S after the board starts."""
        if not self.has("late-gpu") or self.board.gpu_kind != "devfreq":
            return False
        if self.clock() - self.started >= q.LATE_GPU_S:
            return False
        name = self.board.gpu_devfreq_name
        node = f"{self.board.gpu_device}/devfreq"
        return path == node or path.startswith(node + "/") or path == f"/sys/class/devfreq/{name}"

    # -- CPU ---------------------------------------------------------------------------------------
    def policy_dir(self, cpus: Sequence[int]) -> str:
        owner = min(cpus)
        base = "/sys/devices/system/cpu"
        return f"{base}/cpufreq/policy{owner}" if self.board.policy_dirs else \
            f"{base}/cpu{owner}/cpufreq"

    def _cpu(self) -> None:
        for cluster in self.board.clusters:
            d = self.policy_dir(cluster.cpus)
            policy = CpuPolicy(
                table_khz=tuple(cluster.freqs_khz),
                governors=tuple(self.board.cpu_governors),
                governor=self._initial(f"{d}/scaling_governor").strip(),
                min_khz=self._int(f"{d}/scaling_min_freq"),
                max_khz=self._int(f"{d}/scaling_max_freq"),
                idle_khz=self.board.cpu_idle_khz or cluster.freqs_khz[0],
            )
            self.policies.append(policy)
            p = policy
            self.attrs.update({
                f"{d}/scaling_governor": Attribute(lambda p=p: p.governor, p.store_governor),
                f"{d}/scaling_min_freq": Attribute(lambda p=p: str(p.min_khz), p.store_min),
                f"{d}/scaling_max_freq": Attribute(lambda p=p: str(p.max_khz), p.store_max),
                f"{d}/scaling_setspeed": Attribute(lambda p=p: p.show_setspeed(self.load()),
                                                   p.store_setspeed),
                f"{d}/scaling_cur_freq": Attribute(lambda p=p: str(self.cpu_cur_khz(p))),
                f"{d}/cpuinfo_cur_freq": Attribute(lambda p=p: str(self.cpu_cur_khz(p))),
            })
        cpus = sorted(c for cl in self.board.clusters for c in cl.cpus)
        for cpu in cpus[1:]:  # online as the tree has it (a power mode takes cores offline)
            value = Value(self._initial(f"/sys/devices/system/cpu/cpu{cpu}/online").strip(),
                          _bool_text)
            self.online[cpu] = value
            self.attrs[f"/sys/devices/system/cpu/cpu{cpu}/online"] = Attribute(
                lambda v=value: v.text, lambda data, cpu=cpu: self._store_online(cpu, data))

    def _store_online(self, cpu: int, data: str) -> None:
        value = parse_bool(data)
        online_now = 1 + sum(v.text == "1" for v in self.online.values())  # cpu0 always
        if value == 0 and self.online[cpu].text == "1" and online_now <= 1:
            raise Refused(errno.EBUSY)
        self.online[cpu].text = str(value)

    def cluster_online(self, cpus: Sequence[int]) -> bool:
        """Whether any of a cluster's cores is online (cpu0 has no `online` file: always)."""
        return any(c not in self.online or self.online[c].text == "1" for c in cpus)

    def cpu_cur_khz(self, policy: CpuPolicy) -> int:
        load = self.load()
        cur = policy.target_khz(load)
        if self.has("amu-cpu"):
            # Busy while the board's user runs AMU_BUSY_CORE_SHARE of a core (here: the
            # machine's load, in cores; the server cannot tell its client's share apart).
            busy = load * self.load.cores >= q.AMU_BUSY_CORE_SHARE
            return int(cur * (1.0 - q.AMU_BUSY_ERROR) if busy else cur * q.AMU_IDLE_FRACTION)
        return cur

    # -- GPU ---------------------------------------------------------------------------------------
    def _gpu(self) -> None:
        board = self.board
        if board.gpu_kind == "debugfs":
            clock = "/sys/kernel/debug/clock"
            self.gbus = g = Override(tuple(board.gpu_freqs_hz), board.gpu_freqs_hz[0],
                                     self._int(f"{clock}/override.gbus/rate"),
                                     self._int(f"{clock}/override.gbus/state"))
            static = self._int(f"{clock}/gbus/rate")
            self.attrs.update({
                f"{clock}/override.gbus/rate": Attribute(lambda: str(g.rate_hz), g.store_rate),
                f"{clock}/override.gbus/state": Attribute(lambda: str(g.on), g.store_state),
                f"{clock}/gbus/rate": Attribute(lambda: str(
                    static if self.has("static-cur") else self._capped(g.running_hz()))),
            })
        else:
            nodes = [(board.gpu_device, board.gpu_devfreq_name, board.gpu_freqs_hz)]
            nodes += [(dev, name, EXTRA_DEVFREQ_HZ) for dev, name, _n in board.extra_devfreq]
            if board.emc_kind == "devfreq":  # tegra264's EMC: the bwmgr devfreq node
                nodes.append((EMC_DEVFREQ_DEVICE, "bwmgr", board.emc_freqs_hz))
            for device, name, table in nodes:
                d = f"{device}/devfreq/{name}"
                node = Devfreq(tuple(table), tuple(self._initial(
                    f"{d}/available_governors").split()), self._initial(f"{d}/governor").strip(),
                    self._int(f"{d}/min_freq"), self._int(f"{d}/max_freq"))
                self.devfreqs[name] = node
                is_gpu = name == board.gpu_devfreq_name
                if is_gpu:
                    self.gpu = node
                static = self._int(f"{d}/cur_freq")

                def cur(n: Devfreq = node, s: int = static, g: bool = is_gpu) -> str:
                    return str(self.devfreq_cur_hz(n, s, g))
                self.attrs.update({
                    f"{d}/governor": Attribute(lambda n=node: n.governor, node.store_governor),
                    f"{d}/min_freq": Attribute(lambda n=node: str(n.min_hz), node.store_min),
                    f"{d}/max_freq": Attribute(lambda n=node: str(n.max_hz), node.store_max),
                    f"{d}/cur_freq": Attribute(cur),
                    f"{d}/target_freq": Attribute(cur),
                })
        if board.gpu_pci_bdf:  # a PCI GPU (Thor): runtime PM's power/control, no railgate_enable
            self.attrs[f"{board.gpu_device}/power/control"] = Value(
                self._initial(f"{board.gpu_device}/power/control").strip(),
                _runtime_pm).attribute()
        else:
            self.attrs[f"{board.gpu_device}/railgate_enable"] = Value(
                self._initial(f"{board.gpu_device}/railgate_enable").strip(),
                _bool_text).attribute()

    def qos_cap_hz(self) -> int:
        table = self.board.gpu_freqs_hz
        return highest_at_or_below(table, table[-1] * q.QOS_CAP_FRACTION)

    def devfreq_cur_hz(self, node: Devfreq, static_hz: int, is_gpu: bool) -> int:
        if is_gpu and self.has("static-cur"):
            return static_hz
        cur = node.running_hz()
        if node is self.devfreqs.get("bwmgr") and self.board.emc_kind == "devfreq":
            return self.refloored(cur)
        return self._capped(cur) if is_gpu else cur

    def _capped(self, gpu_hz: int) -> int:
        """qos-cap: the running GPU clock held at or below the cap; the knobs untouched."""
        return min(gpu_hz, self.qos_cap_hz()) if self.has("qos-cap") else gpu_hz

    def gpu_hz(self) -> float:
        if self.gbus is not None:
            return float(self._capped(self.gbus.running_hz()))
        assert self.gpu is not None
        return float(self.devfreq_cur_hz(self.gpu, self.board.gpu_freqs_hz[0], True))

    # -- EMC ---------------------------------------------------------------------------------------
    def _emc(self) -> None:
        board = self.board
        table = tuple(board.emc_freqs_hz)
        step = q.EMC_ROUND_STEP_HZ if self.has("round-emc") else 0
        cap_file = emc_cap_file(board)
        cap = None
        if board.emc_iso_cap_hz is not None:  # nvpmodel's cap file: what the mode (or a lift) keeps
            cap = Value(self._initial(cap_file).strip(), _uint_text)
            self.attrs[cap_file] = cap.attribute()
        if board.emc_kind == "bpmp":
            d = "/sys/kernel/debug/bpmp/debug/clk/emc"
            boot_cap = table[-2] if self.has("emc-boot-cap") and len(table) > 1 else 0
            self.bpmp = b = BpmpEmc(table, self._int(f"{d}/rate"),
                                    self._int(f"{d}/mrq_rate_locked"), step,
                                    lambda: ([int(cap.text)] if cap else []) + [boot_cap])
            self.emc_override: Optional[Override] = None
            self.attrs.update({
                f"{d}/rate": Attribute(lambda: str(b.running_hz()), b.store_rate),
                f"{d}/mrq_rate_locked": Attribute(lambda: str(b.locked), b.store_locked),
            })
            if r36_or_newer(board):  # the R36 lock recipe's other files
                for path in (f"{d}/state", "/sys/kernel/debug/bpmp/debug/bwmgr/bwmgr_halt"):
                    self.attrs[path] = Value(self._initial(path).strip(), _bool_text).attribute()
            return
        self.bpmp = None  # type: ignore[assignment]
        self.emc_override = None
        if board.emc_kind == "devfreq":  # a devfreq node, set up with the GPU's (_gpu)
            return
        if board.emc_kind == "debugfs-clk":
            over, cur, rate, state = ("/sys/kernel/debug/clk/override.emc",
                                      "/sys/kernel/debug/clk/emc/clk_rate", "clk_update_rate",
                                      "clk_state")
        else:
            over, cur, rate, state = ("/sys/kernel/debug/clock/override.emc",
                                      "/sys/kernel/debug/clock/emc/rate", "rate", "state")
        self.emc_override = o = Override(table, table[-1], self._int(f"{over}/{rate}"),
                                         self._int(f"{over}/{state}"), step)
        self.attrs.update({
            f"{over}/{rate}": Attribute(lambda: str(o.rate_hz), o.store_rate),
            f"{over}/{state}": Attribute(lambda: str(o.on), o.store_state),
            cur: Attribute(lambda: str(o.running_hz())),
        })
        if board.emc_kind == "debugfs-clk":  # the override clock runs at the EMC's rate
            self.attrs[f"{over}/clk_rate"] = Attribute(lambda: str(o.running_hz()))

    def emc_hz(self) -> float:
        if self.bpmp is not None:
            return float(self.bpmp.running_hz())
        if self.emc_override is None:  # devfreq (bwmgr)
            return float(self.refloored(self.devfreqs["bwmgr"].running_hz()))
        return float(self.emc_override.running_hz())

    def refloored(self, emc_hz: int) -> int:
        """emc-refloor: for a share of each period the firmware runs the EMC at a higher floor
        than its pin (the knobs untouched)."""
        if not self.has("emc-refloor"):
            return emc_hz
        if self._refloor is None:
            share, hz = q.EMC_REFLOOR_SHARE, self.board.emc_freqs_hz[-1]
            try:
                words = self._initial(q.EMC_REFLOOR_FILE).split()
            except OSError:
                words = []
            if words:
                share = float(words[0])
                hz = int(words[1]) if len(words) > 1 else hz
            self._refloor = (share, hz)
        share, hz = self._refloor
        phase = ((self.clock() - self.started) % q.EMC_REFLOOR_PERIOD_S) / q.EMC_REFLOOR_PERIOD_S
        return max(emc_hz, hz) if phase < share else emc_hz

    # -- fan and the plain knobs ---------------------------------------------------------------
    def _fan(self) -> None:
        kind = self.board.fan_kind
        if kind == "pwm-fan":
            d = "/sys/devices/pwm-fan"
            target = Value(self._initial(f"{d}/target_pwm").strip(), _pwm)
            manual = Value(self._initial(f"{d}/temp_control").strip(), _bool_text)
            self.attrs.update({
                f"{d}/target_pwm": target.attribute(),
                f"{d}/temp_control": manual.attribute(),
                f"{d}/cur_pwm": Attribute(
                    lambda: target.text if manual.text == "0" else "0"),
            })
        elif kind == "tegra_fan":
            path = "/sys/kernel/debug/tegra_fan/target_pwm"
            self.attrs[path] = Value(self._initial(path).strip(), _pwm).attribute()
        else:
            path = "/sys/devices/platform/pwm-fan/hwmon/hwmon0/pwm1"
            self.attrs[path] = Value(self._initial(path).strip(), _pwm).attribute()

    def _simple(self) -> None:
        base = "/sys/devices/system/cpu"
        cpus = sorted(c for cl in self.board.clusters for c in cl.cpus)
        for cpu in cpus:
            for k in range(len(self.board.idle_states)):
                path = f"{base}/cpu{cpu}/cpuidle/state{k}/disable"
                self.attrs[path] = Value(self._initial(path).strip()).attribute()
        # The GPU's utilisation (0..1000): a simulated workload (sim:NAME) writes its busy
        # share there (sim/gpu_load.py), and the power model reads it back.
        self.gpu_load: Optional[Value] = None
        if not self.board.gpu_pci_bdf:
            path = f"{self.board.gpu_device}/load"
            self.gpu_load = Value(self._initial(path).strip() or "0", _per_mille)
            self.attrs[path] = self.gpu_load.attribute()
        if self.board.cpuquiet:
            for path, check in ((f"{base}/cpuquiet/tegra_cpuquiet/enable", _bool_text),
                                ("/sys/kernel/cluster/immediate", _bool_text),
                                ("/sys/kernel/cluster/force", _bool_text),
                                ("/sys/kernel/cluster/active", _cluster)):
                self.attrs[path] = Value(self._initial(path).strip(), check).attribute()

    # -- power rails --------------------------------------------------------------------------
    def rails_w(self) -> Dict[str, float]:
        board = self.board
        cpu_khz = [self.cpu_cur_khz(p) if not self.has("amu-cpu") else p.target_khz(self.load())
                   for p, cluster in zip(self.policies, board.clusters)
                   if self.cluster_online(cluster.cpus)] or [0]  # an offline cluster draws none
        online = (1 + sum(v.text == "1" for v in self.online.values())) / (1 + len(self.online))
        clocks = ClockState(
            gpu_hz=self.gpu_hz(),
            gpu_table_hz=board.gpu_freqs_hz,
            cpu_hz=sum(cpu_khz) * 1000.0 / len(cpu_khz),
            cpu_table_hz=[f * 1000 for f in board.clusters[0].freqs_khz],
            cpu_online_fraction=online,
            emc_hz=self.emc_hz(),
            emc_max_hz=board.emc_freqs_hz[-1],
        )
        gpu_load = int(self.gpu_load.text) / 1000 if self.gpu_load is not None else None
        components = component_powers_w(board.soc, clocks, self.load(), gpu_load,
                                        module_budget_w(board.power_modes))
        labels = [lb for ina in board.inas for lb in ina.labels if lb != "NC"]
        return rail_powers_w(labels, components)

    def _rails_now(self, key: str, period_s: float) -> Dict[str, float]:
        """The rails as converted in the current update period (kept until the next one)."""
        tick = int(self.clock() // period_s) if period_s > 0 else 0
        cached = self._ina_cache.get(key)
        if cached is None or cached[0] != tick:
            cached = (tick, self.rails_w())
            self._ina_cache[key] = cached
        return cached[1]

    def _inas(self) -> None:
        for ina in self.board.inas:
            if ina.driver == "ina3221x":
                self._iio(ina.device_dir, ina.index, ina.labels)
            elif ina.driver == "ina238":
                self._ina238(ina.device_dir, ina.index, ina.labels[0])
            else:
                self._hwmon(ina.device_dir, ina.index, ina.labels)

    def _iio(self, device_dir: str, index: int, labels: Sequence[str]) -> None:
        d = f"{device_dir}/iio:device{index}"
        for ch, label in enumerate(labels):
            def mw(label=label) -> float:
                return self._rails_now(d, IIO_UPDATE_S).get(label, 0.0) * 1000.0
            mv = rail_mv(label)
            self.attrs.update({
                f"{d}/in_power{ch}_input": Attribute(lambda mw=mw: str(int(round(mw())))),
                f"{d}/in_current{ch}_input": Attribute(
                    lambda mw=mw, mv=mv: str(int(round(mw() * 1000.0 / mv)))),
                f"{d}/in_voltage{ch}_input": Attribute(lambda mv=mv: str(mv)),
            })

    def _ina238(self, device_dir: str, index: int, label: str) -> None:
        """Mainline hwmon ina238 (Thor's carrier): no labels, no update_interval; power1 in
        microwatts, curr1 mA, in1 bus mV, in0 shunt mV (across 2 mOhm, as sim/create.py)."""
        d = f"{device_dir}/hwmon/hwmon{index}"
        mv = rail_mv(label)

        def mw() -> float:
            return self._rails_now(d, IIO_UPDATE_S).get(label, 0.0) * 1000.0
        self.attrs.update({
            f"{d}/power1_input": Attribute(lambda: str(int(round(mw() * 1000)))),
            f"{d}/curr1_input": Attribute(lambda: str(int(round(mw() * 1000 / mv)))),
            f"{d}/in1_input": Attribute(lambda: str(mv)),
            f"{d}/in0_input": Attribute(lambda: str(int(round(mw() / mv * 2)))),
        })

    def _hwmon(self, device_dir: str, index: int, labels: Sequence[str]) -> None:
        d = f"{device_dir}/hwmon/hwmon{index}"
        interval = Value(self._initial(f"{d}/update_interval").strip(), _positive)
        self.attrs[f"{d}/update_interval"] = interval.attribute()
        samples = Value(self._initial(f"{d}/samples").strip(), _samples)
        self.attrs[f"{d}/samples"] = samples.attribute()

        def ma(label: str) -> int:
            # The chip refreshes a reading once per conversion cycle x averaging count.
            period_s = ina3221_period_s(int(interval.text), int(samples.text))
            watts = self._rails_now(d, period_s).get(label, 0.0)
            return int(round(watts * 1e6 / rail_mv(label)))

        shunts: List[Tuple[str, int]] = []
        for ch, label in enumerate(labels, start=1):
            if label == "NC":
                continue
            resistor_uohm = self._int(f"{d}/shunt{ch}_resistor")
            shunts.append((label, resistor_uohm))
            self.attrs.update({
                f"{d}/in{ch}_input": Attribute(lambda label=label: str(rail_mv(label))),
                f"{d}/curr{ch}_input": Attribute(lambda label=label: str(ma(label))),
                f"{d}/in{ch + 3}_input": Attribute(
                    lambda label=label, r=resistor_uohm: str(ma(label) * r // 1000)),
            })
        self.attrs[f"{d}/in7_input"] = Attribute(
            lambda: str(sum(ma(label) * r // 1000 for label, r in shunts)))


INA3221_SAMPLES = (1, 4, 16, 64, 128, 256, 512, 1024)


def ina3221_period_s(update_interval_ms: int, samples: int) -> float:
    """How often an INA3221's readings change: its conversion cycle (hwmon update_interval,
    channels x (bus + shunt conversion time)) times its averaging count (TI SBOS576)."""
    return update_interval_ms * samples / 1000.0


def _samples(data: str) -> str:
    value = parse_uint(data)
    return str(min(INA3221_SAMPLES, key=lambda s: (abs(s - value), s)))


def _positive(data: str) -> str:
    value = parse_uint(data)
    if value == 0:
        raise Refused(errno.EINVAL)
    return str(value)


def _cluster(data: str) -> str:
    name = data.strip()
    if name not in ("G", "LP"):
        raise Refused(errno.EINVAL)
    return name


def read_initial(tree: Path) -> Callable[[str], str]:
    """Initial values from a tree `sim/create.py` wrote."""
    def initial(board_path: str) -> str:
        return (tree / board_path.lstrip("/")).read_text()
    return initial
