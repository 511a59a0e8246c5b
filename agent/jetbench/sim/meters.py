"""Simulated instruments for the serial meter drivers, with fault injection.

Each instrument speaks one protocol (scpi, wt310, stream, um25c) on a pseudo-terminal
(`os.openpty`, reached through a symlink that is re-pointed when the "cable" is plugged back in,
as a udev symlink would be) or on a loopback TCP socket (`socket://127.0.0.1:PORT`), served by a
thread. Power comes from a constant or a function of `time.monotonic()`.

Faults: `stall(s)` (no answer for s seconds), `disconnect(down_s)` (hang up, come back after
down_s), `garbage(n)`, `partial(n)` (a reply cut short, then silence), `error(n)` (SCPI
`-113,"Undefined header"`). Everything measured here is simulated.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import tempfile
import threading
import time
import tty
from pathlib import Path
from typing import Callable, List, Optional, Union

PowerFn = Union[float, Callable[[float], float]]
GARBAGE_LINE = b"\x8f#@!~ \xff\xfe line noise\n"
ERROR_REPLY = b'-113,"Undefined header"\n'


class _PtyPort:
    """A pty whose slave is reached through `link`; `drop`/`reconnect` replace the pty."""

    def __init__(self, link: Path):
        self.link = link
        self.master = -1
        self.slave = -1
        self.reconnect()

    @property
    def url(self) -> str:
        return str(self.link)

    def reconnect(self) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)  # no echo, no line editing, before the driver opens it
        os.set_blocking(self.master, False)
        tmp = self.link.with_name(self.link.name + ".new")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.ttyname(self.slave), tmp)
        os.replace(tmp, self.link)

    def drop(self) -> None:
        # The link goes first, as /dev/ttyUSB0 does when the cable is pulled: left pointing at
        # the freed /dev/pts/N, a reopen during the outage could open the pty the kernel hands
        # out next under that number (another process's: seen as another meter's readings).
        if os.path.lexists(self.link):
            os.unlink(self.link)
        for fd in (self.master, self.slave):
            if fd >= 0:
                os.close(fd)
        self.master = self.slave = -1

    def recv(self, timeout: float) -> bytes:
        if self.master < 0:
            time.sleep(timeout)
            return b""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return b""
        try:
            return os.read(self.master, 4096)
        except (BlockingIOError, OSError):
            return b""

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        deadline = time.monotonic() + 0.2
        while view and self.master >= 0 and time.monotonic() < deadline:
            _, ready, _ = select.select([], [self.master], [], 0.05)
            if not ready:
                continue
            try:
                view = view[os.write(self.master, view):]
            except (BlockingIOError, OSError):
                return

    def close(self) -> None:
        self.drop()
        if os.path.lexists(self.link):
            os.unlink(self.link)


class _TcpPort:
    """A loopback listener serving one client at a time."""

    def __init__(self) -> None:
        self.port = 0
        self.listener: Optional[socket.socket] = None
        self.conn: Optional[socket.socket] = None
        self.reconnect()

    @property
    def url(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    def reconnect(self) -> None:
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", self.port))
        ls.listen(1)
        self.port = ls.getsockname()[1]
        self.listener = ls

    def drop(self) -> None:
        for s in (self.conn, self.listener):
            if s is not None:
                s.close()
        self.conn = self.listener = None

    def _accept(self, timeout: float) -> bool:
        if self.conn is not None:
            return True
        if self.listener is None:
            time.sleep(timeout)
            return False
        ready, _, _ = select.select([self.listener], [], [], timeout)
        if ready:
            self.conn, _ = self.listener.accept()
            self.conn.settimeout(0.2)
        return self.conn is not None

    def recv(self, timeout: float) -> bytes:
        if not self._accept(timeout):
            return b""
        assert self.conn is not None
        ready, _, _ = select.select([self.conn], [], [], timeout)
        if not ready:
            return b""
        try:
            data = self.conn.recv(4096)
        except OSError:
            data = b""
        if not data:  # the client went away: wait for the next one
            self.conn.close()
            self.conn = None
        return data

    def send(self, data: bytes) -> None:
        if self.conn is None and not self._accept(0.0):
            return
        try:
            self.conn.sendall(data)  # type: ignore[union-attr]
        except OSError:
            self.conn.close()  # type: ignore[union-attr]
            self.conn = None

    def close(self) -> None:
        self.drop()


class SimMeter:
    """Base: transport, serving thread, fault injection. Subclasses answer requests."""

    protocol = "?"
    pushed = False

    def __init__(
        self,
        power_w: PowerFn = 5.0,
        *,
        volts: float = 5.0,
        transport: str = "pty",
        directory: Optional[Union[str, os.PathLike]] = None,
    ):
        if transport not in ("pty", "tcp"):
            raise ValueError("transport is pty or tcp")
        self._power = power_w
        self.volts = volts
        self.transport = transport
        self.directory = directory
        self.received: List[bytes] = []  # every request, in order
        self.replies = 0
        self.connections = 1
        self._port: Union[_PtyPort, _TcpPort, None] = None
        self._tmpdir: Optional[tempfile.TemporaryDirectory] = None
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stall_until = 0.0
        self._disconnect_s: Optional[float] = None
        self._garbage = self._partial = self._errors = 0
        self.partial_pause_s = 0.5

    # -- control -----------------------------------------------------------------------------
    def power_w(self, t: Optional[float] = None) -> float:
        p = self._power
        return p(time.monotonic() if t is None else t) if callable(p) else float(p)

    @property
    def url(self) -> str:
        assert self._port is not None, "start() the instrument first"
        return self._port.url

    @property
    def spec(self) -> str:
        """What `--meter` takes for this instrument (without options)."""
        return f"{self.protocol}:{self.url}"

    def start(self) -> str:
        if self.transport == "pty":
            if self.directory is None:
                self._tmpdir = tempfile.TemporaryDirectory(prefix="jetbench-sim-")
                self.directory = self._tmpdir.name
            self._port = _PtyPort(Path(self.directory) / f"{self.protocol}-meter")
        else:
            self._port = _TcpPort()
        self._thread = threading.Thread(target=self._serve, name=f"sim-{self.protocol}",
                                         daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._port is not None:
            self._port.close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()

    def __enter__(self) -> SimMeter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stall(self, seconds: float) -> None:
        self._stall_until = time.monotonic() + seconds

    def disconnect(self, down_s: float = 0.2) -> None:
        self._disconnect_s = down_s

    def garbage(self, n: int = 1) -> None:
        with self._lock:
            self._garbage += n

    def partial(self, n: int = 1) -> None:
        with self._lock:
            self._partial += n

    def error(self, n: int = 1) -> None:
        with self._lock:
            self._errors += n

    # -- serving -----------------------------------------------------------------------------
    def _serve(self) -> None:
        buf = bytearray()
        port = self._port
        assert port is not None
        while not self._stop.is_set():
            if self._disconnect_s is not None:
                down, self._disconnect_s = self._disconnect_s, None
                port.drop()
                buf.clear()
                if self._stop.wait(down):
                    return
                port.reconnect()
                self.connections += 1
                continue
            if self.pushed:
                self._push(port)
                continue
            buf.extend(port.recv(0.02))
            for request in self._split(buf):
                self.received.append(request)
                reply = self.respond(request)
                if reply is not None:
                    self._send(port, reply)

    def _split(self, buf: bytearray) -> List[bytes]:
        """Complete requests taken out of buf (line protocols: one per line)."""
        out = []
        while True:
            i = buf.find(b"\n")
            if i < 0:
                return out
            out.append(bytes(buf[:i]).strip(b"\r "))
            del buf[: i + 1]

    def _send(self, port: Union[_PtyPort, _TcpPort], reply: bytes) -> None:
        if time.monotonic() < self._stall_until:
            return
        with self._lock:
            if self._errors and reply.endswith(b"\n"):
                self._errors -= 1
                reply = ERROR_REPLY
            elif self._garbage:
                self._garbage -= 1
                reply = self.garbage_reply()
            elif self._partial:
                self._partial -= 1
                port.send(reply[: max(1, len(reply) // 2)])
                self.stall(self.partial_pause_s)
                return
        port.send(reply)
        self.replies += 1

    def garbage_reply(self) -> bytes:
        return GARBAGE_LINE

    def respond(self, request: bytes) -> Optional[bytes]:
        raise NotImplementedError

    def _push(self, port: Union[_PtyPort, _TcpPort]) -> None:
        raise NotImplementedError


class ScpiSim(SimMeter):
    """A generic SCPI power meter. watts=False: an instrument that only measures V and I."""

    protocol = "scpi"

    def __init__(self, power_w: PowerFn = 5.0, *, watts: bool = True, **kwargs):
        super().__init__(power_w, **kwargs)
        self.watts = watts

    def respond(self, request: bytes) -> Optional[bytes]:
        cmd = request.decode("ascii", errors="replace").strip().upper()
        if cmd == "*IDN?":
            return b"JETBENCH,SIMULATED-SCPI-METER,0,1.0\n"
        if cmd in ("MEAS:POW?", "MEAS:POWER?", "MEASURE:POWER?") and self.watts:
            return f"{self.power_w():.9E}\n".encode()
        if cmd in ("MEAS:VOLT?", "MEASURE:VOLTAGE?"):
            return f"{self.volts:.9E}\n".encode()
        if cmd in ("MEAS:CURR?", "MEASURE:CURRENT?"):
            return f"{self.power_w() / self.volts:.9E}\n".encode()
        if cmd.endswith("?"):
            return ERROR_REPLY
        return None


class Wt310Sim(SimMeter):
    """A Yokogawa WT310: answers values only once its numeric items are set up."""

    protocol = "wt310"

    def __init__(self, power_w: PowerFn = 5.0, **kwargs):
        super().__init__(power_w, **kwargs)
        self.setup: List[str] = []

    def respond(self, request: bytes) -> Optional[bytes]:
        cmd = request.decode("ascii", errors="replace").strip().upper()
        if cmd == "*IDN?":
            return b"YOKOGAWA,WT310,SIM0001,F1.00\n"
        if cmd.startswith(":NUMERIC:NORMAL:VALUE?"):
            ready = ":NUMERIC:NORMAL:ITEM3 P,1" in self.setup
            p = self.power_w()
            u, i = self.volts, p / self.volts
            if cmd.endswith("? 3"):
                return (f"{p:.6E}\n" if ready else "NAN\n").encode()
            if not ready:
                return b"NAN,NAN,NAN\n"
            return f"{u:.6E},{i:.6E},{p:.6E}\n".encode()
        if cmd.endswith("?"):
            return ERROR_REPLY
        self.setup.append(cmd)
        return None


class StreamSim(SimMeter):
    """An INA219/INA226 rig printing CSV lines at a fixed rate."""

    protocol = "stream"
    pushed = True

    def __init__(self, power_w: PowerFn = 5.0, *, columns: str = "millis,mV,mA",
                 interval_s: float = 0.01, after_line: bytes = b"", **kwargs):
        super().__init__(power_w, **kwargs)
        self.columns = [c.strip() for c in columns.split(",")]
        self.after_line = after_line  # e.g. b"\r\n": a sketch that prints a blank line too
        self.interval_s = interval_s
        self._t0 = time.monotonic()
        self._next = self._t0
        self.lines = 0

    def line(self, t: float) -> bytes:
        p = self.power_w(t)
        amps = p / self.volts
        cells = []
        for col in self.columns:
            key = col.lower()
            cells.append({
                "millis": f"{int((t - self._t0) * 1000)}",
                "ms": f"{(t - self._t0) * 1000:.3f}",
                "s": f"{t - self._t0:.6f}",
                "w": f"{p:.9f}",
                "mw": f"{p * 1000:.6f}",
                "v": f"{self.volts:.6f}",
                "mv": f"{self.volts * 1000:.3f}",
                "a": f"{amps:.9f}",
                "ma": f"{amps * 1000:.6f}",
            }.get(key, "0"))
        return (",".join(cells) + "\n").encode() + self.after_line

    def _push(self, port: Union[_PtyPort, _TcpPort]) -> None:
        delay = self._next - time.monotonic()
        if delay > 0:
            port.recv(min(delay, 0.05))  # also drains anything the driver writes
            return
        self._next += self.interval_s
        if self._next < time.monotonic() - 1.0:
            self._next = time.monotonic()
        now = time.monotonic()
        if now < self._stall_until:
            return
        self._send(port, self.line(now))
        self.lines += 1


class Um25cSim(SimMeter):
    """An RDTech UM25C (or UM24C/UM34C with model=...): a 130-byte frame per 0xF0."""

    protocol = "um25c"
    MODEL_IDS = {"UM24C": 0x0963, "UM25C": 0x09C9, "UM34C": 0x0D4C}

    def __init__(self, power_w: PowerFn = 5.0, *, model: str = "UM25C", **kwargs):
        super().__init__(power_w, **kwargs)
        self.model = model
        self.protocol = model.lower()

    def frame(self) -> bytes:
        p = self.power_w()
        amps = p / self.volts
        if self.model == "UM25C":
            v_raw, i_raw = round(self.volts * 1000), round(amps * 10000)
        else:
            v_raw, i_raw = round(self.volts * 100), round(amps * 1000)
        head = struct.pack(">HHHI", self.MODEL_IDS[self.model], v_raw, i_raw, round(p * 1000))
        return head + bytes(128 - len(head)) + b"\x80\x68"

    def _split(self, buf: bytearray) -> List[bytes]:
        out = [b"\xf0" for b in buf if b == 0xF0]
        buf.clear()
        return out

    def respond(self, request: bytes) -> Optional[bytes]:
        return self.frame()

    def garbage_reply(self) -> bytes:
        return b"\xde\xad" + bytes(range(128))


def sim_for(protocol: str, power_w: PowerFn = 5.0, **kwargs) -> SimMeter:
    """The simulated instrument for a protocol name."""
    if protocol == "scpi":
        return ScpiSim(power_w, **kwargs)
    if protocol == "wt310":
        return Wt310Sim(power_w, **kwargs)
    if protocol == "stream":
        return StreamSim(power_w, **kwargs)
    if protocol in ("um25c", "um24c", "um34c"):
        return Um25cSim(power_w, model=protocol.upper(), **kwargs)
    raise ValueError(f"no simulated instrument for {protocol!r}")
