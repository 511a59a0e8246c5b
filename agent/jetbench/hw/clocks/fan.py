"""Fan: pwm-fan `target_pwm` (`temp_control` 0 = manual), debugfs tegra_fan, or hwmon pwm1.

On JetPack 5/6 the `nvfancontrol` service owns `pwm1` and moves it back within seconds: while
it runs, a pinned fan speed does not hold. Pinning the fan therefore stops it first (a journalled
knob, hw/services.py), as NVIDIA's `jetson_clocks --fan` does; restore starts it again.
"""

from __future__ import annotations

from typing import List, Optional

from .. import services
from ..board import Board
from ..fs import Root
from .steps import write_if_changed
from .types import FanTarget, Step, Write


def read_pwm(root: Root, board: Board) -> Optional[int]:
    return root.read_int(board.fan.pwm, default=None) if board.fan else None


def plan(root: Root, board: Board, target: FanTarget) -> List[Step]:
    fan = board.fan
    if fan is None or target.pwm is None:
        return []
    writes = []
    if services.state(root, services.NVFANCONTROL) == services.ACTIVE:
        writes.append(Write(services.key(services.NVFANCONTROL), services.INACTIVE,
                            services.ACTIVE))
    writes += write_if_changed(root, fan.manual, 0) if fan.manual else []
    writes += write_if_changed(root, fan.pwm, target.pwm)
    return [Step("fan", "fan", tuple(writes))] if writes else []
