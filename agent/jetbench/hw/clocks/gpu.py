"""GPU clock: devfreq min/max (L4T R28+) or the debugfs clock override (L4T R24), railgating."""

from __future__ import annotations

from typing import List

from ..board import Board
from ..fs import Root
from .common import ClockReading, GpuTarget, Step, Write, ordered_min_max, write_if_changed


def read(root: Root, board: Board) -> List[ClockReading]:
    gpu = board.gpu
    if gpu is None:
        return []
    cur = root.read_int(gpu.cur_freq, default=None)
    if gpu.kind == "devfreq":
        return [
            ClockReading(
                domain="gpu",
                name=gpu.name,
                governor=root.read(f"{gpu.control}/governor", default=None),
                min_hz=root.read_int(f"{gpu.control}/min_freq", default=None),
                max_hz=root.read_int(f"{gpu.control}/max_freq", default=None),
                cur_hz=cur,
                available_hz=gpu.available_hz,
            )
        ]
    locked = root.read(f"{gpu.control}/state", default="0") == "1"
    rate = root.read_int(f"{gpu.control}/rate", default=None)
    return [
        ClockReading(
            domain="gpu",
            name=gpu.name,
            governor="override" if locked else None,
            min_hz=rate if locked else gpu.min_hz,
            max_hz=rate if locked else gpu.max_hz,
            cur_hz=cur,
            available_hz=gpu.available_hz,
            locked=locked,
        )
    ]


def plan(root: Root, board: Board, target: GpuTarget) -> List[Step]:
    gpu = board.gpu
    if gpu is None:
        return []
    steps: List[Step] = []
    if target.railgate is not None and gpu.railgate:
        writes = write_if_changed(root, gpu.railgate, 1 if target.railgate else 0)
        if writes:
            steps.append(Step("gpu", "gpu railgate " + ("on" if target.railgate else "off"),
                              tuple(writes)))
    if target.min_hz is None and target.max_hz is None:
        return steps
    if gpu.kind == "devfreq":
        writes = ordered_min_max(
            root, f"{gpu.control}/min_freq", f"{gpu.control}/max_freq", target.min_hz,
            target.max_hz,
        )
    else:
        # The override pins one rate: the clock framework rounds it (read back as applied).
        rate = target.max_hz if target.max_hz is not None else target.min_hz
        writes = [
            Write(w.path, w.value, w.old, verify=False)
            for w in write_if_changed(root, f"{gpu.control}/rate", rate)
        ]
        writes += write_if_changed(root, f"{gpu.control}/state", 1)
    if writes:
        steps.append(Step("gpu", f"gpu {gpu.name}", tuple(writes)))
    return steps
