"""The sampler process: `python -m jetbench.sampling.sampler_child`, started by `ProcessSampler`
(sampling/sampler_process.py), never by hand.

It reads its job (a pickle) from stdin: the parent's pid and sys.path, the power sources
(constructed, never opened: a source is its own description, re-opened here), the intervals,
and two pipe descriptors it inherited. It opens the sources, answers on the control pipe with
what they turned out to be (channels, total, period; or the error that stopped one opening),
then reads each source in a thread of its own, at its own rate (`sampling/poll.py`), writing
packed records (`sampling/records.py`) to the data pipe.

It never outlives its parent: stdin stays open for its whole life and EOF on it (the parent
stopped the sampler, or died) ends it; on Linux the kernel also kills it when the parent dies
(PR_SET_PDEATHSIG), even if something else still holds the pipe; and a write to a data pipe
nobody reads ends it too. Ctrl-C is the parent's business: SIGINT is ignored here. Its reading
threads run at a lower nice value, and a polled one that falls behind its cadence (a busy
machine delays its wake-ups) asks for a real-time priority (see SAMPLER_RT_PRIORITY).
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
import threading
from typing import TYPE_CHECKING, BinaryIO, Dict, List, Optional, Sequence, Tuple, TypedDict

from ..procs import die_with_parent

if TYPE_CHECKING:
    from ..hw.meters.base import Channel, PowerSource, Total
    from .poll import Sink

# Asked for where allowed (root, CAP_SYS_NICE): the sampler needs little CPU, but on time. On a
# busy machine a normal-priority sampler waits behind other threads and misses ticks (61-93% of
# 1 kHz on a loaded 2-core machine, 99.6-100% at SCHED_FIFO 1: benchmarks/RESULTS.md). But a
# real-time thread wakes on the core it last ran on and preempts whatever runs there, even with
# another core idle: at 1 kHz it took 3-5% from a GIL-holding workload on an idle machine
# (issue 64), where a nice -10 thread wakes on the idle core. So a polled source's thread
# starts at nice -10 where a core is to spare (machine_busy), and takes the lowest real-time
# priority once it falls behind (sampling/poll.py: BEHIND_SHARE of a second's ticks late, or
# one stall); on a machine with no core to spare it takes it at once (a short window cannot
# wait). Pushed streams never do.
SAMPLER_RT_PRIORITY = 1
SAMPLER_NICE = -10
_LENGTH = struct.Struct("<I")


class Job(TypedDict):
    """What the parent pickles to the child's stdin (sampler_process.py)."""
    parent_pid: int
    sys_path: List[str]
    sources: bytes  # the pickled, unopened PowerSources
    die_with_parent: bool
    interval_s: Optional[float]
    intervals_s: Dict[str, float]
    data_fd: int
    control_fd: int


# An error, as the parent rebuilds it ("class" names a jetbench error class).
ErrorDesc = TypedDict("ErrorDesc", {"class": str, "message": str, "path": Optional[str],
                                    "hint": Optional[str]})


class SourceDesc(TypedDict):
    """One source as it opened in the child."""
    name: str
    channels: Tuple[Channel, ...]
    total: Optional[Total]
    period_s: float
    pushed: bool
    interval_s: float


class Hello(TypedDict, total=False):
    """The one control message: the sources opened (`ok`, `width`, `sources`) or not (`error`)."""
    ok: bool
    width: int
    sources: List[SourceDesc]
    error: ErrorDesc


def send_message(fd: int, message: Hello) -> None:
    """One control message: its length (uint32) and a pickle."""
    body = pickle.dumps(message)
    os.write(fd, _LENGTH.pack(len(body)) + body)


def machine_busy() -> bool:
    """No core to spare, by the load average: (nearly) one runnable task per core or more.
    A short window cannot wait for a sampler to fall behind before it gets its priority."""
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1) - 0.5
    except OSError:
        return False


