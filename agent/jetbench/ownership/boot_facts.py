"""Recording what this boot's firmware was found to do (hw/boot_facts.py reads it): a firmware
ceiling on the EMC, found by reading the rate back after a pin, kept for the rest of the boot."""

from __future__ import annotations

import json
import time

from ..hw.boot_facts import FACTS_NAME, EmcCeiling, boot_id
from ..hw.fs import Root
from .statedir import keep_state_file


def record_emc_ceiling(root: Root, ceiling: EmcCeiling) -> bool:
    """Keep `ceiling` for this boot; False where the kernel gives no boot id to key it by or
    the state directory cannot take it (full, read-only): it is then said for this run only."""
    here = boot_id(root)
    if here is None:
        return False
    doc = {"boot_id": here, "emc_ceiling_hz": ceiling.hz, "emc_asked_hz": ceiling.asked_hz,
           "found": ceiling.found or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "why": ceiling.why}
    return keep_state_file(root, FACTS_NAME, json.dumps(doc, indent=1) + "\n")
