"""The simulated GPU's utilisation: what a simulated workload (`sim:NAME`) keeps busy.

A real GPU driver shows its utilisation in `<gpu device>/load` (0..1000). A simulated workload
sleeps for its batch's time instead of computing, so nothing on the machine is busy: it writes
the share of each batch its GPU would be busy into that file of the simulated tree, and the
simulated kernel's power model (kernel.py) takes it as the GPU's (and memory's) activity.
Boards without the file (Thor: utilisation comes from NVML there) are left as they are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

LOAD_FULL = 1000  # the load file's scale


def load_path(base: Path, gpu_device: Optional[str]) -> Optional[Path]:
    """The `load` file of the GPU in the simulated tree at `base`, if the board has one."""
    if not gpu_device:
        return None
    path = Path(base) / gpu_device.lstrip("/") / "load"
    return path if path.is_file() else None


def write_load(path: Optional[Path], busy: float) -> None:
    """Writes `busy` (0..1) as the file's 0..1000 (a reader that finds it empty for a moment
    keeps its last value: read_load answers None)."""
    if path is None:
        return
    value = round(min(max(busy, 0.0), 1.0) * LOAD_FULL)
    try:  # `echo VALUE > load`, as on a tree or a FUSE-served board (sim mount)
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, f"{value}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        return  # a board that refuses it keeps its own load: power follows the CPU only


def read_load(path: Path) -> Optional[float]:
    """The load file as a share (0..1), None when it cannot be read."""
    try:
        return min(max(int(path.read_text().split()[0]) / LOAD_FULL, 0.0), 1.0)
    except (OSError, ValueError, IndexError):
        return None
