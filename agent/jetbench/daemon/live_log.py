"""`--throughput-from log:PATH#regex:PATTERN`: the live workload's rate from the lines it writes
to a log (DeepStream's `**PERF:  29.98 (29.95)` every few seconds, an application's own
`fps=` lines), for `daemon --tune`.

PATTERN is `measure --cmd`'s `regex:` (RE2, exactly one group: a number in items per second,
the last match on a line winning). Only lines written after the daemon starts count. Each value
holds from the read that found it until a newer one is found, so the file's values integrate
into a counter (items = rate x seconds) that the windows read as they read a Prometheus
counter: a window's rate is the time-weighted mean of the values it saw. A log that is rotated
(a new file at the path, or one shorter than what was read) is read from its beginning.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Optional

from ..errors import HardwareError, UsageError
from ..workload.command.throughput_from import compile_user_pattern
from .live_rate import Reading

MAX_READ_BYTES = 1 << 20  # read at most this much of the log per reading
MAX_LINE_BYTES = 64 * 1024  # a longer "line" is cut: no pattern runs over megabytes


@dataclass(frozen=True)
class LogSource:
    """`log:PATH#regex:PATTERN`, parsed (nothing is opened)."""

    path: str
    pattern: str

    def text(self) -> str:
        return f"log:{self.path}#regex:{self.pattern}"


def parse_log_source(text: str, option: str = "--throughput-from") -> LogSource:
    """'log:/var/log/app.log#regex:fps=([0-9.]+)' -> its parts; UsageError otherwise."""
    body = text[len("log:"):] if text.startswith("log:") else ""
    path, sep, pattern = body.partition("#regex:")
    if not sep or not path or not pattern:
        raise UsageError(f"{option} {text!r}: expected log:PATH#regex:PATTERN",
                         hint=r"e.g. log:/tmp/ds.log#regex:\*\*PERF:\s+([0-9.]+)")
    groups = compile_user_pattern(pattern).groups
    if groups != 1:
        raise UsageError(f"{option} {text!r}: the pattern needs exactly one group, the number "
                         f"of items per second (it has {groups})")
    return LogSource(path, pattern)


class LogRate:
    """Follows a log file; `read()` answers the integrated counter (a Reading)."""

    def __init__(self, source: LogSource, clock: Callable[[], float] = time.monotonic):
        self.source = source
        self._regex = compile_user_pattern(source.pattern)
        self._clock = clock
        self._fd: Optional[int] = None
        self._inode: Optional[int] = None
        self._offset = 0
        self._partial = b""
        self._value: Optional[float] = None  # items/s, from the last matching line
        self._count = 0.0
        self._at: Optional[float] = None

    def _open(self, from_end: bool) -> None:
        try:
            fd = os.open(self.source.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as err:
            raise HardwareError(f"cannot read the log {self.source.path} "
                                f"({err.strerror})") from None
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000) == 0o100000:
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

    def _lines(self) -> list:
        assert self._fd is not None
        data = os.pread(self._fd, MAX_READ_BYTES, self._offset)
        self._offset += len(data)
        text = self._partial + data
        lines = text.split(b"\n")
        self._partial = lines.pop()[-MAX_LINE_BYTES:]
        return [ln[-MAX_LINE_BYTES:].decode("utf-8", errors="replace") for ln in lines]

    def read(self) -> Reading:
        now = self._clock()
        if self._fd is None:
            self._open(from_end=True)
        elif self._rotated():
            self._open(from_end=False)
        if self._value is not None and self._at is not None:
            self._count += self._value * (now - self._at)
        for line in self._lines():
            matches = list(self._regex.finditer(line))
            if matches:
                try:
                    self._value = max(0.0, float(matches[-1].group(1)))
                except (TypeError, ValueError):
                    continue
        self._at = now
        if self._value is None:
            raise HardwareError(f"no line of {self.source.path} has matched "
                                f"{self.source.pattern!r} yet",
                                hint="the workload writes its rate there every few seconds; "
                                     "check the pattern against a line of the log")
        return Reading(now, self._count)

    def check(self) -> None:
        """Before the daemon starts tuning: the log can be opened and read."""
        self._open(from_end=True)
