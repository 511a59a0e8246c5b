"""The width of the terminal a line goes to, and prose wrapped at words to it: one rule for
errors, click's own parse errors, tune's lines and the daemon's log (issue 61).

A line goes to one stream; its terminal is that stream's. Python's
`shutil.get_terminal_size` asks stdout only, so `jetbench tune ... | tee log` wrapped the
messages on stderr (a terminal 100 columns wide) at 80, the fallback. Piped or redirected (a
file, journald), a message stays one line as written: what scripts and logs grep.
"""

from __future__ import annotations

import os
import textwrap
from typing import Optional, TextIO

FALLBACK_COLUMNS = 80  # a terminal that does not say its size (a serial console)
MIN_COLUMNS = 40  # narrower than this, wrapping helps no one: lines this long


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed, or no file at all
        return False


def columns(stream: TextIO) -> Optional[int]:
    """The width of the terminal `stream` writes to (COLUMNS where set, as a terminal sets it
    for the programs it runs; else the terminal's own size); None where it is no terminal."""
    if not is_terminal(stream):
        return None
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        return os.get_terminal_size(stream.fileno()).columns or FALLBACK_COLUMNS
    except (AttributeError, ValueError, OSError):
        return FALLBACK_COLUMNS


def wrap_words(text: str, width: int, indent: str = "") -> str:
    """`text`'s lines, each wrapped at spaces to `width` (a path, URL or option is never split;
    one longer than the width stands alone), continuation lines indented by `indent`."""
    out = []
    for line in text.split("\n"):
        out += textwrap.wrap(line, width=max(width, MIN_COLUMNS), subsequent_indent=indent,
                             break_long_words=False, break_on_hyphens=False) or [""]
    return "\n".join(out)


def for_stream(text: str, stream: TextIO, indent: str = "") -> str:
    """`text` as it should reach `stream`: wrapped at words to its terminal's width, or as
    written where it is no terminal."""
    width = columns(stream)
    return text if width is None else wrap_words(text, width, indent)
