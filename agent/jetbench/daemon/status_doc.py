"""`jetbench.status/1`: the document each check of the daemon publishes (status, metrics and
the control socket serve it), built from the daemon's parts."""

from __future__ import annotations

import os
import time
from typing import Any, Optional, Protocol

from ..hw.fs import Root
from ..hw.readings import identity
from ..ownership.journal import originals
from ..ownership.wire import finite
from .drift import Drift, iso
from .held import Held, ReadingsDoc, StatusDoc


class Publishing(Protocol):
    """What the document is built from: the daemon's parts (service.py's Daemon)."""

    root: Root
    held: Held
    drift: Drift
    config: Any  # service.DaemonConfig (interval_s, socket_path): service imports this module
    tuning: Any  # live_tuning.LiveTuning or None
    profile_refused: Optional[str]
    _started: float
    _metrics: Any  # metrics.MetricsServer or None

    def summary(self) -> str: ...


def status_doc(daemon: Publishing, readings: ReadingsDoc) -> StatusDoc:
    """What `status` shows after this check: what is held and how, its counters, the readings."""
    board = daemon.held.board
    assert board is not None
    doc: StatusDoc = {
        "schema": "jetbench.status/1",
        "pid": os.getpid(),
        "started": iso(daemon._started),
        "uptime_s": round(time.time() - daemon._started, 1),
        "simulated": board.simulated,
        "board": identity(daemon.root, board, originals(daemon.root)),
        "profile": daemon.held.profile.name if daemon.held.profile else None,
        "profile_source": daemon.held.profile.source if daemon.held.profile else None,
        "pinned": daemon.held.pinned,
        "profile_refused": daemon.profile_refused,
        "summary": daemon.summary(),
        "interval_s": daemon.config.interval_s,
        "socket": str(daemon.config.socket_path),
        "metrics": daemon._metrics.address if daemon._metrics is not None else None,
        "throttling": bool(daemon.drift.throttle_reasons),
        "throttle_reasons": list(daemon.drift.throttle_reasons),
        "below_pin": list(daemon.drift.below_pin),
        "not_held": list(daemon.drift.hold.not_held.values()),
        "clock_drift_events": dict(daemon.drift.hold.events),
        "counters": dict(daemon.held.counters),
        "last_repin": daemon.drift.last_repin,
        "last_error": daemon.held.last_error,
        "lease": daemon.held.lease.doc() if daemon.held.lease is not None else None,
        "tune": daemon.tuning.doc() if daemon.tuning is not None else None,
        **readings,
    }
    return finite(doc)  # a NaN reading is no figure: null in status, absent in the metrics
