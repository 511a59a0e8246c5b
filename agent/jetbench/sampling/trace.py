"""Compact storage of timestamped samples.

A `Trace` keeps one source's samples in two `array('d')` buffers (timestamps, and values in
row-major order), so hours of sampling cost 8 bytes per value and no Python object per sample.
`None` is stored as NaN and comes back as NaN (never 0). A fault is stored as a NaN row at the
moment it happened, so the interval around it becomes a gap in the integration, plus an entry in
a short list of fault events.
"""

from __future__ import annotations

import bisect
import math
import threading
from array import array
from typing import IO, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np

NAN = math.nan


class Trace:
    """Append-only samples of `n_channels` values. Thread-safe for one writer, many readers."""

    def __init__(self, n_channels: int):
        self.n_channels = n_channels
        self._t = array("d")
        self._v = array("d")
        self._faults: List[Tuple[float, str]] = []
        self._lock = threading.Lock()
        self._nan_row = (NAN,) * n_channels

    def __len__(self) -> int:
        return len(self._t)

    @property
    def nbytes(self) -> int:
        return (len(self._t) + len(self._v)) * 8

    def append(self, t_s: float, values: Sequence[Optional[float]]) -> None:
        """Add one sample; `values` in channel order, None for not available."""
        floats = ([NAN if v is None else v for v in values] if None in values
                  else cast("Sequence[float]", values))  # no None in it
        with self._lock:
            if self._t and t_s < self._t[-1]:
                t_s = self._t[-1]  # keep time sorted even if a clock read raced
            self._t.append(t_s)
            self._v.extend(floats)

    def extend(self, t_s: np.ndarray, values: np.ndarray) -> None:
        """Add a block of samples at once: t_s[n] and values[n, >= n_channels] (the first
        n_channels columns are kept; NaN = not available). No Python object per sample."""
        if not len(t_s):
            return
        t = np.maximum.accumulate(np.asarray(t_s, dtype=np.float64))
        v = np.ascontiguousarray(values[:, : self.n_channels], dtype=np.float64)
        with self._lock:
            if self._t and t[0] < self._t[-1]:
                t = np.maximum(t, self._t[-1])  # keep time sorted, as append() does
            self._t.frombytes(t.tobytes())
            self._v.frombytes(v.tobytes())

    def mark_fault(self, t_s: float, kind: str) -> None:
        """Record a fault: a NaN row (the neighbouring intervals become a gap) and an event."""
        with self._lock:
            if self._t and t_s < self._t[-1]:
                t_s = self._t[-1]
            self._t.append(t_s)
            self._v.extend(self._nan_row)
            self._faults.append((t_s, kind))

    def last_t(self) -> Optional[float]:
        with self._lock:
            return self._t[-1] if self._t else None

    def count_after(self, t_s: float) -> int:
        """How many samples have a timestamp >= t_s."""
        with self._lock:
            return len(self._t) - bisect.bisect_left(self._t, t_s)

    def faults(self, t0: float = -math.inf, t1: float = math.inf) -> Dict[str, int]:
        """Fault counts by kind within [t0, t1]."""
        with self._lock:
            events = list(self._faults)
        counts: Dict[str, int] = {}
        for t, kind in events:
            if t0 <= t <= t1:
                counts[kind] = counts.get(kind, 0) + 1
        return counts

    def slice(self, t0: float, t1: float) -> Tuple[np.ndarray, np.ndarray]:
        """Samples covering [t0, t1], including the last one before t0 and the first after t1
        (the edges are interpolated between them). Returns (t_s[n], values[n, channels])."""
        with self._lock:
            i0 = max(bisect.bisect_right(self._t, t0) - 1, 0)
            i1 = min(bisect.bisect_left(self._t, t1) + 1, len(self._t))
            t = np.array(self._t[i0:i1], dtype=np.float64)
            v = np.array(self._v[i0 * self.n_channels : i1 * self.n_channels], dtype=np.float64)
        return t, v.reshape(len(t), self.n_channels)

    def arrays(self) -> Tuple[np.ndarray, np.ndarray]:
        """Copies of every sample: (t_s[n], values[n, channels])."""
        return self.slice(-math.inf, math.inf)


def write_csv(
    out: IO[str],
    t: np.ndarray,
    values: np.ndarray,
    names: Sequence[str],
    t0: float = 0.0,
) -> int:
    """Write samples as CSV (`t_s,<names...>`, time relative to t0, empty cell = not
    available). Returns the number of rows written."""
    out.write(",".join(["t_s", *names]) + "\n")
    for i in range(len(t)):
        cells = ["" if math.isnan(x) else repr(float(x)) for x in values[i]]
        out.write(f"{t[i] - t0:.6f}," + ",".join(cells) + "\n")
    return len(t)
