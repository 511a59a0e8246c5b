"""CSV lines pushed by microcontroller rigs (INA219/INA226 on an Arduino and the like).

Each line holds the columns named by the `columns` option (default `millis,mV,mA`): a time
column (`ms`/`millis`, `s`, `us`), and either a power column (`W`, `mW`, `uW`) or a voltage
(`V`, `mV`) and a current (`A`, `mA`, `uA`); `-` ignores a column. Lines are timestamped on
arrival with the host's monotonic clock; lines that arrive together are spread back in time by
the device's own time column, so a burst does not collapse onto one instant. Blank lines
(some sketches print one after every reading) are skipped: they are not readings, nor faults.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Deque, List, Optional, Sequence, Tuple, Union

from ...errors import UsageError
from .base import Reading, SourceFault
from .serial_meter import SerialMeter, parse_numbers

_UNITS = {
    "ms": ("t", 1e-3), "millis": ("t", 1e-3), "s": ("t", 1.0), "us": ("t", 1e-6),
    "micros": ("t", 1e-6),
    "w": ("p", 1.0), "mw": ("p", 1e-3), "uw": ("p", 1e-6),
    "v": ("v", 1.0), "mv": ("v", 1e-3),
    "a": ("i", 1.0), "ma": ("i", 1e-3), "ua": ("i", 1e-6),
    "-": ("-", 0.0), "_": ("-", 0.0),
}


def parse_columns(text: str) -> Tuple[Tuple[str, float], ...]:
    """'millis,mV,mA' -> ((role, scale), ...); roles t, p, v, i, - (ignored)."""
    cols = []
    for word in text.split(","):
        key = word.strip().lower()
        if key not in _UNITS:
            raise UsageError(
                f"unknown stream column {word.strip()!r}",
                hint="columns are ms|millis|s|us, W|mW|uW, V|mV, A|mA|uA or - (ignored)",
            )
        cols.append(_UNITS[key])
    roles = [r for r, _ in cols]
    if any(roles.count(r) > 1 for r in "tpvi"):
        raise UsageError(f"a stream column appears twice: {text!r}")
    if "p" not in roles and not ("v" in roles and "i" in roles):
        raise UsageError(f"stream columns need W, or V and A: {text!r}")
    return tuple(cols)


class StreamMeter(SerialMeter):
    protocol = "stream"
    pushed = True
    default_baud = 115200
    default_period_s = 0.1  # unknown until measured; set ?interval= to the rig's rate

    def __init__(self, port: str, *, columns: str = "millis,mV,mA", **kwargs):
        super().__init__(port, **kwargs)
        self.columns = parse_columns(columns)
        self.columns_text = columns
        roles = [r for r, _ in self.columns]
        self.channel_unit = "W" if "p" in roles else "V x A"
        self._pending: Deque[Union[Tuple[Optional[float], Optional[float]], SourceFault]] = (
            deque()
        )
        self._last_t = -1.0

    def open(self) -> None:
        self._pending.clear()
        super().open()

    def read(self) -> Reading:
        if not self._pending:
            self._receive()
        item = self._pending.popleft()
        if isinstance(item, SourceFault):
            raise item
        t_s, watts = item
        return Reading(t_s, (watts,))  # type: ignore[arg-type]

    def _receive(self) -> None:
        """Wait for at least one line, then take every complete line already received.
        Blank lines are skipped, not faults: some rigs print one after every reading."""
        deadline = time.monotonic() + self.timeout_s
        lines: List[str] = []
        blank = False
        while not lines:
            try:
                line = self._line(max(0.0, deadline - time.monotonic()))
            except SourceFault:
                if not blank:
                    raise
                raise SourceFault("stall", f"{self.name}: only blank lines for "
                                           f"{self.timeout_s:g} s") from None
            while True:
                if line.strip():
                    lines.append(line)
                else:
                    blank = True
                if b"\n" not in self._buf:
                    break
                line = self._line()
        t_now = time.monotonic()
        parsed: List[Union[Tuple[Optional[float], Optional[float]], SourceFault]] = []
        for line in lines:
            try:
                parsed.append(self._parse(line))
            except SourceFault as fault:
                parsed.append(fault)
        # timestamps: the newest line is "now"; earlier ones are back-dated by device time
        good = [p for p in parsed if not isinstance(p, SourceFault)]
        dev_last = next((d for d, _ in reversed(good) if d is not None), None)
        for item in parsed:
            if isinstance(item, SourceFault):
                self._pending.append(item)
                continue
            dev_t, watts = item
            t = t_now
            if dev_t is not None and dev_last is not None and 0 <= dev_last - dev_t < 5.0:
                t = t_now - (dev_last - dev_t)
            t = max(t, self._last_t)
            self._last_t = t
            self._pending.append((t, watts))

    def _parse(self, line: str) -> Tuple[Optional[float], Optional[float]]:
        values: Sequence[Optional[float]] = parse_numbers(line, self.name)
        if len(values) != len(self.columns):
            raise SourceFault(
                "garbage", f"{self.name}: {len(values)} fields, expected "
                f"{len(self.columns)} ({self.columns_text}): {line[:40]!r}"
            )
        got = {}
        for (role, scale), value in zip(self.columns, values):
            if role != "-":
                got[role] = None if value is None else value * scale
        if "p" in got:
            watts = got["p"]
        else:
            v, i = got.get("v"), got.get("i")
            watts = None if v is None or i is None else v * i
        return got.get("t"), watts
