"""The daemon's log: stderr, which journald collects, with syslog priority prefixes when journald
is the reader (SyslogLevelPrefix=)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Mapping

from ..terminal import for_stream

if TYPE_CHECKING:
    from ..ownership.journal import RestoreResult

log = logging.getLogger("jetbench.daemon")


class JournaldFormatter(logging.Formatter):
    """`<N>message`: journald reads the syslog priority from the prefix (SyslogLevelPrefix=)."""

    PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3,
                logging.CRITICAL: 2}

    def format(self, record: logging.LogRecord) -> str:
        return f"<{self.PRIORITY.get(record.levelno, 6)}>{super().format(record)}"


class TerminalFormatter(logging.Formatter):
    """A record wrapped at words to the width of the terminal stderr is (the daemon run by
    hand: its lines run to ~200 characters), as written where stderr is none (a file, a
    pipe): a log line stays one line there."""

    def format(self, record: logging.LogRecord) -> str:
        return for_stream(super().format(record), sys.stderr, "    ")


def setup_logging(env: Mapping[str, str]) -> None:
    """stderr, which journald collects; priority prefixes when journald is reading it (a
    journal line is one line: never wrapped), wrapped at words on a terminal."""
    handler = logging.StreamHandler(sys.stderr)
    if env.get("JOURNAL_STREAM"):
        handler.setFormatter(JournaldFormatter("%(message)s"))
    else:
        handler.setFormatter(TerminalFormatter("%(asctime)s jetbench daemon %(levelname)s: "
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