def raise_priority(realtime: bool) -> None:
    """Best effort, for the calling thread (Linux schedules threads; new ones inherit)."""
    if realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(SAMPLER_RT_PRIORITY))
            return
        except (OSError, AttributeError):
            pass  # not allowed: a nice value, maybe
    try:
        os.setpriority(os.PRIO_PROCESS, 0, SAMPLER_NICE)
    except (OSError, AttributeError):
        pass  # not allowed either: sample at the normal priority


def describe_error(err: BaseException) -> ErrorDesc:
    """A picklable account of an error, rebuilt as a jetbench error in the parent."""
    from ..errors import JetbenchError

    if isinstance(err, JetbenchError):
        return {"class": type(err).__name__, "message": err.message, "path": err.path,
                "hint": err.hint}
    return {"class": "HardwareError", "message": f"{type(err).__name__}: {err}", "path": None,
            "hint": None}


def _open_all(sources: Sequence[PowerSource]) -> None:
    from .poll import close_quietly

    opened: List[PowerSource] = []
    try:
        for src in sources:
            src.open()
            opened.append(src)
    except BaseException:
        for src in opened:
            close_quietly(src)
        raise


def _sample(src: PowerSource, sink: Sink, interval_s: float, stop: threading.Event) -> None:
    from .poll import PollState, poll

    polled = not src.pushed and interval_s > 0  # it sleeps between reads
    busy = machine_busy()
    raise_priority(realtime=polled and busy)
    # real time only for a polled source (never a pushed or 0-interval one): at once on a
    # machine with no core to spare, else once it falls behind (poll() calls this from this
    # very thread)
    state = PollState(on_behind=lambda: raise_priority(realtime=True)) \
        if polled and not busy else PollState()
    try:
        poll(src, sink, interval_s, stop, state)
    except OSError:  # the data pipe is gone: the parent is gone or stopped reading
        stop.set()


def run(job: Job, lifeline: BinaryIO) -> int:
    from .poll import close_quietly, sampling_interval_s
    from .records import RecordWriter

    control, data = job["control_fd"], job["data_fd"]
    try:
        sources: List[PowerSource] = pickle.loads(job["sources"])
        _open_all(sources)
    except BaseException as err:  # every failure to open is the parent's error to report
        send_message(control, {"ok": False, "error": describe_error(err)})
        return 1
    width = max([len(s.channels()) for s in sources] + [1])
    described: List[SourceDesc] = []
    for src in sources:
        described.append({
            "name": src.name, "channels": tuple(src.channels()), "total": src.total(),
            "period_s": float(src.period_s), "pushed": bool(src.pushed),
            "interval_s": sampling_interval_s(src, job["intervals_s"], job["interval_s"]),
        })
    send_message(control, {"ok": True, "width": width, "sources": described})
    os.close(control)

    stop = threading.Event()
    threads = []
    for k, (src, desc) in enumerate(zip(sources, described)):
        sink = RecordWriter(data, k, width, len(desc["channels"]))
        thread = threading.Thread(target=_sample, args=(src, sink, desc["interval_s"], stop),
                                  name=f"jetbench-power-{src.name}", daemon=True)
        threads.append(thread)
        thread.start()
    try:
        while lifeline.read(4096):  # the parent never writes again: this is EOF-waiting
            pass
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5.0)
        for src in sources:
            close_quietly(src)
    return 0


def main() -> int:
    # Ctrl-C (the terminal's whole group) and a SIGTERM sent to the whole group (systemd
    # stopping a unit) are the parent's to act on: it ends this process (stdin closed, or a
    # kill) once the window it measures is settled; dying here first would turn an interrupt
    # into "the sampler died".
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stdin = sys.stdin.buffer
    job: Job = pickle.load(stdin)
    if job.get("die_with_parent") and not die_with_parent(signal.SIGKILL, job["parent_pid"]):
        os._exit(0)  # the parent died before prctl took effect
    for entry in reversed(job.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    return run(job, stdin)


if __name__ == "__main__":
    sys.exit(main())
