"""SCPI instruments, polled: the generic `MEAS:POW?` dialect and the Yokogawa WT310 family.

scpi: `*IDN?` once at open, then the power query every period (option `query`, default
`MEAS:POW?`). For instruments that do not offer watts, `vquery` and `iquery` (e.g.
`MEAS:VOLT?` and `MEAS:CURR?`) are read in turn and multiplied.

wt310 (WT210/WT310/WT330, the meters MLPerf Power uses): the numeric items are set up once
(U, I, P of element 1, ASCII, no headers), then `:NUMERIC:NORMAL:VALUE?` returns all three and
the third is the power. Not-a-number items (no input, over-range) read as None, never 0.
"""

from __future__ import annotations

import time
from typing import Optional

from .base import Reading, SourceFault
from .serial_meter import SerialMeter, parse_numbers


class ScpiMeter(SerialMeter):
    protocol = "scpi"
    default_baud = 9600
    default_period_s = 0.1

    def __init__(
        self,
        port: str,
        *,
        query: Optional[str] = None,
        vquery: Optional[str] = None,
        iquery: Optional[str] = None,
        **kwargs,
    ):
        super().__init__(port, **kwargs)
        if (vquery is None) != (iquery is None):
            raise ValueError("vquery and iquery go together")
        self.query = query or "MEAS:POW?"
        self.vquery = vquery
        self.iquery = iquery
        if vquery is not None:
            self.channel_unit = "V x A"

    def _setup(self) -> None:
        self.identity = self._query("*IDN?")

    def _value(self, command: str) -> Optional[float]:
        values = parse_numbers(self._query(command), self.name)
        return values[0]

    def read(self) -> Reading:
        t_a = time.monotonic()
        if self.vquery is not None and self.iquery is not None:
            volts = self._value(self.vquery)
            amps = self._value(self.iquery)
            watts = None if volts is None or amps is None else volts * amps
        else:
            watts = self._value(self.query)
        return Reading((t_a + time.monotonic()) * 0.5, (watts,))


WT310_SETUP = (
    ":COMMUNICATE:HEADER OFF",
    ":COMMUNICATE:VERBOSE OFF",
    ":NUMERIC:FORMAT ASCII",
    ":NUMERIC:NORMAL:NUMBER 3",
    ":NUMERIC:NORMAL:ITEM1 U,1",
    ":NUMERIC:NORMAL:ITEM2 I,1",
    ":NUMERIC:NORMAL:ITEM3 P,1",
)


class Wt310Meter(SerialMeter):
    protocol = "wt310"
    default_baud = 9600
    default_period_s = 0.25  # the WT310's default data update interval

    def __init__(self, port: str, *, query: Optional[str] = None, **kwargs):
        super().__init__(port, **kwargs)
        self.query = query or ":NUMERIC:NORMAL:VALUE?"

    def _setup(self) -> None:
        self.identity = self._query("*IDN?")
        for command in WT310_SETUP:
            self._write(command.encode("ascii") + b"\n")

    def read(self) -> Reading:
        t_a = time.monotonic()
        values = parse_numbers(self._query(self.query), self.name)
        if len(values) == 3:  # U, I, P as set up
            watts = values[2]
        elif len(values) == 1:  # a custom query for one item (`:NUMERIC:NORMAL:VALUE? 3`)
            watts = values[0]
        else:
            raise SourceFault("garbage", f"{self.name}: expected U,I,P, got {len(values)} items")
        return Reading((t_a + time.monotonic()) * 0.5, (watts,))
