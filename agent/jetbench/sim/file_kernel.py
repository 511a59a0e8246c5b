"""The simulated board's "kernel": reacts to what is written into a simulated tree.

jetbench writes a simulated tree exactly as it writes a real one (plain files under --root, no
special path in the hardware code). This module plays the kernel's part beside it:
- each pass feeds the writes it finds in the knobs to the FUSE board's own attributes
  (`sim/attributes.py`'s `KernelModel`: one description per attribute, one copy of the
  drivers' rules) and writes back what they keep: a write the driver refuses (min above max,
  a rate outside the clock's range) is undone, the way a rejected write leaves the old value
  (after the fact here: tests of refusals and errnos run on the FUSE board), an accepted one
  reads as the driver keeps it (clamped, rounded), and the current-frequency files show what
  runs;
- the INA3221 rail files are updated from the power model (`power_model.py`) driven by the clocks
  in the tree and by the real CPU load of this process;
- a board created with quirks (`sim/quirks.py`, listed in its marker) shows them: a `cur_freq`
  that never follows (static-cur), a cap below the pin without touching the knobs (qos-cap),
  CPU readings from activity counters (amu-cpu), a GPU node that appears late (late-gpu), EMC
  rates rounded by the memory controller (round-emc).

`sync()` does one pass; `start()`/`stop()` (or `with FileKernel(dir):`) run passes in a thread.
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
from .attributes import HostLoad, KernelModel, Refused, ina3221_period_s
from .boards import SimBoard, get
from .power_model import (
    ClockState,
    component_powers_w,
    module_budget_w,
    rail_mv,
    rail_powers_w,
)

__all__ = ["FileKernel", "idle_rails_mw", "rail_mv"]

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
    # os.read rather than Path.read_text: a pass reads about 35 small files 200 times a second
    # in every command on a simulated board, and read_text's text-file layers were a third of it
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            chunks = [os.read(fd, 65536)]
            while len(chunks[-1]) == 65536:
                chunks.append(os.read(fd, 65536))
        finally:
            os.close(fd)
        return b"".join(chunks).decode().strip()
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


def _unjudged(board_path: str, board: SimBoard) -> bool:
    """Knobs a pass does not judge: `scaling_setspeed` (read beside its governor, below),
    cpuidle's `disable` files (many, and only ever 0/1) and the GPU's load file (a simulated
    workload's, read by the power model)."""
    return (board_path.endswith("/scaling_setspeed") or "/cpuidle/" in board_path
            or board_path == f"{board.gpu_device}/load")


def _derived(board_path: str) -> bool:
    """Files the model computes that a pass writes: current clocks and the fan's PWM; not the
    CPUs' (written beside their policy: amu-cpu) nor the INA readings (`*_input`, written by
    the power pass from this process's load, once per conversion period)."""
    return "/cpufreq/" not in board_path and not board_path.endswith("_input")


class FileKernel:
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
        self._paths: Dict[str, Path] = {}
        self.interval_s = interval_s
        self.power = power
        self._activity_fn = activity
        self._board: Optional[SimBoard] = None
        self._model: Optional[KernelModel] = None  # the attributes (sim/attributes.py)
        self._judged: List[str] = []  # knobs whose writes the model judges, per pass
        self._watched: List[str] = []  # those and the CPUs' scaling_setspeed
        self._derived: List[str] = []  # files the model computes (current clocks, fan PWM)
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._cpu_mark: Tuple[float, float] = (time.monotonic(), time.process_time())
        self._activity = 0.0
        self._quirks: Optional[Tuple[str, ...]] = None
        self._started_at: Optional[float] = None
        self._load_mark: Tuple[float, float, float] = (time.monotonic(), time.process_time(),
                                                       time.thread_time())
        self._load_cores = 0.0  # smoothed cores used by this process, the kernel's thread aside
        self._gpu_load = 0.0  # the GPU's load file, last read (a simulated workload's)
        self._ina_ticks: Dict[str, int] = {}  # per hwmon INA3221: its last conversion period
        self.passes = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> FileKernel:
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
        path = self._paths.get(board_path)
        if path is None:  # a pass names the same few dozen files each time
            path = self._paths[board_path] = self.base / board_path.lstrip("/")
        return path

    # -- one pass ----------------------------------------------------------------------------
    def sync(self) -> None:
        activity = self.activity()
        if "late-gpu" in self.quirks:
            self._late_gpu()
        cpu_hz, gpu_hz, emc_hz = self._sync_clocks()
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

    # -- the clocks: sim/attributes.py's model, fed the writes found in the tree ----------------
    @property
    def model(self) -> KernelModel:
        """The board's attributes as `sim/attributes.py` describes them (the FUSE board's
        own): built from the tree on the first pass; each pass feeds it the writes found."""
        if self._model is None:
            model = KernelModel(self.board, self._initial, self.quirks,
                                    load=HostLoad(fixed=0.0))
            self._judged = [path for path, attr in model.attrs.items()
                            if attr.writable and not _unjudged(path, self.board)]
            self._watched = self._judged + [f"{model.policy_dir(c.cpus)}/scaling_setspeed"
                                            for c in self.board.clusters]
            self._derived = [path for path, attr in model.attrs.items()
                             if not attr.writable and _derived(path)]
            self._model = model
        return self._model

    def _initial(self, board_path: str) -> str:
        """A file's first content, from the tree (late-gpu: from where its node is staged)."""
        path = self.p(board_path)
        node = f"{self.board.gpu_device}/devfreq/"
        if not path.exists() and board_path.startswith(node):
            path = self.base / Q.LATE_GPU_STAGING / "devfreq" / board_path[len(node):]
        try:
            return path.read_text()
        except (OSError, UnicodeDecodeError):
            return ""  # unreadable (a fault-injection test made it a directory): no value

    def _judge(self) -> Dict[str, str]:
        """Feed the writes found in the tree to the model's store functions, and show what it
        keeps: a write the driver refuses is undone (a file cannot fail a write when it is
        made), an accepted one reads as the driver keeps it (clamped, rounded). The order two
        writes came in cannot be seen: the one that refuses fewest is taken. A directory with
        a file read empty (jetbench's truncate-then-write in flight, or a node not there yet)
        waits for the next pass. Returns what was read, per watched path."""
        model = self.model
        seen = {path: _read(self.p(path)) for path in self._watched}
        for path in self._watched[len(self._judged):]:  # the CPUs' scaling_setspeed
            if not seen[path]:
                # jetbench's write in flight (it writes `userspace` first: _hide_setspeed reads
                # the governor again and leaves it), or a writer killed between its truncate
                # and its write (`kill -9` mid-`maxperf`) under a governor since put back: a
                # kernel never shows the file empty, and `restore` does not write
                # `<unsupported>` back, so the kernel's text is put there
                _hide_setspeed(self.p(path.rsplit("/", 1)[0]), "")
                seen[path] = _read(self.p(path))
        busy = {path.rsplit("/", 1)[0] for path, text in seen.items() if not text}
        changed = {path: seen[path] for path in self._judged
                   if path.rsplit("/", 1)[0] not in busy
                   and seen[path] != model.attrs[path].show()}
        pending = dict(changed)
        while pending:
            accepted = False
            for path, text in list(pending.items()):
                try:
                    model.attrs[path].store(text)
                except Refused:
                    continue
                del pending[path]
                accepted = True
            if not accepted:
                break
        for path, text in changed.items():
            _poke(self.p(path), model.attrs[path].show(), expect=text)
        return {path: text for path, text in seen.items()
                if path.rsplit("/", 1)[0] not in busy}

    def _sync_clocks(self) -> Tuple[List[float], float, float]:
        """One pass over the clocks: the CPU, GPU and EMC rates that run (Hz). A tree whose
        knob reads empty when the model is first built (a writer killed between its truncate
        and its write: `kill -9` mid-`maxperf`) has no state to start from: the clocks wait
        for a later pass (`restore` writes the value back), the board idle meanwhile."""
        try:
            model = self.model
        except (ValueError, IndexError):
            return [], float(self.board.gpu_freqs_hz[0]), float(self.board.emc_freqs_hz[-1])
        seen = self._judge()
        amu = "amu-cpu" in self.quirks
        busy = amu and self._load() >= Q.AMU_BUSY_CORE_SHARE
        cpu_hz: List[float] = []
        for cluster, policy in zip(self.board.clusters, model.policies):
            d = model.policy_dir(cluster.cpus)
            setspeed_path = f"{d}/scaling_setspeed"
            if setspeed_path not in seen:
                continue
            setspeed = _read(self.p(setspeed_path))
            # The governor again, read *after* setspeed: jetbench writes `userspace` before the
            # speed, so a number beside a governor read before both is a pin in progress, not
            # a leftover to hide (hiding it raced with jetbench's read-back of its own write).
            governor_after = _read(self.p(f"{d}/scaling_governor"))
            if policy.governor == "userspace":
                # The file keeps what was written (the kernel shows the running clock there;
                # rewriting it from here would race with jetbench's own write of the file).
                if setspeed.isdigit():
                    policy.speed_khz = int(setspeed)
            elif setspeed != "<unsupported>" and governor_after not in ("", "userspace"):
                _hide_setspeed(self.p(d), setspeed)
            cur = policy.target_khz(0.0)
            shown = cur
            if amu:  # measured from activity counters: a little low when busy, far low idle
                shown = int(cur * (1 - Q.AMU_BUSY_ERROR) if busy else cur * Q.AMU_IDLE_FRACTION)
            _poke(self.p(f"{d}/scaling_cur_freq"), shown)
            _poke(self.p(f"{d}/cpuinfo_cur_freq"), shown)
            if any(self._online(c) for c in cluster.cpus):  # an offline cluster draws no power
                cpu_hz.append(cur * 1000.0)
        for path in self._derived:
            _poke(self.p(path), model.attrs[path].show())
        return cpu_hz, model.gpu_hz(), model.emc_hz()

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

    def _online(self, cpu: int) -> bool:
        f = self.p(f"/sys/devices/system/cpu/cpu{cpu}/online")
        return not f.exists() or _read(f) != "0"

    def _online_fraction(self) -> float:
        cpus = [c for cl in self.board.clusters for c in cl.cpus]
        return sum(self._online(cpu) for cpu in cpus) / len(cpus)

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
