"""What `daemon --tune` held, kept in the state directory across restarts: the point it held
and the window that chose it, keyed by what was tuned (the source, the constraints, the knobs,
the board). A restarted daemon starts its first window there (the window re-checks it) rather
than exploring again from the board's top."""

from __future__ import annotations

import json
import time
from typing import Dict, Mapping, Optional

from ..hw.fs import STATE_DIR, Root
from .statedir import keep_state_file

MEMORY_NAME = "tune-held.json"
MEMORY_PATH = f"{STATE_DIR}/{MEMORY_NAME}"


def remember(root: Root, key: str, point_hz: Mapping[str, int],
             figures: Mapping[str, Optional[float]]) -> bool:
    """Keep the held point for `key`; False where the state directory cannot take it (full,
    read-only): the tuning goes on, it only will not be remembered."""
    doc = {"key": key, "point_hz": dict(point_hz), "figures": dict(figures),
           "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return keep_state_file(root, MEMORY_NAME, json.dumps(doc, indent=1) + "\n")


def recall(root: Root, key: str) -> Optional[Dict[str, int]]:
    """The point held for `key` before a restart, or None (none, another tuning's, or a file
    that does not parse: nothing to trust)."""
    try:
        doc = json.loads(root.read(MEMORY_PATH, default="") or "{}")
        if not isinstance(doc, dict) or doc.get("key") != key:
            return None
        point = doc.get("point_hz")
        if not isinstance(point, dict) or not all(
                isinstance(k, str) and type(v) is int and v > 0 for k, v in point.items()):
            return None
        return {str(k): int(v) for k, v in point.items()}
    except (ValueError, TypeError):
        return None
