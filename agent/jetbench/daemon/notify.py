"""sd_notify: the datagram protocol systemd's `Type=notify` and `WatchdogSec=` speak.

`$NOTIFY_SOCKET` names an AF_UNIX datagram socket (a path, or `@name` for the abstract
namespace); each message is newline-separated `KEY=VALUE` lines (`READY=1`, `STATUS=...`,
`WATCHDOG=1`, `STOPPING=1`, `RELOADING=1`). `$WATCHDOG_USEC` is the watchdog timeout; when
`$WATCHDOG_PID` is set it must be this process. Without `$NOTIFY_SOCKET` every call is a no-op.
"""

from __future__ import annotations

import os
import socket
from typing import Mapping, Optional

SEND_TIMEOUT_S = 1.0


def socket_address(value: str) -> str:
    """'@name' -> '\\0name' (abstract namespace); a path stays a path."""
    return "\0" + value[1:] if value.startswith("@") else value


def watchdog_period_s(env: Mapping[str, str], pid: Optional[int] = None) -> Optional[float]:
    """How often to send WATCHDOG=1 (half the timeout, as sd_watchdog_enabled advises), or
    None when systemd runs no watchdog for this process."""
    usec = env.get("WATCHDOG_USEC", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    owner = env.get("WATCHDOG_PID", "")
    if owner and owner != str(pid if pid is not None else os.getpid()):
        return None  # the watchdog belongs to another process (a wrapper, say)
    return int(usec) / 2e6


class Notifier:
    """Sends sd_notify messages. Constructing one touches nothing; a failed send is reported
    by the return value, never raised (systemd going away must not take the daemon down)."""

    def __init__(self, address: Optional[str]):
        self.address = socket_address(address) if address else None
        self._sock: Optional[socket.socket] = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Notifier:
        return cls(env.get("NOTIFY_SOCKET") or None)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, **fields: str) -> bool:
        """notify(READY="1", STATUS="...") -> one datagram 'READY=1\\nSTATUS=...'."""
        if self.address is None:
            return False
        text = "\n".join(f"{k}={str(v).replace(chr(10), ' ')}" for k, v in fields.items())
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                # A receiver that stops reading fills its queue and would block us for ever.
                self._sock.settimeout(SEND_TIMEOUT_S)
            self._sock.sendto(text.encode("utf-8", errors="replace"), self.address)
            return True
        except OSError:
            return False

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
