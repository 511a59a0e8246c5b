"""The search space: the board's own clock tables within the power mode's caps, and the EMC
rates the clock framework really runs (probed once)."""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

from ...errors import UsageError
from ...hw.board import Board
from ...hw.fs import Root
from ...hw.mode_caps import read_mode_caps
from ...ownership import journal
from ...ownership.owner import borrow_board

# EMC candidates where the kernel lists no rates (tegra210/186/194/234 debugfs): these shares of
# the EMC's max, each pinned once before the search and replaced by the rate the clock framework
# actually ran it at (probe_emc_rates): the space holds only rates the EMC really runs.
EMC_FRACTIONS = (1.0, 0.75, 0.5, 0.375, 0.25)


def search_space(root: Root, board: Board, knobs: Sequence[str], beyond_power_mode: bool,
                 originals: Optional[Mapping[str, str]] = None) -> Dict[str, List[int]]:
    """Candidate Hz per knob, from the board's own tables, within the power mode's caps
    (`originals`: the state journal's values, path -> raw, which win over what jetbench itself
    wrote since: the daemon's pinned profile is no cap)."""
    caps = None if beyond_power_mode else read_mode_caps(root, board, originals or {})
    space: Dict[str, List[int]] = {}
    for knob in knobs:
        if knob == "gpu":
            table = gpu_table_hz(board)
            if not table:
                raise UsageError("--knobs gpu: this board lists no GPU clock table",
                                 hint="a Jetson's GPU (devfreq) or an NVIDIA GPU whose NVML "
                                 "lists its supported clocks")
            cap = caps.gpu_max_hz if caps and caps.gpu_max_hz else None
            # a cap that is no table entry runs the highest entry not above it: each entry
            # at or below the cap runs as it is (hw/clocks/runs.py)
            space["gpu"] = sorted({hz for hz in table if cap is None or hz <= cap})
        elif knob == "emc":
            emc = board.emc
            if emc is None:
                raise UsageError("--knobs emc: this board has no EMC clock jetbench can set")
            rates = list(emc.available_hz) or sorted(
                {int(emc.max_hz * f) for f in EMC_FRACTIONS})
            space["emc"] = sorted({hz for hz in rates if hz <= emc.max_hz})
        else:
            policies = board.cpu.policies
            if not policies or not policies[0].available_hz:
                raise UsageError("--knobs cpu: this board lists no CPU frequency table")
            cap = caps.cpu_max_hz.get(policies[0].path) if caps else None
            space["cpu"] = sorted({hz for hz in policies[0].available_hz
                                   if cap is None or hz <= cap})
    return space


def gpu_table_hz(board: Board) -> List[int]:
    """The GPU clocks a trial can pin: the Jetson GPU's devfreq table, else the first NVIDIA
    GPU's NVML graphics clocks (a discrete GPU: `--freq` locks them through NVML)."""
    if board.gpu is not None and board.gpu.available_hz:
        return list(board.gpu.available_hz)
    nvml = [g for g in board.nvml_gpus if g.can_lock_graphics]
    return sorted(nvml[0].graphics_hz) if nvml else []


def probe_emc_rates(root: Root, candidates: Sequence[int], beyond_power_mode: bool) -> List[int]:
    """The rates the EMC runs at when asked for each candidate: the clock framework rounds a
    rate that is not one of its table's (docs/hardware.md, EMC), and a trial must not claim a
    rate that did not run. Each is pinned under the board lock (or the daemon's lease), read
    back once settled, and everything is put back as measure does."""
    from ...hw.clocks.types import Step
    from ...hw.readings import emc_running_hz, rates_that_run
    from ...open_board import open_board
    from ...profiles.apply import apply_profile
    from ...profiles.profile import Profile
    from ..pinning import put_back
    from ..request import MeasureRequest

    # (inside tune's own borrow, which this shares; "tune" is a lease name the daemon takes)
    with borrow_board(root, "tune", 0.0) as guard, open_board(root) as board:
        had_journal = bool(journal.load(root))
        steps: List[Step] = []
        try:
            def pin(hz: int) -> None:
                profile = Profile(name="tune-emc-probe", source="jetbench tune", emc_freq=hz,
                                  sections=("emc",), beyond_power_mode=beyond_power_mode)
                with guard.writing():
                    steps.extend(apply_profile(root, board, profile).steps)

            return rates_that_run(candidates, pin, lambda: emc_running_hz(root, board))
        finally:
            with guard.writing():
                put_back(root, MeasureRequest(), had_journal, steps)
