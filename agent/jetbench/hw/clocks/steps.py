"""Planning and applying a step: what every clock domain does with its writes.

A plan is a list of steps; a step is the writes of one domain (one CPU cluster, the GPU, EMC...)
in the order the kernel accepts them. Applying a step writes each value the way `echo` does,
reads each back, and on a rejected write puts back what the step had already written.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from ...errors import HardwareError, WriteRejected
from .. import knob_io
from ..fs import Root
from .types import Step, Write


def write_if_changed(root: Root, path: str, value: object, verify: bool = True) -> List[Write]:
    """A one-element list with the write, or [] when the file already holds the value."""
    old = root.read(path)
    text = str(value)
    return [] if old == text else [Write(path, text, old, verify)]


def ordered_min_max(
    root: Root, min_path: str, max_path: str, new_min: Optional[int], new_max: Optional[int],
    scale: int = 1,
) -> List[Write]:
    """min/max writes ordered so the kernel never sees min > max.

    Raising min above the current max is refused by the kernel, so when going up write max
    first, and when going down write min first. `scale` converts Hz to the file's unit.
    """
    cur_max = root.read_int(max_path)
    lo = new_min // scale if new_min is not None else None
    hi = new_max // scale if new_max is not None else None
    min_w = write_if_changed(root, min_path, lo) if lo is not None else []
    max_w = write_if_changed(root, max_path, hi) if hi is not None else []
    if lo is not None and lo > cur_max:
        return max_w + min_w
    return min_w + max_w


def apply_step(root: Root, step: Step) -> None:
    """Write a step's values in order; verify each; on failure roll the step back and raise."""
    done: List[Write] = []
    for write in step.writes:
        try:
            knob_io.write(root, write.path, write.value)
            if write.verify:
                got = knob_io.read(root, write.path)
                if got != write.value:
                    raise WriteRejected(
                        f"wrote {write.value!r} but the kernel reads back {got!r}",
                        path=write.path,
                        hint=step.readback_hint,
                    )
            done.append(write)
        except HardwareError as err:
            # The failed write may have partly landed (a truncated file): put it back too.
            undo_writes(root, done + [write])
            raise WriteRejected(
                f"{step.label}: {err.message}; the step was rolled back",
                path=err.path or write.path,
                hint=err.hint,
            ) from err


def undo_writes(root: Root, writes: Sequence[Write], strict: bool = False) -> None:
    """Put back each write's old value, newest first. Best effort unless `strict` (the
    journal still holds the originals for `jetbench restore`)."""
    for write in reversed(writes):
        try:
            if not knob_io.readable(write.path) or knob_io.read(
                    root, write.path, default=None) != write.old:
                knob_io.write(root, write.path, write.old)
        except HardwareError:
            if strict:
                raise
