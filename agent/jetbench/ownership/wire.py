"""The control socket's protocol: one JSON object per line each way.

Requests: `{"cmd": "status"}`, `{"cmd": "readings"}`, `{"cmd": "pin"}`, `{"cmd": "restore"}`,
`{"cmd": "apply", "profile": "NAME"}`, `{"cmd": "maxperf", "fan": false}`, and
`{"cmd": "lease", "who": "measure"}` (the board is lent to this connection until it closes).
Replies: `{"ok": true, ...}` or `{"ok": false, "error": CODE, "message": "..."}`. Everything a
client sends is checked here, as data, before the daemon acts on it: the size of a line, UTF-8,
JSON (nesting at most MAX_DEPTH, no duplicate keys), the keys and their types, and profile names
(a name from the profile directories, never a path).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

MAX_LINE_BYTES = 4096  # a request is a few dozen bytes; anything longer is not one
MAX_DEPTH = 4  # requests are flat objects; deeper JSON is refused before it is parsed
COMMANDS = {"status": (), "readings": (), "pin": (), "restore": (), "apply": ("profile",),
            "maxperf": ("fan",), "lease": ("who",)}
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
WHO = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.:/-]{0,63}\Z")  # a lease holder's own description

# Error codes in replies (stable: scripts match on them).
BAD_REQUEST = "bad_request"
TOO_LONG = "line_too_long"
UNKNOWN_COMMAND = "unknown_command"
FAILED = "failed"
BUSY = "busy"
# The event a lease holder is sent when the daemon takes the board back.
REVOKED = "revoked"

# Where the daemon listens by default, and the unit that runs it.
DEFAULT_SOCKET = Path("/run/jetbench/jetbench.sock")
SERVICE = "jetbench.service"


class ProtocolError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Request:
    cmd: str
    profile: Optional[str] = None
    fan: bool = False
    who: Optional[str] = None


def nesting_depth(text: str) -> int:
    """The deepest [ or { nesting of a JSON text (strings skipped), in one linear pass: the
    parser recurses per level, so depth is checked before it runs."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _no_duplicates(pairs: List[Tuple[str, object]]) -> Dict[str, object]:
    doc: Dict[str, object] = {}
    for key, value in pairs:
        if key in doc:
            raise ProtocolError(BAD_REQUEST, f"duplicate key {key[:40]!r} in the request")
        doc[key] = value
    return doc


def parse_request(line: bytes) -> Request:
    """One request line (without its newline) -> Request, or ProtocolError saying why not."""
    if len(line) > MAX_LINE_BYTES:
        raise ProtocolError(TOO_LONG, f"request longer than {MAX_LINE_BYTES} bytes")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(BAD_REQUEST, "request is not UTF-8") from None
    if nesting_depth(text) > MAX_DEPTH:
        raise ProtocolError(BAD_REQUEST, f"request nested deeper than {MAX_DEPTH} levels "
                                         '(a request is a flat object: {"cmd": "status"})')
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except ProtocolError:
        raise
    except (ValueError, RecursionError) as err:
        raise ProtocolError(BAD_REQUEST, f"request is not JSON ({err})") from None
    if not isinstance(doc, dict):
        raise ProtocolError(BAD_REQUEST, 'a request is a JSON object: {"cmd": "status"}')
    cmd = doc.get("cmd")
    if not isinstance(cmd, str):
        raise ProtocolError(BAD_REQUEST, 'missing "cmd" (a string)')
    if cmd not in COMMANDS:
        raise ProtocolError(UNKNOWN_COMMAND, f"unknown command {cmd[:40]!r} "
                                             f"(commands: {', '.join(sorted(COMMANDS))})")
    allowed = {"cmd", *COMMANDS[cmd]}
    extra = sorted(k for k in doc if k not in allowed)
    if extra:
        raise ProtocolError(BAD_REQUEST, f"{cmd}: unexpected key {extra[0][:40]!r}")
    if cmd == "maxperf":
        fan = doc.get("fan", False)
        if not isinstance(fan, bool):
            raise ProtocolError(BAD_REQUEST, 'maxperf: "fan" must be true or false')
        return Request(cmd, fan=fan)
    if cmd == "lease":
        who = doc.get("who", "client")
        if not isinstance(who, str) or not WHO.match(who):
            raise ProtocolError(BAD_REQUEST, 'lease: "who" must be a short description '
                                             '(letters, digits, spaces, . _ : / -)')
        return Request(cmd, who=who)
    if cmd != "apply":
        return Request(cmd)
    name = doc.get("profile")
    if not isinstance(name, str) or not PROFILE_NAME.match(name):
        raise ProtocolError(BAD_REQUEST, "apply: \"profile\" must be a profile name (letters, "
                                         "digits, . _ -; no paths), see `jetbench profiles`")
    return Request(cmd, name)


def finite(value: Any) -> Any:  # any JSON-shaped document: walked, not typed
    """`value` with every float that is not finite (NaN, inf: not JSON, and no figure) made
    None, through dicts, lists and tuples."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def encode(doc: Mapping[str, object]) -> bytes:
    """One reply line: strict JSON (a NaN would be no JSON at all: said as null)."""
    return json.dumps(finite(dict(doc)), separators=(",", ":"), default=str,
                      allow_nan=False).encode("utf-8") + b"\n"


def error_reply(code: str, message: str) -> Dict[str, object]:
    return {"ok": False, "error": code, "message": message}
