"""The live workload's rate, for `daemon --tune`: read from what the workload already exposes.

    prometheus:URL#METRIC            a counter on a Prometheus text endpoint (Triton's
                                     nv_inference_count, vLLM's vllm:generation_tokens_total,
                                     llama.cpp server's llamacpp:tokens_predicted_total); the
                                     rate is its increase over the window, summed over every
                                     series of that name (or those matching {label="value",...}
                                     given after the name). `METRIC` also finds `METRIC_total`,
                                     the name prometheus-client gives a counter.
    --latency-from prometheus:URL#METRIC   a histogram (its `_bucket` series): the window's
                                     quantiles from the buckets' increase, as Prometheus's
                                     histogram_quantile() interpolates them.
    --busy-from prometheus:URL#METRIC      a counter of the seconds the workload spent serving
                                     (its unit from its name, as a histogram's: `_seconds`,
                                     `_ms`, `_us`): the window's busy share, its increase over
                                     the window's length. One server's time: a share over
                                     BUSY_MAX is not (several instances, or a server that
                                     counts a batch's time once per request) and is not used.

A counter that goes down (the workload restarted) starts a new window: nothing is counted
across it. The page is untrusted input (scrape.py: a total deadline, a size bound, only the
wanted series parsed, by prometheus_client's parser); whatever it does wrong is a SourceFault
the caller counts and decides on (the tuner freezes).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import UsageError
from .scrape import DEADLINE_S, Series, SourceFault, fetch_series, select_series

SCRAPE_TIMEOUT_S = DEADLINE_S
BUSY_MAX = 1.05  # a busy share above this is no one server's busy time (the module doc),
# plus BUSY_EDGE_ITEMS over the window's items: a server adds an item's time when it ends, so a
# window counts in full the one that ended just after its first reading (up to one item's time
# over; two for their spread): a window ended early at the start point, under a second of a slow
# point's items, read 1.09 beside two CPU burners, and its share was not used
BUSY_EDGE_ITEMS = 2.0
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def busy_max(items: Optional[float]) -> float:
    """The highest busy share one server shows in a window that served `items` (None: not
    known): BUSY_MAX, and the share its edges' items may put over it."""
    return BUSY_MAX + (BUSY_EDGE_ITEMS / items if items else 0.0)


@dataclass(frozen=True)
class Selector:
    """A metric name and the labels its series must carry."""

    name: str
    labels: Tuple[Tuple[str, str], ...] = ()

    def text(self) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in self.labels)
        return self.name + (f"{{{inner}}}" if inner else "")


@dataclass(frozen=True)
class PrometheusSource:
    """`prometheus:URL#METRIC`, parsed (nothing is fetched)."""

    url: str
    selector: Selector

    def text(self) -> str:
        return f"prometheus:{self.url}#{self.selector.text()}"


def _labels(text: str, where: str) -> Tuple[Tuple[str, str], ...]:
    inner = text.strip()[1:-1]
    out: List[Tuple[str, str]] = []
    pos = 0
    while pos < len(inner):
        m = _LABEL.match(inner, pos)
        if m is None:
            raise ValueError(f"{where}: cannot read the labels {text!r}")
        out.append((m.group(1), m.group(2).replace('\\"', '"').replace("\\\\", "\\")))
        pos = m.end()
    return tuple(out)


def parse_source(text: str, option: str = "--throughput-from") -> PrometheusSource:
    """'prometheus:http://HOST:PORT/metrics#METRIC[{label="v"}]' -> its parts; UsageError."""
    kind, sep, rest = text.partition(":")
    url, hash_, metric = rest.rpartition("#")
    if kind.strip().lower() != "prometheus" or not sep or not hash_ or not metric:
        raise UsageError(f"{option} {text!r}: expected prometheus:URL#METRIC",
                         hint="e.g. prometheus:http://127.0.0.1:8002/metrics#nv_inference_count")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"{option} {text!r}: the URL must be http:// or https://")
    name, brace, labels = metric.partition("{")
    if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", name):
        raise UsageError(f"{option} {text!r}: {name!r} is not a Prometheus metric name")
    try:
        selector = Selector(name, _labels("{" + labels, option) if brace else ())
    except ValueError as err:
        raise UsageError(str(err)) from None
    return PrometheusSource(url, selector)


