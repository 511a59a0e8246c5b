"""The simulated board's "kernel": reacts to what is written into a simulated tree.

jetbench writes a simulated tree exactly as it writes a real one (plain files under --root, no
special path in the hardware code). This module plays the kernel's part beside it:
- current-frequency files follow the governor, min/max, `scaling_setspeed` and the EMC/GPU
  overrides, as the kernel would make them;
- a write the kernel would refuse (min above max, a rate above the clock's maximum) is undone,
  the way a rejected write leaves the old value (asynchronously here: tests that need a
  synchronous refusal inject a real OS error instead);
- the INA3221 rail files are updated from the power model (`power_model.py`) driven by the clocks
  in the tree and by the real CPU load of this process;
- a board created with quirks (`sim/quirks.py`, listed in its marker) shows them: a `cur_freq`
  that never follows (static-cur), a cap below the pin without touching the knobs (qos-cap),
  CPU readings from activity counters (amu-cpu), a GPU node that appears late (late-gpu), EMC
  rates rounded by the memory controller (round-emc).

`sync()` does one pass; `start()`/`stop()` (or `with SimKernel(dir):`) run passes in a thread.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from . import gpu_load
from . import quirks as Q
from .attributes import (
    cpufreq_relation_l,
    devfreq_running,
    highest_at_or_below,
    ina3221_period_s,
    override_running,
    round_emc,
)
from .boards import EMC_DEVFREQ_DEVICE, SimBoard, get
from .power_model import (
    ClockState,
    component_powers_w,
    module_budget_w,
    rail_mv,
    rail_powers_w,
)

__all__ = ["SimKernel", "idle_rails_mw", "rail_mv"]

ACTIVITY_TAU_S = 0.03


def idle_rails_mw(board: SimBoard) -> Dict[str, float]:
    """Rail power (mW) of an idle board at its boot clocks."""
    clocks = ClockState(
        gpu_hz=board.gpu_freqs_hz[0],
        gpu_table_hz=board.gpu_freqs_hz,
        cpu_hz=board.clusters[0].freqs_khz[0] * 1000,
        cpu_table_hz=[f * 1000 for f in board.clusters[0].freqs_khz],
        cpu_online_fraction=1.0,
        emc_hz=board.emc_freqs_hz[-1],
        emc_max_hz=board.emc_freqs_hz[-1],
    )
    labels = [label for ina in board.inas for label in ina.labels if label != "NC"]
    watts = rail_powers_w(labels, component_powers_w(
        board.soc, clocks, 0.0, budget_w=module_budget_w(board.power_modes)))
    return {label: w * 1000.0 for label, w in watts.items()}


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _read_int(path: Path, default: int = 0) -> int:
    try:
        return int(_read(path).split()[0])
    except (ValueError, IndexError):
        return default


def _mid_write(directory: Path, *names: str) -> bool:
    """True when a knob reads empty: jetbench's write (truncate, then write) is in flight.
    The kernel has no such moment; the simulation waits for the next pass."""
    return any(not _read(directory / name) for name in names if (directory / name).exists())


def _poke(path: Path, value: object, expect: Optional[str] = None) -> None:
    """Set a file's content if it differs (and, with `expect`, only if it still holds that).
    Same-length updates are done in place (no truncate), so a reader never sees an empty file
    and an open descriptor keeps seeing new values."""
    text = f"{value}\n".encode()
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return
    try:
        old = os.pread(fd, 64, 0)
        if old == text or (expect is not None and old.decode(errors="replace").strip() != expect):
            return
        if len(old) != len(text):
            os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
    finally:
        os.close(fd)


def _hide_setspeed(policy: Path, seen: str) -> None:
    """What the kernel shows in scaling_setspeed under any governor but userspace, put in place
    of the number `seen` there, unless a pin began since: the governor is read once more just
    before the write, and the longer text is written over the number without a truncate, so a
    reader never sees the file empty."""
    text = b"<unsupported>\n"
    try:
        fd = os.open(policy / "scaling_setspeed", os.O_RDWR)
    except OSError:
        return
    try:
        if os.pread(fd, 64, 0).decode(errors="replace").strip() != seen:
            return
        if _read(policy / "scaling_governor") in ("", "userspace"):
            return
        os.pwrite(fd, text, 0)
    finally:
        os.close(fd)


class SimKernel:
    """Reacts to writes in a simulated tree. Constructing one touches nothing."""

    def __init__(
        self,
        base: os.PathLike,
        *,
        interval_s: float = 0.005,
        power: bool = True,
        activity: Optional[Callable[[], float]] = None,
    ):
        self.base = Path(base)
        self.interval_s = interval_s
        self.power = power
        self._activity_fn = activity
        self._board: Optional[SimBoard] = None
        self._accepted: Dict[Path, str] = {}  # last value the "kernel" accepted, per knob
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._cpu_mark: Tuple[float, float] = (time.monotonic(), time.process_time())
        self._activity = 0.0
        self._quirks: Optional[Tuple[str, ...]] = None
        self._cpu_set_khz: Dict[Path, int] = {}  # amu-cpu: the clock set, apart from readings
        self._started_at: Optional[float] = None
        self._load_mark: Tuple[float, float, float] = (time.monotonic(), time.process_time(),
                                                       time.thread_time())
        self._load_cores = 0.0  # smoothed cores used by this process, the kernel's thread aside
        self._gpu_load = 0.0  # the GPU's load file, last read (a simulated workload's)
        self._ina_ticks: Dict[str, int] = {}  # per hwmon INA3221: its last conversion period
        self.passes = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> SimKernel:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is not None:
            return
        if self._started_at is None:
            self._started_at = time.monotonic()
        self.sync()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="jetbench-sim-kernel", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.sync()  # leave the tree consistent with the last writes

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sync()
            except OSError:
                pass  # a file swapped for a directory by a fault-injection test, say

    @property
    def board(self) -> SimBoard:
        if self._board is None:
            marker = json.loads((self.base / "etc/jetbench/simulated.json").read_text())
            self._board = get(marker["board"])
        return self._board

    @property
    def quirks(self) -> Tuple[str, ...]:
        """The quirks the board was created with (its marker's "quirks" list)."""
        if self._quirks is None:
            marker = json.loads((self.base / "etc/jetbench/simulated.json").read_text())
            self._quirks = Q.check(marker.get("quirks", ()))
        return self._quirks

    def p(self, board_path: str) -> Path:
        return self.base / board_path.lstrip("/")

    # -- one pass ----------------------------------------------------------------------------
    def sync(self) -> None:
        activity = self.activity()
        if "late-gpu" in self.quirks:
            self._late_gpu()
        cpu_hz = self._sync_cpufreq(activity)
        gpu_hz = self._sync_devfreq() if self.board.gpu_kind == "devfreq" else self._sync_gbus()
        emc_hz = self._sync_emc()
        self._sync_fan()
        if self.power and self.board.inas:
            self._sync_rails(cpu_hz, gpu_hz, emc_hz, activity)
        self.passes += 1

    def _late_gpu(self) -> None:
        """late-gpu: the devfreq directory (staged by `sim create`) appears LATE_GPU_S after
        the kernel started; a kernel that never started (create's own pass) leaves it staged."""
        staged = self.base / Q.LATE_GPU_STAGING / "devfreq"
        if self._started_at is None or not staged.is_dir():
            return
        if time.monotonic() - self._started_at < Q.LATE_GPU_S:
            return
        device = self.p(self.board.gpu_device)
        os.replace(staged, device / "devfreq")
        link = self.p(f"/sys/class/devfreq/{self.board.gpu_devfreq_name}")
        link.parent.mkdir(parents=True, exist_ok=True)
        target = device / "devfreq" / self.board.gpu_devfreq_name
        if not link.is_symlink():
            os.symlink(os.path.relpath(target, link.parent), link)

    def _gpu_cap_hz(self, table: Tuple[int, ...]) -> Optional[int]:
        """qos-cap: the highest table entry at or below QOS_CAP_FRACTION of the table's top."""
        if "qos-cap" not in self.quirks:
            return None
        limit = table[-1] * Q.QOS_CAP_FRACTION
        return max((f for f in table if f <= limit), default=table[0])

    def _guard(self, path: Path, valid: bool) -> str:
        """Undo a value the kernel would have refused; remember accepted ones."""
        current = _read(path)
        if not current:
            # Between jetbench's truncate and write: not a value, never undo anything on it.
            return self._accepted.get(path, "")
        if valid:
            self._accepted[path] = current
            return current
        previous = self._accepted.get(path)
        if previous is not None and previous != current:
            _poke(path, previous)
            return previous
        return current

    def _sync_cpufreq(self, activity: float) -> List[float]:
        freqs: List[float] = []
        amu = "amu-cpu" in self.quirks
        busy = amu and self._load() >= Q.AMU_BUSY_CORE_SHARE
        for cluster in self.board.clusters:
            owner = min(cluster.cpus)
            if self.board.policy_dirs:
                d = self.p(f"/sys/devices/system/cpu/cpufreq/policy{owner}")
            else:
                d = self.p(f"/sys/devices/system/cpu/cpu{owner}/cpufreq")
            if _mid_write(d, "scaling_min_freq", "scaling_max_freq", "scaling_governor",
                          "scaling_setspeed"):
                continue
            lo_hw, hi_hw = cluster.freqs_khz[0], cluster.freqs_khz[-1]
            lo = _read_int(d / "scaling_min_freq", lo_hw)
            hi = _read_int(d / "scaling_max_freq", hi_hw)
            ok = lo_hw <= lo <= hi <= hi_hw
            lo = int(self._guard(d / "scaling_min_freq", ok) or lo)
            hi = int(self._guard(d / "scaling_max_freq", ok) or hi)
            governor = _read(d / "scaling_governor")
            if not governor:
                continue
            if governor not in self.board.cpu_governors:
                governor = self._guard(d / "scaling_governor", False)
            else:
                self._guard(d / "scaling_governor", True)
            setspeed_file = d / "scaling_setspeed"
            setspeed = _read(setspeed_file)
            # The governor again, read *after* setspeed: jetbench writes `userspace` before the
            # speed, so a number beside a governor read before both is a pin in progress, not
            # a leftover to hide (hiding it raced with jetbench's read-back of its own write).
            governor_after = _read(d / "scaling_governor")
            if governor == "userspace":
                # Until someone writes scaling_setspeed the frequency stays where it was. (The
                # kernel shows that frequency in the file at once; rewriting it from here would
                # race with jetbench's own write of the file, so it is left as it was.)
                start = self._cpu_set_khz.get(d) or _read_int(d / "scaling_cur_freq", lo)
                target = int(setspeed) if setspeed.isdigit() else start
            else:
                if setspeed != "<unsupported>" and governor_after not in ("", "userspace"):
                    _hide_setspeed(d, setspeed)
                target = hi if governor == "performance" else lo
            # The rule of sim/attributes.py (one copy): RELATION_L inside min..max.
            cur = cpufreq_relation_l(cluster.freqs_khz, lo, hi, target)
            self._cpu_set_khz[d] = cur
            shown = cur
            if amu:  # measured from activity counters: a little low when busy, far low idle
                shown = int(cur * (1 - Q.AMU_BUSY_ERROR) if busy else cur * Q.AMU_IDLE_FRACTION)
            _poke(d / "scaling_cur_freq", shown)
            _poke(d / "cpuinfo_cur_freq", shown)
            freqs.append(cur * 1000.0)
        return freqs

    def _sync_devfreq(self) -> float:
        gpu_hz = 0.0
        nodes = [(self.board.gpu_device, self.board.gpu_devfreq_name, self.board.gpu_freqs_hz)]
        for device, name, _node in self.board.extra_devfreq:
            nodes.append((device, name, (115200000, 332800000, 601600000)))
        for device, name, table in nodes:
            is_gpu = name == self.board.gpu_devfreq_name
            cur = self._devfreq_node(device, name, table, is_gpu)
            if cur is not None and is_gpu:
                gpu_hz = float(cur)
        return gpu_hz

    def _devfreq_node(self, device: str, name: str, table: Tuple[int, ...],
                      is_gpu: bool = False) -> Optional[int]:
        """One devfreq node: undo refused min/max, set cur_freq from them and the governor
        (and the quirks: a QoS cap on the GPU, a cur_freq that never follows)."""
        d = self.p(f"{device}/devfreq/{name}")
        if _mid_write(d, "min_freq", "max_freq", "governor"):
            return None
        lo = _read_int(d / "min_freq", table[0])
        hi = _read_int(d / "max_freq", table[-1])
        ok = table[0] <= lo <= hi <= table[-1]
        lo = int(self._guard(d / "min_freq", ok) or lo)
        hi = int(self._guard(d / "max_freq", ok) or hi)
        cur = devfreq_running(table, lo, hi, _read(d / "governor"))
        cap = self._gpu_cap_hz(tuple(table)) if is_gpu else None
        if cap is not None:
            cur = min(cur, cap)
        if "static-cur" in self.quirks:
            return _read_int(d / "cur_freq", table[0])  # the file never follows a pin
        _poke(d / "cur_freq", cur)
        _poke(d / "target_freq", cur)
        return cur

    def _sync_gbus(self) -> float:
        clock = self.p("/sys/kernel/debug/clock")
        table = self.board.gpu_freqs_hz
        if _mid_write(clock, "override.gbus/rate", "override.gbus/state"):
            return float(_read_int(clock / "gbus/rate"))
        rate = _read_int(clock / "override.gbus/rate")
        ok = 0 <= rate <= table[-1]
        rate = int(self._guard(clock / "override.gbus/rate", ok) or rate)
        on = _read(clock / "override.gbus/state") == "1"
        cur = override_running(table, rate, on, table[0])
        cap = self._gpu_cap_hz(tuple(table))
        if cap is not None:
            cur = min(cur, cap)
        if "static-cur" in self.quirks:
            return float(_read_int(clock / "gbus/rate", table[0]))
        _poke(clock / "gbus/rate", cur)
        return float(cur)

    def _sync_emc(self) -> float:
        table = self.board.emc_freqs_hz
        kind = self.board.emc_kind
        if kind == "devfreq":
            cur = self._devfreq_node(EMC_DEVFREQ_DEVICE, "bwmgr", table)
            return float(cur if cur is not None else table[-1])
        if kind == "bpmp":
            rate = self.p("/sys/kernel/debug/bpmp/debug/clk/emc/rate")
            if _mid_write(rate.parent, "rate", "mrq_rate_locked"):
                return float(table[-1])
            value = _read_int(rate, table[-1])
            value = int(self._guard(rate, table[0] <= value <= table[-1]) or value)
            # Accepted, and the file shows what was kept: a table rate not above it (round-emc:
            # the controller's step), as sim/attributes.py's BpmpEmc.
            kept = round_emc(value) if "round-emc" in self.quirks else \
                highest_at_or_below(table, value)
            if kept != value:
                _poke(rate, kept)
                self._accepted[rate] = str(kept)
            return float(kept)
        if kind == "debugfs-clk":
            over = self.p("/sys/kernel/debug/clk/override.emc")
            cur_file = self.p("/sys/kernel/debug/clk/emc/clk_rate")
            rate_file, state_file = over / "clk_update_rate", over / "clk_state"
            cur = self._sync_emc_clk(over, cur_file, rate_file, state_file, table)
            if (over / "clk_rate").exists():  # the override clock runs at the EMC's rate
                _poke(over / "clk_rate", int(cur))
            return cur
        over = self.p("/sys/kernel/debug/clock/override.emc")
        cur_file = self.p("/sys/kernel/debug/clock/emc/rate")
        return self._sync_emc_clk(over, cur_file, over / "rate", over / "state", table)

    def _sync_emc_clk(self, over: Path, cur_file: Path, rate_file: Path, state_file: Path,
                      table) -> float:
        """A tegra210 debugfs EMC override: the running rate from its rate and state."""
        if _mid_write(over, rate_file.name, state_file.name):
            return float(_read_int(cur_file))
        rate = _read_int(rate_file)
        rate = int(self._guard(rate_file, 0 <= rate <= table[-1]) or rate)
        on = _read(state_file) == "1"
        if "round-emc" in self.quirks and on and rate > 0:
            cur = round_emc(rate)
        else:
            cur = override_running(table, rate, on, table[-1])
        _poke(cur_file, cur)
        return float(cur)

    def _sync_fan(self) -> None:
        fan = self.p("/sys/devices/pwm-fan")
        if (fan / "cur_pwm").exists():
            manual = _read(fan / "temp_control") == "0"
            _poke(fan / "cur_pwm", _read_int(fan / "target_pwm") if manual else 0)

    # -- power -------------------------------------------------------------------------------
    def activity(self) -> float:
        """Utilisation of this process since the last pass, as a fraction of the machine."""
        if self._activity_fn is not None:
            return self._activity_fn()
        now, cpu = time.monotonic(), time.process_time()
        then, cpu_then = self._cpu_mark
        self._cpu_mark = (now, cpu)
        wall = now - then
        if wall <= 0:
            return self._activity
        raw = min((cpu - cpu_then) / (wall * (os.cpu_count() or 1)), 1.0)
        # CPU time comes in scheduler ticks: smooth over ~30 ms, as the sensor's averaging would.
        self._activity += (raw - self._activity) * (1.0 - math.exp(-wall / ACTIVITY_TAU_S))
        return self._activity

    def _load(self) -> float:
        """Cores this process used since the last pass, leaving out the calling (kernel)
        thread's own time, averaged over ~AMU_LOAD_TAU_S: the load the board "sees"."""
        now, cpu, own = time.monotonic(), time.process_time(), time.thread_time()
        then, cpu_then, own_then = self._load_mark
        self._load_mark = (now, cpu, own)
        wall = now - then
        if wall > 0:
            raw = max(0.0, (cpu - cpu_then) - (own - own_then)) / wall
            weight = 1.0 - math.exp(-wall / Q.AMU_LOAD_TAU_S)
            self._load_cores += (raw - self._load_cores) * weight
        return self._load_cores

    def _converted(self, ina) -> bool:
        """A hwmon INA3221 refreshes once per update_interval x samples (its settings in the
        tree, sim/attributes.py's rule): True when a new period began since the last pass."""
        d = self.p(f"{ina.device_dir}/hwmon/hwmon{ina.index}")
        period_s = ina3221_period_s(_read_int(d / "update_interval", 1),
                                    _read_int(d / "samples", 1))
        tick = int(time.monotonic() // period_s) if period_s > 0 else self.passes
        if self._ina_ticks.get(ina.device_dir) == tick:
            return False
        self._ina_ticks[ina.device_dir] = tick
        return True

    def _online_fraction(self) -> float:
        cpus = [c for cl in self.board.clusters for c in cl.cpus]
        online = 0
        for cpu in cpus:
            f = self.p(f"/sys/devices/system/cpu/cpu{cpu}/online")
            online += 1 if (not f.exists() or _read(f) != "0") else 0
        return online / len(cpus)

    def _sync_rails(self, cpu_hz: List[float], gpu_hz: float, emc_hz: float,
                    activity: float) -> None:
        board = self.board
        clocks = ClockState(
            gpu_hz=gpu_hz,
            gpu_table_hz=board.gpu_freqs_hz,
            cpu_hz=sum(cpu_hz) / len(cpu_hz) if cpu_hz else 0.0,
            cpu_table_hz=[f * 1000 for f in board.clusters[0].freqs_khz],
            cpu_online_fraction=self._online_fraction(),
            emc_hz=emc_hz,
            emc_max_hz=board.emc_freqs_hz[-1],
        )
        load_file = gpu_load.load_path(self.base, board.gpu_device)
        load = gpu_load.read_load(load_file) if load_file is not None else None
        if load is not None:
            self._gpu_load = load
        components = component_powers_w(board.soc, clocks, activity, self._gpu_load,
                                        module_budget_w(board.power_modes))
        for ina in board.inas:
            if ina.driver == "ina3221" and not self._converted(ina):
                continue  # the chip's conversion cycle has not ended: readings unchanged
            watts = rail_powers_w([lb for lb in ina.labels if lb != "NC"], components)
            for index, label in enumerate(ina.labels):
                if label not in watts:
                    continue
                mw = watts[label] * 1000.0
                mv = rail_mv(label)
                ma = int(round(mw * 1000.0 / mv))
                if ina.driver == "ina238":
                    d = self.p(f"{ina.device_dir}/hwmon/hwmon{ina.index}")
                    _poke(d / "power1_input", f"{int(round(mw * 1000)):>10}")  # microwatts
                    _poke(d / "curr1_input", f"{ma:>6}")
                    _poke(d / "in1_input", mv)
                elif ina.driver == "ina3221x":
                    d = self.p(f"{ina.device_dir}/iio:device{ina.index}")
                    # Fixed width: updated in place, never seen half-written.
                    _poke(d / f"in_power{index}_input", f"{int(round(mw)):>6}")
                    _poke(d / f"in_current{index}_input", f"{ma:>6}")
                    _poke(d / f"in_voltage{index}_input", mv)
                else:
                    d = self.p(f"{ina.device_dir}/hwmon/hwmon{ina.index}")
                    _poke(d / f"curr{index + 1}_input", f"{ma:>6}")
                    _poke(d / f"in{index + 1}_input", mv)
