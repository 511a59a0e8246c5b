"""Discrete GPUs through NVML (hw/nvml.py): per GPU, the power limit (a step of its own,
read back like a file) then the locked memory and graphics clocks (one blind step: NVML cannot
read a lock back, so it is written on every pin and reset on restore)."""

from __future__ import annotations

from typing import List, Sequence

from .. import nvml as nv
from ..board import Board
from .types import NvmlGpuTarget, Step, Write

LOCK_HINT = ("NVML accepted the lock but the GPU may still run lower: power or thermal capping, "
             "or an application-clocks setting (`nvidia-smi -q -d PERFORMANCE` says which)")


def plan(board: Board, targets: Sequence[NvmlGpuTarget]) -> List[Step]:
    gpus = {g.bus_id: g for g in board.nvml_gpus}
    steps: List[Step] = []
    for target in targets:
        gpu = gpus.get(target.bus_id)
        if gpu is None:
            continue
        if target.power_limit_mw is not None:
            path = nv.key(gpu.bus_id, nv.POWER_LIMIT)
            old = nv.read_setting(path)
            if old != str(target.power_limit_mw):
                steps.append(Step("gpu", f"{gpu.label} power limit",
                                  (Write(path, str(target.power_limit_mw), old),)))
        locks = []
        for setting, pair in ((nv.MEMORY_LOCK, target.memory_hz),
                              (nv.GPU_LOCK, target.graphics_hz)):
            if pair is not None:
                locks.append(Write(nv.key(gpu.bus_id, setting), nv.lock_value(*pair),
                                   nv.DEFAULT, verify=False))
        if locks:
            steps.append(Step("gpu", f"{gpu.label} locked clocks", tuple(locks),
                              readback_hint=LOCK_HINT, blind=True))
    return steps