def parse_exposition(text: str, names: Sequence[str]) -> Series:
    """The samples of `names` on a Prometheus text page (scrape.select_series)."""
    return select_series(text.splitlines(), names)


def _matches(labels: Tuple[Tuple[str, str], ...], wanted: Tuple[Tuple[str, str], ...]) -> bool:
    have = dict(labels)
    return all(have.get(k) == v for k, v in wanted)


def counter_value(series: Series, selector: Selector) -> Optional[float]:
    """The sum of the selected counter's series (`NAME`, else `NAME_total`); None if absent."""
    for name in (selector.name, selector.name + "_total"):
        found = [v for (n, labels), v in series.items()
                 if n == name and _matches(labels, selector.labels) and math.isfinite(v)]
        if found:
            return sum(found)
    return None


def _histogram_name(selector: Selector) -> str:
    name = selector.name
    return name[:-len("_bucket")] if name.endswith("_bucket") else name


def buckets(series: Series, selector: Selector) -> Dict[float, float]:
    """A histogram's cumulative bucket counts by upper bound (`le`), summed over its series."""
    name = _histogram_name(selector)
    out: Dict[float, float] = {}
    for (n, labels), v in series.items():
        if n != name + "_bucket" or not _matches(labels, selector.labels):
            continue
        le = dict(labels).get("le")
        try:
            bound = float(le) if le is not None else None
        except ValueError:
            bound = None
        if bound is not None:
            out[bound] = out.get(bound, 0.0) + v
    return out


def quantile(q: float, increase: Dict[float, float]) -> Optional[float]:
    """The q-quantile of a window's bucket increases (cumulative by upper bound), interpolated
    linearly inside its bucket as Prometheus's histogram_quantile(); None with no samples. A
    quantile in the +Inf bucket is the largest finite bound (the most that can be said)."""
    bounds = sorted(increase)
    if not bounds or increase[bounds[-1]] <= 0:
        return None
    total = increase[bounds[-1]]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound in bounds:
        count = increase[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count)
        lower_bound, lower_count = bound, count
    return bounds[-1]


def scrape(url: str, names: Sequence[str], timeout_s: float = DEADLINE_S) -> Series:
    """One GET of a metrics page within `timeout_s` in all, its wanted series kept
    (scrape.fetch_series); SourceFault (one line) when it cannot be read or is refused."""
    return fetch_series(url, names, timeout_s)


@dataclass(frozen=True)
class Reading:
    """One scrape: the counter, the histogram's buckets (if asked), when."""

    t_s: float
    count: float
    buckets: Dict[float, float] = field(default_factory=dict)
    # a log's: when it last said something new (None: every reading is new, a scrape's)
    value_at: Optional[float] = None
    busy_s: Optional[float] = None  # --busy-from's counter, in seconds (None: not read)


@dataclass(frozen=True)
class WindowRate:
    """What a window between two readings says."""

    items: float
    seconds: float
    items_per_s: float
    latency_ms: Dict[str, float]  # e.g. {"p99": 38.0}; empty without a histogram
    miss_rate: Optional[float] = None  # the share over the deadline (with one and a histogram)
    busy_share: Optional[float] = None  # the share of it the workload was busy (--busy-from)


