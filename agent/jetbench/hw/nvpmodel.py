"""The power mode (nvpmodel), read only: jetbench never switches modes (that needs NVIDIA's tool
and may reboot the board).

`/var/lib/nvpmodel/status` holds the current mode as `pmode:0002` (possibly with `fmode:...`);
`/etc/nvpmodel.conf` (a link to the board's file) names the modes in lines
`< POWER_MODEL ID=2 NAME=MAXN_SUPER >`. Two runs in different modes are not comparable, so the
mode goes into `info`, `monitor`, `status`, the metrics and every result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Optional

from ..documents import PowerModeDoc
from .fs import Root

STATUS_FILE = "/var/lib/nvpmodel/status"
CONF_FILE = "/etc/nvpmodel.conf"

_PMODE = re.compile(r"pmode\s*:\s*(\d+)", re.IGNORECASE)
_MODEL_LINE = re.compile(r"<\s*POWER_MODEL\b([^>]*)>", re.IGNORECASE)
_ATTR = re.compile(r"(\w+)\s*=\s*(\S+)")


@dataclass(frozen=True)
class PowerMode:
    id: int
    name: Optional[str]  # None when the conf file does not name this id

    @property
    def text(self) -> str:
        return f"{self.id} {self.name}" if self.name else f"{self.id} (unnamed)"

    def to_dict(self) -> PowerModeDoc:
        return {"id": self.id, "name": self.name, "text": self.text}


def parse_status(text: str) -> Optional[int]:
    """'pmode:0002 fmode:quiet' -> 2; None when there is no pmode."""
    match = _PMODE.search(text)
    return int(match.group(1)) if match else None


def parse_mode_names(conf: str) -> Dict[int, str]:
    """Mode id -> name from the POWER_MODEL lines of an nvpmodel.conf."""
    names: Dict[int, str] = {}
    for line in _MODEL_LINE.finditer(conf):
        attrs = {k.upper(): v for k, v in _ATTR.findall(line.group(1))}
        if attrs.get("ID", "").isdigit() and "NAME" in attrs:
            names[int(attrs["ID"])] = attrs["NAME"]
    return names


def read_power_mode(root: Root) -> Optional[PowerMode]:
    """The current mode, or None on a board without nvpmodel (TX1, a PC)."""
    mode = parse_status(root.read(STATUS_FILE, default=""))
    if mode is None:
        return None
    return PowerMode(mode, parse_mode_names(root.read(CONF_FILE, default="")).get(mode))


def mode_doc(root: Root) -> Optional[PowerModeDoc]:
    """`read_power_mode` as the dict every document carries (`board.power_mode`)."""
    mode = read_power_mode(root)
    return mode.to_dict() if mode else None
