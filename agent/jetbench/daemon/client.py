"""Talking to a running daemon over its control socket (`jetbench status`, scripts, tests)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, Dict, Optional

from ..errors import HardwareError, PermissionDenied

MAX_REPLY_BYTES = 4 * 1024 * 1024


def request(path: Path, cmd: str, *, profile: Optional[str] = None,
            timeout_s: float = 10.0) -> Dict[str, Any]:
    """Send one request, return the reply document (`ok` says whether it succeeded)."""
    doc: Dict[str, Any] = {"cmd": cmd}
    if profile is not None:
        doc["profile"] = profile
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        try:
            sock.connect(str(path))
        except FileNotFoundError:
            raise HardwareError("the jetbench daemon is not running (no control socket)",
                                path=str(path),
                                hint="systemctl status jetbench; or pass --socket") from None
        except ConnectionRefusedError:
            raise HardwareError("the jetbench daemon is not running (stale control socket)",
                                path=str(path), hint="systemctl status jetbench") from None
        except PermissionError:
            raise PermissionDenied("permission denied on the control socket", path=str(path),
                                   hint="run with sudo, or add yourself to the jetbench group "
                                        "(then log in again)") from None
        sock.sendall(json.dumps(doc).encode() + b"\n")
        data = bytearray()
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_REPLY_BYTES:
                raise HardwareError("the daemon's reply is too long", path=str(path))
    except socket.timeout:
        raise HardwareError(f"the daemon did not answer within {timeout_s:g} s",
                            path=str(path)) from None
    except OSError as err:
        raise HardwareError(f"control socket error ({err.strerror or err})",
                            path=str(path)) from err
    finally:
        sock.close()
    try:
        reply = json.loads(data.decode("utf-8"))
    except ValueError:
        raise HardwareError("the daemon's reply is not JSON", path=str(path)) from None
    if not isinstance(reply, dict):
        raise HardwareError("the daemon's reply is not a JSON object", path=str(path))
    return reply