class LiveRate:
    """Reads a workload's counter (and histogram, and busy-time counter) from its Prometheus
    endpoints (one scrape of each page a reading)."""

    def __init__(self, rate: PrometheusSource, latency: Optional[PrometheusSource] = None,
                 timeout_s: float = SCRAPE_TIMEOUT_S, clock=time.monotonic,
                 busy: Optional[PrometheusSource] = None):
        self.rate = rate
        self.latency = latency
        self.busy = busy
        self.timeout_s = timeout_s
        self._clock = clock

    def _names(self, url: str) -> List[str]:
        """The series names to keep from the page at `url`: the counters', the histogram's."""
        names: List[str] = []
        for counter in (self.rate, self.busy):
            if counter is not None and url == counter.url:
                names += [counter.selector.name, counter.selector.name + "_total"]
        if self.latency is not None and url == self.latency.url:
            names.append(_histogram_name(self.latency.selector) + "_bucket")
        return names

    def read(self) -> Reading:
        pages = {self.rate.url: scrape(self.rate.url, self._names(self.rate.url),
                                       self.timeout_s)}
        t_s = self._clock()
        for extra in (self.latency, self.busy):
            if extra is not None and extra.url not in pages:
                pages[extra.url] = scrape(extra.url, self._names(extra.url), self.timeout_s)
        count = counter_value(pages[self.rate.url], self.rate.selector)
        if count is None:
            raise SourceFault(f"{self.rate.selector.text()} is not on {self.rate.url}",
                              hint="the counter's name as the page shows it (curl the URL)")
        found: Dict[float, float] = {}
        if self.latency is not None:
            found = buckets(pages[self.latency.url], self.latency.selector)
            if not found:
                raise SourceFault(f"{self.latency.selector.text()}_bucket is not on "
                                  f"{self.latency.url}")
        busy_s: Optional[float] = None
        if self.busy is not None:
            busy = counter_value(pages[self.busy.url], self.busy.selector)
            if busy is None:
                raise SourceFault(f"{self.busy.selector.text()} is not on {self.busy.url}")
            busy_s = busy * ms_per_unit(self.busy.selector.name) / 1000.0
        return Reading(t_s, count, found, busy_s=busy_s)

    def check(self) -> Reading:
        """Before the daemon starts tuning: the source answers and has the counter."""
        return self.read()


def ms_per_unit(histogram: str) -> float:
    """A latency histogram's (or a busy counter's) unit from its name, as Prometheus names
    units: `..._seconds` (vLLM's vllm:e2e_request_latency_seconds; the base unit, also where
    no unit is named), `..._ms`/`_milliseconds` (Triton's
    nv_inference_first_response_histogram_ms), `..._us` (nv_inference_compute_infer_duration_us)."""
    words = histogram.lower().replace(":", "_").split("_")
    if "ms" in words or "milliseconds" in words:
        return 1.0
    if "us" in words or "microseconds" in words:
        return 0.001
    return 1000.0


def share_over(bound: float, increase: Dict[float, float]) -> Optional[float]:
    """The share of a window's observations over `bound` (the histogram's unit), the count
    under it interpolated linearly inside its bucket as `quantile` does; None with none."""
    bounds = sorted(increase)
    if not bounds or increase[bounds[-1]] <= 0:
        return None
    total = increase[bounds[-1]]
    lower_bound, lower_count = 0.0, 0.0
    for b in bounds:
        count = increase[b]
        if bound <= b:
            if math.isinf(b):  # past the largest finite bound: all of the +Inf bucket over
                return (total - lower_count) / total
            under = lower_count + (count - lower_count) * (bound - lower_bound) / (
                b - lower_bound) if b > lower_bound else count
            return max(0.0, (total - under) / total)
        lower_bound, lower_count = b, count
    return 0.0


def window(first: Reading, last: Reading, quantiles: Sequence[float] = (0.5, 0.99),
           ms_per: float = 1000.0, deadline_ms: Optional[float] = None
           ) -> Optional[WindowRate]:
    """The rate between two readings; None across a counter reset or an empty span. The
    histogram's bounds are in units of `ms_per` milliseconds (ms_per_unit); with a deadline,
    the share of the window's observations over it."""
    seconds = last.t_s - first.t_s
    items = last.count - first.count
    if seconds <= 0 or items < 0:
        return None
    latency: Dict[str, float] = {}
    miss: Optional[float] = None
    if last.buckets:
        increase = {b: last.buckets[b] - first.buckets.get(b, 0.0) for b in last.buckets}
        if all(v >= 0 for v in increase.values()):
            for q in quantiles:
                value = quantile(q, increase)
                if value is not None:
                    latency[f"p{q * 100:g}"] = value * ms_per
            if deadline_ms is not None:
                miss = share_over(deadline_ms / ms_per, increase)
    busy: Optional[float] = None
    if first.busy_s is not None and last.busy_s is not None and last.busy_s >= first.busy_s:
        busy = (last.busy_s - first.busy_s) / seconds
    return WindowRate(items, seconds, items / seconds, latency, miss, busy)
