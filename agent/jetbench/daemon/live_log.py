"""`--throughput-from log:PATH#regex:PATTERN` (or `journal:UNIT#regex:PATTERN`): the live
workload's rate from the lines it writes to a log or to its systemd unit's journal
(DeepStream's `**PERF:  29.98 (29.95)` every few seconds, an application's own `fps=` lines),
for `daemon --tune`.

PATTERN is `measure --cmd`'s `regex:` (RE2, exactly one group: a number in items per second,
the last match on a line winning). Only lines written after the daemon starts count. Each value
holds from the read that found it until a newer one is found, so the file's values integrate
into a counter (items = rate x seconds) that the windows read as they read a Prometheus
counter: a window's rate is the time-weighted mean of the values it saw. A log that is rotated
(a new file at the path, or one shorter than what was read) is read from its beginning.
"""

from __future__ import annotations

import collections
import os
import shutil
import stat
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable, Deque, List, Optional, Union

from ..errors import HardwareError, UsageError
from ..workload.command.throughput_from import compile_user_pattern
from .live_rate import Reading
from .scrape import SourceFault

MAX_READ_BYTES = 1 << 20  # read at most this much of the log per reading
MAX_LINE_BYTES = 64 * 1024  # a longer "line" is cut: no pattern runs over megabytes
MAX_RATE_PER_S = 1e9  # a line saying more items per second than this is a fault, not a rate


@dataclass(frozen=True)
class LogSource:
    """`log:PATH#regex:PATTERN` or `journal:UNIT#regex:PATTERN`, parsed (nothing is opened)."""

    path: str  # the log file, or the systemd unit
    pattern: str
    kind: str = "log"  # "log" or "journal"

    def text(self) -> str:
        return f"{self.kind}:{self.path}#regex:{self.pattern}"


def parse_log_source(text: str, option: str = "--throughput-from") -> LogSource:
    """'log:/var/log/app.log#regex:fps=([0-9.]+)' or 'journal:deepstream.service#regex:...'
    -> its parts; UsageError otherwise."""
    kind, _, body = text.partition(":")
    path, sep, pattern = body.partition("#regex:")
    if kind not in ("log", "journal") or not sep or not path or not pattern:
        raise UsageError(f"{option} {text!r}: expected log:PATH#regex:PATTERN or "
                         "journal:UNIT#regex:PATTERN",
                         hint=r"e.g. log:/tmp/ds.log#regex:\*\*PERF:\s+([0-9.]+)")
    groups = compile_user_pattern(pattern).groups
    if groups != 1:
        raise UsageError(f"{option} {text!r}: the pattern needs exactly one group, the number "
                         f"of items per second (it has {groups})")
    return LogSource(path, pattern, kind)


class _Integrated:
    """The values matched on lines, integrated into a counter (items = rate x seconds). A log
    with no new value for `silent_after_s` is a fault: silence is not a rate."""

    def __init__(self, source: LogSource, clock: Callable[[], float],
                 silent_after_s: Optional[float] = None):
        self.source = source
        self.silent_after_s = silent_after_s
        self._regex = compile_user_pattern(source.pattern)
        self._clock = clock
        self._value: Optional[float] = None  # items/s, from the last matching line
        self._value_at: Optional[float] = None  # when that line was read
        self._count = 0.0
        self._at: Optional[float] = None

    def _lines(self) -> List[str]:
        raise NotImplementedError

    def read(self) -> Reading:
        now = self._clock()
        new = self._lines()
        if self._value is not None and self._at is not None:
            self._count += self._value * (now - self._at)
        for line in new:
            matches = list(self._regex.finditer(line))
            if matches:
                try:
                    value = float(matches[-1].group(1))
                except (TypeError, ValueError):
                    continue
                if not 0.0 <= value <= MAX_RATE_PER_S:  # NaN, inf, 1e308: no rate
                    raise SourceFault(f"{self._what()} says {matches[-1].group(1)[:40]!r} "
                                      f"items/s: not a rate (0 to {MAX_RATE_PER_S:g})")
                self._value, self._value_at = value, now
        self._at = now
        if self._value is None:
            raise SourceFault(f"no line of {self.source.path} has matched "
                              f"{self.source.pattern!r} yet",
                              hint="the workload writes its rate there every few seconds; "
                                   "check the pattern against a line of its log")
        assert self._value_at is not None
        if self.silent_after_s is not None and now - self._value_at > self.silent_after_s:
            raise SourceFault(f"{self._what()} has been silent for {now - self._value_at:.0f} s")
        return Reading(now, self._count, value_at=self._value_at)

    def _what(self) -> str:
        return "the log" if self.source.kind == "log" else f"the journal of {self.source.path}"


