"""measure's, sweep's and the demo's progress line: points done / total and the time left, on
stderr, only on a terminal; the callback that also raises a swallowed Ctrl-C again."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

from ..interrupts import InterruptLatch
from ..units import times_text
from .common import console

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn, TaskID

    from ..run.measure import Progress as OnProgress

_PROGRESS_AFTER_S = 1.0


class ProgressBar:
    """Points done / total with the time left, on stderr, only on a terminal and only once
    the run has lasted a moment."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and console(stderr=True).is_terminal
        self.start = time.monotonic()
        self.progress: Optional[Progress] = None
        self.task: Optional[TaskID] = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def update(self, done: int, total: int, label: str, phase: str, fraction: float) -> None:
        if not self.enabled or time.monotonic() - self.start < _PROGRESS_AFTER_S:
            return
        if self.progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), _times_column(),
                                     console=console(stderr=True), transient=True)
            self.progress.start()
            self.task = self.progress.add_task("", total=total)
        if self.task is not None:
            self.progress.update(self.task, description=f"{label}: {phase}",
                                 completed=done + min(max(fraction, 0.0), 1.0) * 0.99)


def _times_column() -> ProgressColumn:
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class Times(ProgressColumn):
        def render(self, task: Task) -> Text:
            return Text(times_text(task.elapsed, task.time_remaining))

    return Times()


def interruptible(update: OnProgress, latch: InterruptLatch) -> OnProgress:
    """The progress callback, which is also where a swallowed Ctrl-C is raised again: it runs
    in the measurement loop (at most every 0.1 s), never while the clocks are being restored."""
    def progress(done: int, total: int, label: str, phase: str, fraction: float) -> None:
        latch.check()
        update(done, total, label, phase, fraction)
    return progress
