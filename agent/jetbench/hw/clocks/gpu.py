"""GPU clock: devfreq min/max (L4T R28+, Thor's gpu-gpc) or the debugfs clock override (L4T R24),
and railgating (`railgate_enable`, or the GPU PCI device's runtime PM on Thor). Other GPU-side
clocks (Thor's gpu-nvd) are read, and pinned only at their own max beside a GPU pinned at max
(`GpuTarget.side_at_max`: jetson_clocks pins every GPU devfreq node at its max)."""

from __future__ import annotations

from dataclasses import replace
from typing import List, Optional

from ...units import format_hz
from ..board import Board
from ..fs import Root
from .steps import ordered_min_max, write_if_changed
from .types import ClockReading, GpuTarget, Step, Write


def read(root: Root, board: Board) -> List[ClockReading]:
    gpu = board.gpu
    if gpu is None:
        return []
    cur = known_hz(root.read_int(gpu.cur_freq, default=None))
    if gpu.kind == "devfreq":
        unit = gpu.hz_per_unit
        main = _devfreq_reading(root, "gpu", gpu.name, gpu.control, unit, gpu.available_hz)
        side = [_devfreq_reading(root, SIDE_DOMAIN, name, node, unit, None)
                for name, node in gpu.side_clocks]
        return [main] + side
    locked = root.read(f"{gpu.control}/state", default="0") == "1"
    # R24 jetson_clocks on a tree without override.gbus/max writes an empty rate (EINVAL),
    # then turns the override on at rate 0: the pin's rate is unknown, not 0 Hz.
    rate = known_hz(root.read_int(f"{gpu.control}/rate", default=None))
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


SIDE_DOMAIN = "gpu-side"  # a second GPU-side clock: shown, never pinned
# JetPack 6.2's Super modes (and their BPMP firmware) exist on Orin Nano and Orin NX only.
SUPER_FAMILIES = ("orin-nano", "orin-nano-super")
OTHER_CAP_HINT = (
    "a GPU that reads back below its table's top ({top}) is held there by another agent "
    "(nvpmodel's mode, a thermal cap, the firmware)")
FIRMWARE_CAP_HINT = (
    "a GPU that reads back below its table's top ({top}) is capped by the BPMP firmware: an old "
    "BPMP firmware under JetPack 6.2's Super device tree keeps the old limit (flash the updated "
    "firmware), or another agent (nvpmodel, a thermal cap) holds the clock")


def known_hz(value: Optional[int]) -> Optional[int]:
    """A clock rate as read, or None where it is not one: no clock runs at 0 Hz (or below), so
    a 0 or unreadable rate is unknown, never shown as a frequency."""
    return value if value is not None and value > 0 else None


def _scaled(value: Optional[int], unit: int) -> Optional[int]:
    return known_hz(None if value is None else value * unit)


def _devfreq_reading(root: Root, domain: str, name: str, node: str, unit: int,
                     table: Optional[tuple]) -> ClockReading:
    if table is None:
        table = tuple(sorted(v * unit for v in set(
            root.read_ints(f"{node}/available_frequencies", default=[]))))
    return ClockReading(
        domain=domain,
        name=name,
        governor=root.read(f"{node}/governor", default=None),
        min_hz=_scaled(root.read_int(f"{node}/min_freq", default=None), unit),
        max_hz=_scaled(root.read_int(f"{node}/max_freq", default=None), unit),
        cur_hz=_scaled(root.read_int(f"{node}/cur_freq", default=None), unit),
        available_hz=table,
    )


