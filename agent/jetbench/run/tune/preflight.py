"""Before a study's first trial: what every trial needs opens (issue 62). A meter that cannot
be opened (a SCPI socket with nothing listening, a serial port unplugged) or a command that
cannot be started fails every trial the same way: tune stops before the first one, exit 2,
with the one message measure would give. And after the trials: a study whose every trial
failed is an error, not an answer (`check_some_ran`)."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Sequence

from ...errors import HardwareError, JetbenchError
from ...hw.fs import Root
from ..meters import Meters
from ..request import MeasureRequest

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial


def check_can_run(root: Root, request: MeasureRequest) -> None:
    """The meters `--meter` names open (then close), and a `--cmd`'s program is there to
    start; a HardwareError (exit 2) saying which, before any trial."""
    from ...open_board import open_board

    if request.command is not None:
        program = request.command.argv[0] if request.command.argv else ""
        if not program or shutil.which(program) is None:
            why = ("no such file" if os.sep in program and not os.path.exists(program) else
                   "not executable" if os.sep in program else "not found on PATH")
            raise HardwareError(f"tune: --cmd cannot be started: {program!r}: {why}",
                                hint="give the program's path, or run it through "
                                     "`sh -c '...'`; no trial was run")
    with open_board(root, simulate_power=False) as board:
        meters = Meters(root, board, request)
        try:
            meters.start()
        except JetbenchError as err:
            raise HardwareError(f"tune: a meter cannot be opened: {err}",
                                path=err.path, hint=(err.hint + "; " if err.hint else "")
                                + "no trial was run") from None
        finally:
            meters.stop()


def check_some_ran(trials: Sequence[FrozenTrial]) -> None:
    """Where trials ran and every one failed (none measured anything): an error naming the
    first failure, not an empty answer."""
    failed = [t for t in trials if t.state.name == "FAIL" and "error" in t.user_attrs]
    measured = [t for t in trials if t.state.name == "COMPLETE"]
    if failed and not measured:
        raise HardwareError(
            f"tune: every one of the study's {len(failed)} trial(s) failed: "
            f"{str(failed[0].user_attrs['error']).splitlines()[0].rstrip(':')}",
            hint="tune.json lists each trial's error; fix the cause and run tune again")
