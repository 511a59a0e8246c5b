"""The daemon's log: stderr, which journald collects, with syslog priority prefixes when journald
is the reader (SyslogLevelPrefix=)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from ..ownership.journal import RestoreResult

log = logging.getLogger("jetbench.daemon")


class JournaldFormatter(logging.Formatter):
    """`<N>message`: journald reads the syslog priority from the prefix (SyslogLevelPrefix=)."""

    PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3,
                logging.CRITICAL: 2}

    def format(self, record: logging.LogRecord) -> str:
        return f"<{self.PRIORITY.get(record.levelno, 6)}>{super().format(record)}"


def setup_logging(env: Mapping[str, str]) -> None:
    """stderr, which journald collects; priority prefixes when journald is reading it."""
    handler = logging.StreamHandler(sys.stderr)
    if env.get("JOURNAL_STREAM"):
        handler.setFormatter(JournaldFormatter("%(message)s"))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s jetbench daemon %(levelname)s: "
                                               "%(message)s", "%H:%M:%S"))
    logger = logging.getLogger("jetbench")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False


def log_moved(result: RestoreResult) -> None:
    """A restore's values that another tool had moved or changed meanwhile, one warning each."""
    for moved in result.moved:
        log.warning("moved by another tool since jetbench wrote it: %s", moved.note())
    for changed in result.changed:
        log.warning("changed by another tool while jetbench held the board: %s",
                    changed.note())