def below_table_top(board: Board, readings: List[ClockReading]) -> List[str]:
    """After pinning the GPU at its table's top: a max_freq or running clock that stays below it
    is named (JetPack 6.2 Super tables without the updated BPMP firmware stay capped)."""
    gpu = board.gpu
    if gpu is None or gpu.kind != "devfreq" or not gpu.available_hz:
        return []
    top = max(gpu.available_hz)
    out = []
    for r in readings:
        if r.domain != "gpu":
            continue
        for what, value in (("max_freq", r.max_hz), ("the running clock", r.cur_hz)):
            if value is not None and value < top:
                cause = ("the BPMP firmware caps it (old BPMP firmware: the JetPack 6.2 Super "
                         "modes need the updated firmware flashed, not only the new device tree)"
                         if board.family in SUPER_FAMILIES else
                         "another agent holds it (nvpmodel's mode, a thermal cap, the firmware)")
                out.append(f"GPU {what} reads {format_hz(value)} after pinning, below the "
                           f"table's top {format_hz(top)}: {cause}")
    return out


def railgate_value(board: Board, allowed: bool) -> Optional[str]:
    """What the railgate knob holds for "may gate" (True) or "kept powered" (False)."""
    if board.gpu is None or board.gpu.railgate is None:
        return None
    keep_on, may_gate = board.gpu.railgate_values
    return may_gate if allowed else keep_on


def plan(root: Root, board: Board, target: GpuTarget) -> List[Step]:
    gpu = board.gpu
    if gpu is None:
        return []
    steps: List[Step] = []
    value = railgate_value(board, bool(target.railgate))
    if target.railgate is not None and gpu.railgate and value is not None:
        writes = write_if_changed(root, gpu.railgate, value)
        if writes:
            steps.append(Step("gpu", "gpu railgate " + ("on" if target.railgate else "off"),
                              tuple(writes)))
    if target.min_hz is None and target.max_hz is None:
        return steps
    if gpu.kind == "devfreq":
        writes = ordered_min_max(
            root, f"{gpu.control}/min_freq", f"{gpu.control}/max_freq", target.min_hz,
            target.max_hz, scale=gpu.hz_per_unit,
        )
    else:
        # The override pins one rate: the clock framework rounds it (read back as applied).
        rate = target.max_hz if target.max_hz is not None else target.min_hz
        writes = [
            Write(w.path, w.value, w.old, verify=False)
            for w in write_if_changed(root, f"{gpu.control}/rate", rate)
        ]
        writes += write_if_changed(root, f"{gpu.control}/state", 1)
    if target.side_at_max and gpu.kind == "devfreq":
        steps += _side_clocks_at_max(root, board)
    if writes:
        step = Step("gpu", f"gpu {gpu.name}", tuple(writes))
        if gpu.available_hz and target.max_hz == max(gpu.available_hz):
            hint = FIRMWARE_CAP_HINT if board.family in SUPER_FAMILIES else OTHER_CAP_HINT
            step = replace(step, readback_hint=hint.format(top=format_hz(max(gpu.available_hz))))
        steps.append(step)
    return steps


def _side_clocks_at_max(root: Root, board: Board) -> List[Step]:
    """Each GPU-side devfreq clock pinned min = max = its table's top (its max_freq where it
    lists none)."""
    assert board.gpu is not None
    steps = []
    for name, node in board.gpu.side_clocks:
        table = root.read_ints(f"{node}/available_frequencies", default=[])
        top = max(table) if table else root.read_int(f"{node}/max_freq", default=None)
        if top is None:
            continue
        writes = ordered_min_max(root, f"{node}/min_freq", f"{node}/max_freq", top, top)
        if writes:
            steps.append(Step("gpu", f"{SIDE_DOMAIN} {name} (at its max, beside the GPU)",
                              tuple(writes)))
    return steps


def gpu_load_pct(root: Root, board: Board) -> Optional[float]:
    """GPU utilisation (%): the device's `load` file (0..1000) where it has one, else NVML on
    the real machine where it answers (Thor), else None (never 0 for "unknown")."""
    gpu = board.gpu
    if gpu is None:
        return None
    if gpu.device:
        load = root.read_int(f"{gpu.device}/load", default=None)
        if load is not None:
            return load / 10.0
    if root.is_host:
        from ..nvml import gpu_utilisation_pct

        return gpu_utilisation_pct()
    return None
