"""How a rank process ends, and how the launcher tells a finished run from a failed one
(no torch here: the CLI calls `leave` on every exit).

Why a rank ends with os._exit (an abort at exit, seen in a core dump): gloo runs each
collective on a worker thread (pt_gloo_runloop), which drops its Work object, and with it the
last references to the collective's tensors, only after the caller has been woken. Those
tensors were made in Python (all_gather_object, broadcast_object_list), so dropping them takes
the GIL. When the main thread is already in Py_FinalizeEx, the worker waiting for the GIL is
ended by pthread_exit, whose forced unwinding through the Work's noexcept destructor calls
std::terminate: "terminate called without an active exception", SIGABRT, after the rank's
work was done. A last barrier does not help (another worker runs it), nor does
destroy_process_group: it drops torch's own references to the default group, not all of them.
torch.distributed.nn.functional binds `group=group.WORLD` as a default argument of ten
functions when first imported, and the first BatchNorm on the meta device (the pass that counts
a network's MACs, mid-run) imports it with torch._dynamo; a user model may hold one too. So the
group and its threads live on, and nothing waits for them. torch's own attempt at a fix (an
atexit destroy, pytorch/pytorch#179291) was abandoned as much more complicated than expected.

So a rank that joined a process group leaves in order: the last collective done on every rank,
one last barrier (bounded), destroy_process_group (for nccl this aborts/finalizes the
communicators and stops the watchdog, as its documentation asks of every rank), then its
outputs flushed and its status written for the launcher, then os._exit: no finalizer and no
C++ static destructor runs beside threads that nothing can stop. Nothing is lost by it: the
result, the journal, the clocks and the power sampler child are all settled (by their own
`finally` blocks) before the CLI gets to its exit status.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, Optional

DONE_DIR_ENV = "JETBENCH_RANKS_DONE"  # set by `measure --devices` for its ranks (launch.py)

_joined = False


def joined() -> None:
    """This process is about to join a process group: from now on it ends with `leave`."""
    global _joined
    _joined = True


def has_joined() -> bool:
    return _joined


def leave(code: int) -> None:
    """End this process with `code` if it joined a process group (see the module docstring);
    return at once otherwise. Under `measure --devices`, the launcher first learns that this
    rank got to its end, and with what status (`reported`)."""
    if not _joined:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    import logging  # only a rank gets here: every command's exit passes leave()

    logging.shutdown()  # what the finalizer would have flushed
    _report_done(code)
    os._exit(code)


def _report_done(code: int) -> None:
    where, rank = os.environ.get(DONE_DIR_ENV), os.environ.get("RANK")
    if not where or rank is None:
        return
    try:
        tmp = Path(where) / f".{rank}.tmp"
        tmp.write_text(f"{code}\n")
        tmp.replace(Path(where) / rank)  # whole or absent
    except OSError:
        pass  # the launcher then judges by the exit codes alone


def reported(where: str, count: int) -> Optional[Dict[int, int]]:
    """Every rank's reported exit status, or None unless all `count` ranks reported."""
    codes: Dict[int, int] = {}
    for rank in range(count):
        try:
            codes[rank] = int((Path(where) / str(rank)).read_text())
        except (OSError, ValueError):
            return None
    return codes
