"""The sampler in a process of its own: the `Sampler` API (start/stop, begin/end/window(),
traces(), stats()) with the reading done by `python -m jetbench.sampling.sampler_child`.

A workload that holds the GIL (a Python-heavy network at batch 1) starves a sampling thread in
its own process, and the thread slows it: the process that measures must not be the process
being measured. Here the child opens the sources itself and reads each at its own rate; this
process only collects packed records (sampling/records.py) from a pipe, in one block every
COLLECT_INTERVAL_S from a thread that sleeps in between, and at each window's end. Timestamps
are CLOCK_MONOTONIC, which every process shares, so windows opened here line up exactly.

Life: start() spawns the child, sends the job, and waits for its answer (the sources' channels,
or the jetbench error that stopped one opening, raised here as it would have been in process).
stop() closes the child's stdin, which ends it. The child never outlives this process (see
sampler_child.py); if it dies first, the next begin()/end()/traces() raises `SamplerDied` with
how it died, at once rather than waiting for samples that cannot come.

The sources must be picklable: jetbench's are (constructors only store arguments, descriptors
are never pickled). In-memory test sources use `Sampler` instead.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence

from .. import errors
from ..errors import HardwareError, SamplerDied
from ..hw.meters.base import PowerSource
from .records import RecordReader, split_faults
from .sampler import Sampler, _Slot
from .window import GAP_FACTOR, MIN_PERIODS

if TYPE_CHECKING:
    from .sampler_child import ErrorDesc, Hello, Job

CHILD_MODULE = "jetbench.sampling.sampler_child"
COLLECT_INTERVAL_S = 0.25  # how often this process wakes to collect samples (~0.1% of a core)
START_TIMEOUT_S = 60.0  # opening a serial meter may wait out its timeout; jtop its service
STOP_TIMEOUT_S = 5.0
PIPE_BYTES = 1 << 20  # ~16 s of 1 kHz samples of 6 channels, should collection stall
_F_SETPIPE_SZ = 1031  # <linux/fcntl.h>


class ProcessSampler(Sampler):
    """`Sampler`'s API, sampling in a child process. See the module docstring."""

    def __init__(
        self,
        sources: Sequence[PowerSource],
        *,
        interval_s: Optional[float] = None,
        intervals_s: Optional[Mapping[str, float]] = None,
        start_timeout_s: float = START_TIMEOUT_S,
        min_periods: float = MIN_PERIODS,
        gap_factor: float = GAP_FACTOR,
        clock: Callable[[], float] = time.monotonic,
    ):
        if clock is not time.monotonic:
            raise ValueError("the sampler process stamps samples with CLOCK_MONOTONIC "
                             "(time.monotonic): another clock would not line up")
        super().__init__(sources, interval_s=interval_s, intervals_s=intervals_s,
                         min_periods=min_periods, gap_factor=gap_factor, clock=clock)
        self.start_timeout_s = start_timeout_s
        self.proc: Optional[subprocess.Popen] = None
        self._data_fd = -1
        self._reader: Optional[RecordReader] = None
        self._collect_lock = threading.Lock()
        self._collector: Optional[threading.Thread] = None
        self._collector_stop = threading.Event()
        self._eof = False
        self._stopping = False
        self._stderr: Optional[IO[bytes]] = None

    # -- life cycle --------------------------------------------------------------------------
    def start(self) -> ProcessSampler:
        if self._started:
            return self
        try:
            blob = pickle.dumps(self._sources)
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            raise ValueError(f"these power sources cannot be sent to the sampler process "
                             f"({err}); use the in-process Sampler for them") from err
        data_r, data_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        _grow_pipe(data_w)
        self._stderr = tempfile.TemporaryFile(prefix="jetbench-sampler-")
        self.proc, self._reader = None, None
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", CHILD_MODULE], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=self._stderr, pass_fds=(data_w, ctl_w),
                env=_child_env(),
            )
        except OSError as err:
            for fd in (data_r, ctl_r):
                os.close(fd)
            self._stderr.close()
            self._stderr = None
            raise HardwareError(f"cannot start the power sampler process ({err})") from err
        finally:
            os.close(data_w)  # the child's ends: only the child holds them now
            os.close(ctl_w)
        self._data_fd = data_r
        self._eof = self._stopping = False
        job: Job = {
            "parent_pid": os.getpid(), "sys_path": list(sys.path), "sources": blob,
            # the kernel signals the child when the *thread* that forked it ends: only the
            # main thread lives as long as the process
            "die_with_parent": threading.current_thread() is threading.main_thread(),
            "interval_s": self._interval_s, "intervals_s": self._intervals_s,
            "data_fd": data_w, "control_fd": ctl_w,
        }
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(pickle.dumps(job))
            self.proc.stdin.flush()
            hello = self._hello(ctl_r)
        except BaseException:
            self._shutdown()
            raise
        finally:
            os.close(ctl_r)
        if not hello["ok"]:
            self._shutdown()
            raise _rebuild_error(hello["error"])
        self._reader = RecordReader(hello["width"])
        self._slots = [_Slot(d["name"], d["channels"], d["total"], d["period_s"],
                             d["interval_s"], d["pushed"]) for d in hello["sources"]]
        os.set_blocking(self._data_fd, False)
        self._collector_stop.clear()
        self._collector = threading.Thread(target=self._collect_loop,
                                           name="jetbench-power-collect", daemon=True)
        self._started = True
        self._collector.start()
        return self

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        self._shutdown()

    def _shutdown(self) -> None:
        """End the child (closing its stdin asks it to; a kill after STOP_TIMEOUT_S), collect
        what it sent, release everything."""
        self._stopping = True
        self._collector_stop.set()
        if self._collector is not None:
            self._collector.join(timeout=STOP_TIMEOUT_S)
            self._collector = None
        proc = self.proc
        if proc is not None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass  # the child is gone already
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._data_fd >= 0:
            if self._reader is not None:
                self._collect()
            os.close(self._data_fd)
            self._data_fd = -1
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # -- start-up handshake ------------------------------------------------------------------
    def _hello(self, ctl_r: int) -> Hello:
        deadline = time.monotonic() + self.start_timeout_s
        buf = b""
        need = 4
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HardwareError(
                    f"the power sampler process did not open the meters within "
                    f"{self.start_timeout_s:g} s", hint="check the meters (`jetbench monitor`)")
            ready, _, _ = select.select([ctl_r], [], [], min(left, 0.5))
            if not ready:
                continue
            chunk = os.read(ctl_r, 1 << 16)
            if not chunk:
                raise SamplerDied(f"the power sampler process {self._how_it_ended()} before "
                                  "it had opened the meters", hint=_DIED_HINT)
            buf += chunk
            if len(buf) >= 4 and need == 4:
                need = 4 + int.from_bytes(buf[:4], "little")
            if len(buf) >= need > 4:
                return pickle.loads(buf[4:need])

    # -- collecting samples ------------------------------------------------------------------
    def _collect_loop(self) -> None:
        while not self._collector_stop.wait(COLLECT_INTERVAL_S):
            self._collect()
            if self._eof:
                return

    def _collect(self) -> None:
        """Read every record the child has sent so far into the traces."""
        with self._collect_lock:
            if self._data_fd < 0 or self._reader is None:
                return
            chunks = []
            while True:
                try:
                    chunk = os.read(self._data_fd, PIPE_BYTES)
                except BlockingIOError:
                    break
                if not chunk:
                    self._eof = True
                    break
                chunks.append(chunk)
            if not chunks:
                return
            records = self._reader.feed(b"".join(chunks))
            sources = records["source"]
            for k, slot in enumerate(self._slots):
                block = records[sources == k] if len(self._slots) > 1 else records
                if not len(block):
                    continue
                for run, fault in split_faults(block):
                    t_s = run["t_ns"] * 1e-9
                    if fault is None:
                        slot.trace.extend(t_s, run["values"])
                        slot.state.reads += len(run)
                    else:
                        slot.trace.mark_fault(float(t_s[0]), fault)

    def _sampling(self, slot: _Slot) -> bool:
        return self._alive()

    def _alive(self) -> bool:
        return not self._eof and self.proc is not None and self.proc.poll() is None

    # -- windows: as in process, plus a clear error when the child is gone --------------------
    def _check_alive(self, when: str) -> None:
        if not self._started:
            return
        self._collect()
        if self._alive():
            return
        raise SamplerDied(f"the power sampler process {self._how_it_ended()} {when}: no power "
                          "samples after that", hint=_DIED_HINT)

    def _how_it_ended(self) -> str:
        proc = self.proc
        if proc is None:
            return "never started"
        try:
            code = proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return f"(pid {proc.pid}) stopped sending samples"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how = f"(pid {proc.pid}) was killed by {name}"
        else:
            how = f"(pid {proc.pid}) exited with status {code}"
        last = _last_line(self._stderr)
        return f"{how} ({last})" if last else how


