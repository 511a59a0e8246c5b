"""Apply a profile: validate whole, plan, journal, write step by step, read back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

from ..hw.board import Board
from ..hw.clocks import domains, gpu
from ..hw.clocks.domains import read_clocks
from ..hw.clocks.steps import apply_step, write_if_changed
from ..hw.clocks.types import ClockReading, Step
from ..hw.fs import Root
from ..ownership import journal
from . import emc_ceiling
from .profile import Profile
from .targets import Targets, resolve


@dataclass(frozen=True)
class ApplyResult:
    profile: str
    steps: Tuple[Step, ...]
    targets: Targets
    applied: Tuple[ClockReading, ...]  # read back after writing (or current, on --dry-run)
    dry_run: bool


def build_plan(root: Root, board: Board, targets: Targets) -> List[Step]:
    steps = domains.plan(root, board, targets)
    expert = [w for path, value in targets.writes for w in write_if_changed(root, path, value)]
    if expert:
        steps.append(Step("write", "profile [[write]] entries", tuple(expert)))
    return steps


def pin_notes(board: Board, targets: Targets, applied: Sequence[ClockReading]) -> List[str]:
    """What the read-back says beyond the writes: a GPU pinned at its table's top that stays
    below it (an old BPMP firmware under JetPack 6.2's Super tables)."""
    g = board.gpu
    if g is None or not g.available_hz or targets.gpu.max_hz != max(g.available_hz):
        return []
    return gpu.below_table_top(board, list(applied))


def apply_profile(root: Root, board: Board, profile: Profile, dry_run: bool = False) -> ApplyResult:
    """Pin `profile`. Nothing is written unless the whole profile is valid for this board;
    the journal is written before the first change."""
    targets = resolve(profile, board, root)
    steps = build_plan(root, board, targets)
    if not dry_run and steps:
        journal.record(
            root,
            # What is written, for restore's "moved by another tool" note; not for a rate the
            # kernel rounds (verify=False): its rounding is no other tool's change.
            ((w.path, s.label, w.value) if w.verify else (w.path, s.label)
             for s in steps for w in s.writes),
            board_family=board.family,
            watch=journal.watched_knobs(root, board),
        )
        for step in steps:
            apply_step(root, step)
        if any(s.domain == "emc" for s in steps):
            targets = emc_ceiling.check(root, board, targets)
    return ApplyResult(profile.name, tuple(steps), targets, read_clocks(root, board), dry_run)
