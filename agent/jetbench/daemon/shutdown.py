"""The daemon's way out (service.py's `run`): stop serving, restore the board from the journal
(unless a borrower stopped in the middle of writing it holds it), close the sources and the
simulated kernel, hand the board lock on; the exit status."""

from __future__ import annotations

import logging
import signal
from typing import Any, Optional, Protocol

from ..errors import HardwareError, JetbenchError
from ..hw.fs import Root
from ..ownership import journal
from ..ownership import lease as lease_file
from ..ownership.lock import Holder
from .held import Held
from .lending import LEASE_REVOKE_WAIT_S
from .logs import log_moved

log = logging.getLogger("jetbench.daemon")


class _NothingToRestore(Exception):
    pass


class Stopping(Protocol):
    """What the way out uses of the daemon (service.py's Daemon)."""

    root: Root
    config: Any  # service.DaemonConfig: service imports this module
    notifier: Any  # notify.Notifier
    lending: Any  # lending.Lending
    held: Held
    tuning: Any  # live_tuning.LiveTuning, phased_tuning.PhasedTuning or None
    _stop_signal: Optional[int]
    _control: Any  # control.ControlServer or None
    _metrics: Any  # metrics.MetricsServer or None (prometheus_client only with --metrics)
    _lock: Any  # threading.RLock
    _rails: Any  # rails.RailMeter
    _sim: Any  # sim.file_kernel.FileKernel or None
    _board_lock: Any  # ownership.lock.BoardLock or None


def shut_down(d: Stopping) -> int:
    """Stop serving, restore the board, stop the simulated kernel. The exit status."""
    code = 0
    if d._stop_signal is not None:
        log.info("%s: restoring the board and stopping",
                 signal.Signals(d._stop_signal).name)
    d.notifier.send(STOPPING="1", STATUS="restoring the board")
    d.lending.wait_for_end(d.config.lease_stop_wait_s)
    stuck = d.held.lease  # a borrower that did not hand the board back (stopped, say)
    if stuck is not None and not lease_file.revoke(d.root, LEASE_REVOKE_WAIT_S):
        # Stopped inside a batch of writes: it will finish that batch when it resumes.
        # Writing now would race it; the journal keeps the originals for `restore`.
        log.error("%s (pid %d) is stopped in the middle of writing the board: not "
                  "restoring; the journal is kept, and the board stays locked to it. Once "
                  "it has ended (kill -CONT %d, or kill %d): jetbench restore",
                  stuck.who, stuck.pid, stuck.pid, stuck.pid)
        d.held.board = None  # nothing below writes
        code = HardwareError.exit_code
    for server in (d._control, d._metrics):
        if server is not None:
            try:
                server.stop()
            except Exception as err:  # stopping must go on to the restore
                log.warning("stopping %s: %s", type(server).__name__, err)
    with d._lock:
        try:
            if d.held.board is None:
                # Refused before touching the board (another daemon holds the socket, say):
                # the journal, if any, is not this process's to restore. Or a borrower
                # stopped mid-write holds it: not ours to write under.
                raise _NothingToRestore
            result = journal.restore(d.root)
            log_moved(result)
            if result.had_journal:
                log.info("restored %d value(s) (%d already in place); journal removed",
                         len(result.written), result.unchanged)
            d.held.pinned = False
        except JetbenchError as err:
            log.error("restore failed: %s (the journal is kept: `jetbench restore`)", err)
            code = err.exit_code
        except _NothingToRestore:
            pass
    if d.tuning is not None:
        d.tuning.close()
    for source in d._rails.sources:
        try:
            source.close()
        except Exception:  # best effort on the way out
            pass
    if d._sim is not None:
        d._sim.stop()
    if d._board_lock is not None:
        # Last: the board is back, another owner may come; unless the borrower still holds
        # the lock through the descriptor we passed it: the file then names it.
        holder = None
        if stuck is not None:
            holder = Holder(stuck.pid, f"{stuck.who} (lent the board by a daemon that has "
                            "stopped)", stuck.since)
        d._board_lock.release(handed_to=holder)
    d.notifier.close()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # reload makes no sense any more
    return code
