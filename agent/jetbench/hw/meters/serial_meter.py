"""The common part of external meters on a serial port (pyserial).

A meter is opened from a port URL (`/dev/ttyUSB0`, `socket://127.0.0.1:5025`, `loop://`) with
`serial.serial_for_url`, never with hard-coded settings. Every failure while reading becomes a
`SourceFault` the sampler counts: no bytes before the timeout is a stall, a line cut short is
partial, an unparsable reply is garbage, an instrument error string is error_reply, and an I/O
error on the port is a disconnect (the sampler closes and reopens the port).
"""

from __future__ import annotations

import math
import re
import time
from typing import List, Optional, Sequence, Tuple, Type

from ...errors import HardwareError, PermissionDenied
from .base import Channel, SourceFault, Total

# Port reads wake up this often while waiting, so a stall is noticed within its timeout.
_POLL_S = 0.05
# SCPI "not a number" (9.91E37) and over-range values: not a reading.
_SCPI_NAN = 9.0e37
_ERROR_REPLY = re.compile(r'^\s*[-+]?\d+\s*,\s*"')


def _serial():  # pyserial is a hard dependency, but import it only when a meter is used
    import serial

    return serial


def _port_errors() -> Tuple[Type[BaseException], ...]:
    """What a port that went away raises: pyserial's SerialException, OSError, and on POSIX
    termios.error, which pyserial lets through from tcflush (an unplugged USB adapter or a
    closed pty answers EIO there) and which is not an OSError."""
    try:
        import termios
    except ImportError:  # not POSIX
        return (_serial().SerialException, OSError)
    return (_serial().SerialException, OSError, termios.error)


class SerialMeter:
    """Base class: port handling, line reading, fault mapping. Subclasses implement `_setup`
    (once per open) and `read`."""

    protocol = "serial"
    pushed = False
    default_baud = 9600
    default_period_s = 0.1
    channel_name = "P"
    channel_unit = "W"
    accuracy_spec: Optional[str] = None  # the spec's accuracy= option (accuracy.py reads it)

    def __init__(
        self,
        port: str,
        *,
        baud: Optional[int] = None,
        timeout_s: float = 1.0,
        interval_s: Optional[float] = None,
    ):
        self.port = port
        self.baud = baud or self.default_baud
        self.timeout_s = timeout_s
        self.period_s = interval_s or self.default_period_s
        self.name = f"{self.protocol}:{port}"
        self.identity: Optional[str] = None
        self._ser = None
        self._buf = bytearray()
        self._resync = False

    # -- PowerSource --------------------------------------------------------------------------
    def channels(self) -> Sequence[Channel]:
        return (Channel(self.channel_name, self.name, "external", unit=self.channel_unit),)

    def total(self) -> Optional[Total]:
        return Total(self.channel_name, "channel", (self.channel_name,), "external")

    def open(self) -> None:
        serial = _serial()
        self.close()
        try:
            self._ser = serial.serial_for_url(
                self.port, baudrate=self.baud, timeout=min(self.timeout_s, _POLL_S),
                write_timeout=self.timeout_s,
            )
        except serial.SerialException as err:
            text = str(err)
            if "Permission denied" in text or "Errno 13" in text:
                raise PermissionDenied(
                    f"cannot open the meter port ({text})", path=self.port,
                    hint="add yourself to the dialout group (or install udev/ rules)",
                ) from err
            raise HardwareError(
                f"cannot open the meter port ({text})", path=self.port,
                hint="check the cable and the PORT in --meter PROTOCOL:PORT",
            ) from err
        self._buf.clear()
        self._resync = False
        try:
            self._setup()
        except SourceFault as fault:
            self.close()
            raise HardwareError(
                f"the meter on {self.port} did not answer its set-up ({fault.kind}: {fault})",
                path=self.port, hint="check the protocol, the baud rate (?baud=) and the cable",
            ) from fault

    def close(self) -> None:
        ser, self._ser = self._ser, None
        if ser is not None:
            try:
                ser.close()
            except Exception:  # a port that vanished may fail to close; it is gone either way
                pass

    def _setup(self) -> None:
        pass

    # -- I/O helpers --------------------------------------------------------------------------
    def _port(self):
        if self._ser is None:
            raise SourceFault("disconnect", f"{self.name} is not open", reopen=True)
        return self._ser

    def _write(self, data: bytes) -> None:
        try:
            self._port().write(data)
        except _port_errors() as err:
            raise SourceFault("disconnect", f"{self.name}: write failed ({err})",
                              reopen=True) from err

    def _flush_input(self) -> None:
        """Drop stale input before a query, so replies stay in step with queries."""
        self._buf.clear()
        self._resync = False
        try:
            self._port().reset_input_buffer()
        except _port_errors() as err:
            raise SourceFault("disconnect", f"{self.name}: {err}", reopen=True) from err

    def _fill(self) -> int:
        """Read what the port has (waiting up to the poll interval). Returns bytes added."""
        ser = self._port()
        try:
            n = ser.in_waiting
            data = ser.read(n if n > 0 else 1)
        except _port_errors() as err:
            raise SourceFault("disconnect", f"{self.name}: read failed ({err})",
                              reopen=True) from err
        self._buf.extend(data)
        return len(data)

    def _line(self, timeout_s: Optional[float] = None) -> str:
        """The next complete line (without CR/LF). Stall or partial after the timeout."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                raw = bytes(self._buf[:i])
                del self._buf[: i + 1]
                if self._resync:  # the rest of a line cut short earlier: not a reading
                    self._resync = False
                    continue
                return raw.decode("ascii", errors="replace").strip("\r\x00 ")
            if time.monotonic() >= deadline:
                if self._buf:
                    cut = bytes(self._buf[:40])
                    self._buf.clear()
                    self._resync = True
                    raise SourceFault("partial", f"{self.name}: incomplete line {cut!r}")
                raise SourceFault("stall", f"{self.name}: no data for {self.timeout_s:g} s")
            self._fill()

    def _exact(self, n: int) -> bytes:
        """Exactly n bytes (binary frames). Stall or partial after the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while len(self._buf) < n:
            if time.monotonic() >= deadline:
                got = len(self._buf)
                self._buf.clear()
                if got:
                    raise SourceFault("partial", f"{self.name}: {got} of {n} bytes")
                raise SourceFault("stall", f"{self.name}: no data for {self.timeout_s:g} s")
            self._fill()
        frame = bytes(self._buf[:n])
        del self._buf[:n]
        return frame

    def _query(self, command: str) -> str:
        self._flush_input()
        self._write(command.encode("ascii") + b"\n")
        reply = self._line()
        if _ERROR_REPLY.match(reply):
            raise SourceFault("error_reply", f"{self.name}: {command} -> {reply}")
        return reply


def parse_numbers(reply: str, name: str) -> Tuple[Optional[float], ...]:
    """'1.23E+00,4.5' -> (1.23, 4.5); NAN/INF/9.91E37 -> None; anything else is garbage."""
    words = [w for w in re.split(r"[,;\s]+", reply.strip()) if w]
    if not words:
        raise SourceFault("garbage", f"{name}: empty reply")
    out: List[Optional[float]] = []
    for word in words:
        try:
            value = float(word)
        except ValueError:
            if word.upper().lstrip("+-") in ("NAN", "INF", "OL", "----"):
                out.append(None)
                continue
            raise SourceFault("garbage", f"{name}: not a number: {reply[:40]!r}") from None
        out.append(None if math.isnan(value) or abs(value) >= _SCPI_NAN else value)
    return tuple(out)
