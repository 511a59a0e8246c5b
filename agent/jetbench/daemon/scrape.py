"""One GET of a workload's Prometheus page, as untrusted input: a total deadline, a size bound,
and only the wanted series kept.

The deadline covers connecting, the status line, the headers and the body together: a timer
shuts the socket down when it passes, so an endpoint that sends one byte a second cannot hold
the read past it (a socket timeout alone restarts with every byte). http.client's own bounds
refuse a bad status line, more than 100 headers or a header line over 64 KiB, and a broken
chunked body. The body is read line by line (a line over MAX_LINE_BYTES is skipped, never
held); a line is parsed, with prometheus_client's own parser, only when it is a sample of a
wanted name, so an 8 MiB page of other series costs a line's memory, not the page's.

Whatever the page does wrong is a SourceFault (one line, counted by the caller): never a
traceback, never a number that is not finite.
"""

from __future__ import annotations

import http.client
import math
import socket
import threading
import time
import urllib.parse
from typing import Dict, Iterable, Iterator, Optional, Tuple

from ..errors import HardwareError

DEADLINE_S = 2.0  # connect + status line + headers + body, in all
MAX_PAGE_BYTES = 8 * 1024 * 1024  # a page larger than this is refused
MAX_LINE_BYTES = 64 * 1024  # a longer line is skipped unread (no wanted sample is that long)
MAX_SERIES = 10_000  # wanted series kept from one page
# A float counts every integer exactly up to 2**53: a counter past it no longer counts single
# items, and one near 1e308 makes sums and differences infinite.
MAX_COUNTER = float(2 ** 53)

Labels = Tuple[Tuple[str, str], ...]
Series = Dict[Tuple[str, Labels], float]  # (name, sorted labels) -> value


class SourceFault(HardwareError):
    """A source that answered wrong, too slowly, too much or not at all: said, counted and
    frozen on by the tuning, never a crash."""


def _wanted_line(line: str, names: Tuple[str, ...]) -> bool:
    for name in names:
        if line.startswith(name) and len(line) > len(name) and line[len(name)] in "{ \t":
            return True
    return False


def select_series(lines: Iterable[str], names: Iterable[str], where: str = "the page"
                  ) -> Series:
    """The samples of the wanted names among a page's lines (other lines are not parsed),
    read by prometheus_client's parser; SourceFault for a wanted sample it cannot read, a
    value that is not finite or past MAX_COUNTER, or more than MAX_SERIES of them."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise HardwareError("reading a Prometheus page needs prometheus-client",
                            hint="pip install 'jetbench[metrics]'") from None
    wanted = tuple(sorted(set(names), key=len, reverse=True))
    out: Series = {}
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#") or not _wanted_line(line, wanted):
            continue
        try:
            samples = [s for family in text_string_to_metric_families(line + "\n")
                       for s in family.samples]
        except (ValueError, TypeError, IndexError) as err:
            raise SourceFault(f"{where} has a sample that does not parse: "
                              f"{line[:80]!r} ({type(err).__name__})") from None
        for sample in samples:
            if not math.isfinite(sample.value) or abs(sample.value) > MAX_COUNTER:
                raise SourceFault(f"{where}: {sample.name} = {sample.value!r} is not a count "
                                  f"(finite, at most 2^53)")
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
            if len(out) > MAX_SERIES:
                raise SourceFault(f"{where} has more than {MAX_SERIES} series of "
                                  f"{', '.join(wanted)}: refused")
    return out


def _lines(reply: http.client.HTTPResponse, url: str, deadline: float) -> Iterator[str]:
    """The body's lines, decoded; a line over MAX_LINE_BYTES skipped; SourceFault past
    MAX_PAGE_BYTES or the deadline."""
    total = 0
    skipping = False
    while True:
        chunk = reply.readline(MAX_LINE_BYTES + 1)
        if not chunk:
            return
        total += len(chunk)
        if total > MAX_PAGE_BYTES:
            raise SourceFault(f"the metrics page at {url} is larger than "
                              f"{MAX_PAGE_BYTES // (1024 * 1024)} MiB: refused")
        if time.monotonic() > deadline:
            raise SourceFault(f"the metrics page at {url} took longer than {DEADLINE_S:g} s")
        whole = chunk.endswith(b"\n")
        if not skipping and whole:
            yield chunk.decode("utf-8", errors="replace")
        skipping = not whole  # the rest of an overlong line is read and dropped


def fetch_series(url: str, names: Iterable[str], deadline_s: float = DEADLINE_S) -> Series:
    """GET `url` within `deadline_s` in all, and keep the samples of `names`."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SourceFault(f"{url} is not an http(s) URL")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    deadline = time.monotonic() + deadline_s
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        conn = cls(parts.hostname, parts.port, timeout=deadline_s)
    except ValueError as err:  # a port that is no number
        raise SourceFault(f"{url}: {err}") from None
    timer: Optional[threading.Timer] = None
    try:
        conn.connect()
        sock = conn.sock
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), _cut, (sock,))
        timer.daemon = True
        timer.start()
        conn.request("GET", path, headers={"Accept": "text/plain"})
        reply = conn.getresponse()
        if reply.status != 200:
            raise SourceFault(f"the metrics endpoint {url} answered {reply.status} "
                              f"{reply.reason[:60]}")
        return select_series(_lines(reply, url, deadline), names, f"the page at {url}")
    except SourceFault:
        raise
    except (OSError, http.client.HTTPException, ValueError) as err:
        if time.monotonic() >= deadline:
            raise SourceFault(f"the metrics endpoint {url} did not answer within "
                              f"{deadline_s:g} s") from None
        why = " ".join(str(err).split())[:120] or type(err).__name__
        raise SourceFault(f"the metrics endpoint {url} did not answer as HTTP does "
                          f"({type(err).__name__}: {why})") from None
    finally:
        if timer is not None:
            timer.cancel()
        conn.close()


def _cut(sock: Optional[socket.socket]) -> None:
    """The deadline passed: wake the read blocked on this socket (it fails at once)."""
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
