"""The one error family. The CLI turns each into a message, a hint and an exit code."""

from __future__ import annotations

from typing import List, Optional, Tuple

EXIT_OK = 0
EXIT_USAGE = 1
EXIT_HARDWARE = 2
EXIT_MEASUREMENT = 3
EXIT_INTERRUPTED = 130


class JetbenchError(Exception):
    """Base of every expected failure. Never shown with a traceback."""

    exit_code = EXIT_HARDWARE

    def __init__(self, message: str, *, path: Optional[str] = None, hint: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.hint = hint

    def __str__(self) -> str:
        text = self.message
        if self.path and self.path not in text:
            text = f"{text}: {self.path}"
        return text


class UsageError(JetbenchError):
    """Bad input from the user: an option, a frequency, a profile."""

    exit_code = EXIT_USAGE


class ProfileError(UsageError):
    """A profile that failed validation. Nothing was written."""


class HardwareError(JetbenchError):
    """A file the board should have is missing, unreadable or unwritable."""

    exit_code = EXIT_HARDWARE


class PermissionDenied(HardwareError):
    """The kernel refused access (not root, not in the jetbench group)."""


class MissingFile(HardwareError):
    """A sysfs/debugfs file this board (or this L4T release) does not have."""


class WriteRejected(HardwareError):
    """The kernel rejected a write, or read back a different value; the step was rolled back."""


class UnsafePath(UsageError):
    """A write outside the allowlist or outside the root. Refused before touching anything."""


class LinkedAway(UnsafePath):
    """A board file that is a symbolic link to somewhere jetbench may not write (outside the
    root, or a file that is no knob): the board's tree is wrong, not the user's input, so it
    exits as a hardware/permission error (2), wherever the link points."""

    exit_code = EXIT_HARDWARE


class SamplerDied(HardwareError):
    """The power sampler's process ended while it was needed (killed, crashed): the samples
    stop there, so no window past that moment can be measured."""


class MeasurementInvalid(JetbenchError):
    """A measurement that cannot honestly be reported (window too short, poor coverage...)."""

    exit_code = EXIT_MEASUREMENT


class Unavailable(HardwareError):
    """Cannot run here with what is installed (a precision on this device, a runtime not
    installed): recorded as an `unavailable` row or result, and the others still run."""


class OutputMismatch(HardwareError):
    """A runtime computed something else than PyTorch's own forward pass on the same weights
    and input (beyond the stated tolerance): refused before any timing (`mismatch`)."""


class OutOfMemory(HardwareError):
    """The workload did not fit in the device's memory (a real allocator OOM, or a limit the
    caller set). Batch sweeps record it as a row and carry on."""


def first_line(err: BaseException, limit: int = 300) -> str:
    """A library's exception in one line for a message: its first line (cut at `limit`), or
    its type when it has no text."""
    text = str(err).strip().splitlines()
    return text[0][:limit] if text else type(err).__name__


NOT_RUN = (OutOfMemory, Unavailable, OutputMismatch)  # a configuration's row, not the run's end


def not_run(err: HardwareError) -> Tuple[str, str]:
    """The status and message a configuration that did not run records (one of NOT_RUN):
    ('oom' | 'mismatch' | 'unavailable', the message with its hint)."""
    status = "oom" if isinstance(err, OutOfMemory) else \
        "mismatch" if isinstance(err, OutputMismatch) else "unavailable"
    return status, f"{err} ({err.hint})" if err.hint else str(err)


class RankFailed(JetbenchError):
    """One rank of a multi-device run failed (an error, an out-of-memory): the whole run fails
    with that rank's message."""


class RankLost(RankFailed):
    """Another rank of a multi-device run is gone (killed, crashed): its connection closed."""


# What an interrupted command wants said under "interrupted" (the clocks' fate, where the
# finished results are); the CLI prints these when it turns Ctrl-C into exit 130.
_INTERRUPT_NOTES: List[str] = []


def set_interrupt_notes(lines: List[str]) -> None:
    _INTERRUPT_NOTES[:] = list(lines)


def interrupt_notes() -> List[str]:
    return list(_INTERRUPT_NOTES)


class PowerModeCap(UsageError):
    """A request above the caps of the active power mode (nvpmodel), without
    --beyond-power-mode: refused before anything is written."""
