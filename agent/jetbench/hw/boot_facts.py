"""What this boot's firmware was found to do, kept in the state directory for the rest of the boot.

A firmware ceiling is not in any file: AGX Orin's BPMP on JetPack 6 boots with the EMC capped at
its boot rate (2133 MHz against a 3199 MHz table) until NVIDIA's `nvphs` service lifts it, and
`rate` writes above it are clamped without an error. jetbench finds such a ceiling by reading the
rate back after a pin (profiles/apply.py) and records it here, keyed by the kernel's boot id
(`/proc/sys/kernel/random/boot_id`): a reboot (or `nvphs` and a reboot) forgets it. Board
detection reads it, so `info`, planning, `tune`, `sweep` and the daemon's spaces leave rates above
it out. Writing the file is the state directory's business (ownership/boot_facts.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from .fs import STATE_DIR, Root

BOOT_ID = "/proc/sys/kernel/random/boot_id"
FACTS_NAME = "boot-facts.json"
FACTS_PATH = f"{STATE_DIR}/{FACTS_NAME}"


@dataclass(frozen=True)
class EmcCeiling:
    hz: int  # the highest rate the firmware runs this boot
    asked_hz: int  # the rate that was asked when it was found
    found: str  # when (ISO 8601, UTC)
    why: str  # what is known of its cause


def boot_id(root: Root) -> Optional[str]:
    text = root.read(BOOT_ID, default="") or ""
    return text.strip() or None


def emc_ceiling(root: Root) -> Optional[EmcCeiling]:
    """The EMC ceiling recorded during this boot, or None (none found, another boot's, or a file
    that does not parse: a fact jetbench cannot trust is no fact)."""
    here = boot_id(root)
    if here is None:
        return None
    try:
        doc = json.loads(root.read(FACTS_PATH, default="") or "{}")
        if doc.get("boot_id") != here or "emc_ceiling_hz" not in doc:
            return None
        return EmcCeiling(int(doc["emc_ceiling_hz"]), int(doc["emc_asked_hz"]),
                          str(doc.get("found", "")), str(doc.get("why", "")))
    except (ValueError, TypeError, AttributeError, KeyError):
        return None