_DIED_HINT = ("jetbench reads the power meters in a process of its own; something ended it (a "
              "kill, the out-of-memory killer: see dmesg). Run the measurement again.")


def _child_env() -> Dict[str, str]:
    """This environment, with jetbench's own source root first on the child's path."""
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    return env


def _grow_pipe(fd: int) -> None:
    """A bigger pipe rides out a stalled collector; the default (64 KiB) is only ~1 s."""
    try:
        import fcntl

        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, ImportError):
        pass  # over /proc/sys/fs/pipe-max-size, or not Linux: the default will do


def _rebuild_error(desc: ErrorDesc) -> errors.JetbenchError:
    cls = getattr(errors, str(desc.get("class")), None)
    if not (isinstance(cls, type) and issubclass(cls, errors.JetbenchError)):
        cls = HardwareError
    try:
        return cls(desc["message"], path=desc.get("path"), hint=desc.get("hint"))
    except TypeError:
        return HardwareError(desc["message"], path=desc.get("path"), hint=desc.get("hint"))


def _last_line(stream: Optional[IO[bytes]]) -> str:
    if stream is None:
        return ""
    try:
        stream.seek(0)
        lines = stream.read()[-4000:].decode(errors="replace").strip().splitlines()
    except (OSError, ValueError):
        return ""
    return lines[-1].strip() if lines else ""


__all__: List[str] = ["ProcessSampler", "SamplerDied"]
