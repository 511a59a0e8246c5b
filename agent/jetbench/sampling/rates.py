"""How fast each power source was read, against how fast its sensor refreshes: a result's
`sampling`. A sensor read faster than it converts (an INA3221 refreshes once per conversion
cycle x averaging count) repeats its last reading: the trace then claims a resolution the
sensor never had, so the result says the rate that carried information."""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from ..documents import SamplingDoc
from .window import SourceTrace


def _hz(period_s: float) -> Optional[float]:
    return round(1.0 / period_s, 6) if period_s > 0 else None


def distinct_readings(values: np.ndarray) -> int:
    """Readings whose values differ from the reading before (the first counts; a sample with
    a missing value is no reading, and is skipped)."""
    readings = values[~np.isnan(values).any(axis=1)]
    if not len(readings):
        return 0
    return 1 + int(np.any(readings[1:] != readings[:-1], axis=1).sum())


def sampling_doc(traces: Sequence[SourceTrace], t0: float, t1: float) -> List[SamplingDoc]:
    """Per source over [t0, t1]: `requested_hz` (how often it was read; None for a source
    that pushes its readings), `sensor_hz` (how often its readings refresh), `effective_hz`
    (the slower of the two), `distinct_per_s` (readings that changed, per second) and the
    samples read."""
    out: List[SamplingDoc] = []
    duration = t1 - t0
    for src in traces:
        t, v = src.trace.slice(t0, t1)
        inside = (t >= t0) & (t <= t1)
        requested, sensor = _hz(src.interval_s), _hz(src.period_s)
        rates = [r for r in (requested, sensor) if r is not None]
        out.append({
            "source": src.name,
            "requested_hz": requested,
            "sensor_hz": sensor,
            "effective_hz": min(rates) if rates else None,
            "distinct_per_s": round(distinct_readings(v[inside]) / duration, 3)
            if duration > 0 else None,
            "samples": int(inside.sum()),
        })
    return out


def faster_than_sensor(traces: Sequence[SourceTrace]) -> List[str]:
    """One note per source read faster than its sensor refreshes (asked for with
    `?interval=`): its extra samples repeat readings."""
    return [f"{s.name}: read every {s.interval_s * 1000:g} ms (asked), but its sensor refreshes "
            f"every {s.period_s * 1000:g} ms: the extra samples repeat readings and add no "
            "resolution" for s in traces if 0 < s.interval_s < s.period_s * 0.999]