class LogRate(_Integrated):
    """Follows a log file; `read()` answers the integrated counter (a Reading)."""

    def __init__(self, source: LogSource, clock: Callable[[], float] = time.monotonic,
                 silent_after_s: Optional[float] = None):
        super().__init__(source, clock, silent_after_s)
        self._fd: Optional[int] = None
        self._inode: Optional[int] = None
        self._offset = 0
        self._partial = b""

    def _open(self, from_end: bool) -> None:
        try:
            fd = os.open(self.source.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as err:
            raise HardwareError(f"cannot read the log {self.source.path} ({err.strerror})",
                                hint="start the workload first; under systemd, the unit's "
                                     "sandbox hides home directories: sudo jetbench "
                                     f"install-service --log {self.source.path}") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise HardwareError(f"the log {self.source.path} is not a regular file")
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._inode = fd, st.st_ino
        self._offset = st.st_size if from_end else 0
        self._partial = b""

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _rotated(self) -> bool:
        try:
            st = os.stat(self.source.path)
        except OSError:
            return False  # gone for a moment (rotation in progress): keep the open file
        return st.st_ino != self._inode or st.st_size < self._offset

    def _lines(self) -> List[str]:
        if self._fd is None:
            self._open(from_end=True)
        elif self._rotated():
            self._open(from_end=False)
        assert self._fd is not None
        data = os.pread(self._fd, MAX_READ_BYTES, self._offset)
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()[-MAX_LINE_BYTES:]
        return [ln[-MAX_LINE_BYTES:].decode("utf-8", errors="replace") for ln in lines]

    def check(self) -> None:
        """Before the daemon starts tuning: the log can be opened and read."""
        self._open(from_end=True)


class JournalRate(_Integrated):
    """Follows a systemd unit's journal (`journalctl --unit UNIT --follow --output cat`, new
    lines only), read by a thread into a bounded queue."""

    def __init__(self, source: LogSource, clock: Callable[[], float] = time.monotonic,
                 silent_after_s: Optional[float] = None):
        super().__init__(source, clock, silent_after_s)
        self._proc: Optional[subprocess.Popen[bytes]] = None
        self._queue: Deque[str] = collections.deque(maxlen=10_000)
        self._lock = threading.Lock()

    def check(self) -> None:
        exe = shutil.which("journalctl")
        if exe is None:
            raise HardwareError("journalctl is not installed: no journal to read",
                                hint="give the workload's log file: log:PATH#regex:PATTERN")
        self._proc = subprocess.Popen(
            [exe, "--unit", self.source.path, "--follow", "--output", "cat", "--lines", "0",
             "--no-pager"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL)
        threading.Thread(target=self._follow, name="jetbench-journal", daemon=True).start()

    def _follow(self) -> None:
        """Lines in pieces of at most MAX_LINE_BYTES: a 600 MB line costs one piece's memory
        (its last piece is the line matched)."""
        assert self._proc is not None and self._proc.stdout is not None
        tail = b""
        while True:
            piece = self._proc.stdout.readline(MAX_LINE_BYTES)
            if not piece:
                return
            if not piece.endswith(b"\n"):
                tail = (tail + piece)[-MAX_LINE_BYTES:]
                continue
            line, tail = (tail + piece)[-MAX_LINE_BYTES:], b""
            with self._lock:
                self._queue.append(line.decode("utf-8", errors="replace"))

    def _lines(self) -> List[str]:
        if self._proc is not None and self._proc.poll() is not None:
            raise SourceFault(f"journalctl for {self.source.path} ended (exit "
                                f"{self._proc.returncode})")
        with self._lock:
            lines = list(self._queue)
            self._queue.clear()
        return lines

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


def open_log_rate(source: LogSource, silent_after_s: Optional[float] = None
                  ) -> Union[LogRate, JournalRate]:
    if source.kind == "log":
        return LogRate(source, silent_after_s=silent_after_s)
    return JournalRate(source, silent_after_s=silent_after_s)
