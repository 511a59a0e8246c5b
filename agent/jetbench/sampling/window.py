"""Window results: per-channel mean watts, energy, samples, coverage and gaps, and each source's
total, computed from traces over [t0, t1] (pure: no threads, no files).

Energy conventions (documented in every result):
- `measured_energy_j` is the exact integral over the covered part of the window;
- `energy_j` is `mean_w x duration_s`: the covered mean extended over the gaps. When coverage is
  1.0 the two are equal; when it is lower the result says so (coverage, gaps, a warning).

A window is invalid (result.valid False, `require_valid()` raises MeasurementInvalid, exit 3)
when it is shorter than `min_periods` update periods of any source, or a channel has no covered
interval at all. Low coverage is only a warning: the orchestrator decides its own threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

from ..documents import PowerPoint
from ..errors import MeasurementInvalid
from ..hw.meters.base import KIND_ENERGY, Channel, Total
from .energy import integrate
from .trace import Trace

if TYPE_CHECKING:
    import numpy as np

MIN_PERIODS = 4  # a window must span at least this many sensor update periods
GAP_FACTOR = 5.0  # an interval longer than this many sampling intervals is a gap
WARN_COVERAGE = 0.95


@dataclass(frozen=True)
class Gap:
    start_s: float  # monotonic seconds, as in the trace
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class ChannelResult:
    channel: Channel
    mean_w: Optional[float]  # None: nothing covered (never 0)
    energy_j: Optional[float]  # mean_w x window duration
    measured_energy_j: Optional[float]  # exact integral over covered time
    samples: int  # valid samples inside the window
    coverage: float  # covered fraction of the window, 0..1
    gaps: Tuple[Gap, ...]
    valid: bool
    reason: Optional[str] = None

    def to_dict(self) -> PowerPoint:
        return {
            "name": self.channel.name,
            "source": self.channel.source,
            "point": self.channel.point,
            "mean_w": self.mean_w,
            "energy_j": self.energy_j,
            "measured_energy_j": self.measured_energy_j,
            "samples": self.samples,
            "coverage": self.coverage,
            "gaps": [[g.start_s, g.end_s] for g in self.gaps],
        }


@dataclass(frozen=True)
class TotalResult:
    """A source's whole-device figure: one channel (VDD_IN) or a named sum of channels."""

    source: str
    total: Total
    mean_w: Optional[float]
    energy_j: Optional[float]
    coverage: float
    valid: bool

    def to_dict(self) -> PowerPoint:
        return {
            "name": self.total.name,
            "source": self.source,
            "kind": self.total.kind,
            "channels": list(self.total.channels),
            "point": self.total.point,
            "describe": self.total.describe(),
            "mean_w": self.mean_w,
            "energy_j": self.energy_j,
            "coverage": self.coverage,
        }


@dataclass(frozen=True)
class WindowResult:
    t_start_s: float
    t_end_s: float
    channels: Tuple[ChannelResult, ...]
    totals: Tuple[TotalResult, ...]
    faults: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # source -> kind -> n
    reasons: Tuple[str, ...] = ()  # why the window is invalid (empty when valid)
    warnings: Tuple[str, ...] = ()

    @property
    def duration_s(self) -> float:
        return self.t_end_s - self.t_start_s

    @property
    def valid(self) -> bool:
        return not self.reasons

    @property
    def total(self) -> Optional[TotalResult]:
        """The first source's total (the primary meter is the first source given)."""
        return self.totals[0] if self.totals else None

    def channel(self, name: str) -> ChannelResult:
        """By channel name ('VDD_IN') or key ('ina3221/VDD_IN')."""
        for c in self.channels:
            if name in (c.channel.name, c.channel.key):
                return c
        raise KeyError(name)

    def require_valid(self) -> WindowResult:
        if self.reasons:
            raise MeasurementInvalid(
                "; ".join(self.reasons),
                hint="run more iterations or a longer --duration, or sample faster",
            )
        return self

    def to_dict(self) -> Dict[str, object]:  # the window as a whole (tests, debugging)
        return {
            "duration_s": self.duration_s,
            "channels": [c.to_dict() for c in self.channels],
            "total": self.total.to_dict() if self.total else None,
            "totals": [t.to_dict() for t in self.totals],
            "faults": {k: dict(v) for k, v in self.faults.items()},
            "valid": self.valid,
            "reasons": list(self.reasons),
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class SourceTrace:
    """What the window maths needs about one source."""

    name: str
    channels: Tuple[Channel, ...]
    total: Optional[Total]
    period_s: float  # the sensor's own update interval
    interval_s: float  # how often it was actually read (>= 0)
    trace: Trace


def compute_window(
    sources: Sequence[SourceTrace],
    t0: float,
    t1: float,
    *,
    min_periods: float = MIN_PERIODS,
    gap_factor: float = GAP_FACTOR,
    warn_coverage: float = WARN_COVERAGE,
) -> WindowResult:
    duration = t1 - t0
    channels: List[ChannelResult] = []
    totals: List[TotalResult] = []
    reasons: List[str] = []
    warnings: List[str] = []
    faults: Dict[str, Dict[str, int]] = {}
    for src in sources:
        step = max(src.period_s, src.interval_s)
        if duration < min_periods * step:
            reasons.append(
                f"the window ({duration * 1000:.1f} ms) is shorter than {min_periods:g} update "
                f"periods of {src.name} ({min_periods:g} x {step * 1000:.1f} ms)"
            )
        max_gap = gap_factor * step
        t, v = src.trace.slice(t0, t1)
        by_name: Dict[str, ChannelResult] = {}
        for i, ch in enumerate(src.channels):
            res = _channel(ch, t, v[:, i], t0, t1, max_gap)
            if not res.valid:
                reasons.append(f"{ch.key}: {res.reason}")
            elif res.coverage < warn_coverage:
                warnings.append(
                    f"{ch.key}: only {res.coverage:.1%} of the window covered "
                    f"({len(res.gaps)} gap(s), {sum(g.duration_s for g in res.gaps):.3f} s)"
                )
            channels.append(res)
            by_name[ch.name] = res
        if src.total is not None:
            totals.append(_total(src.name, src.total, by_name))
        counts = src.trace.faults(t0, t1)
        if counts:
            faults[src.name] = counts
            warnings.append(
                f"{src.name}: faults during the window: "
                + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
            )
    return WindowResult(t0, t1, tuple(channels), tuple(totals), faults, tuple(reasons),
                        tuple(warnings))


def _channel(
    ch: Channel, t: np.ndarray, y: np.ndarray, t0: float, t1: float, max_gap: float
) -> ChannelResult:
    integral = integrate(t, y, t0, t1, counter=ch.kind == KIND_ENERGY, max_gap_s=max_gap)
    gaps = tuple(Gap(a, b) for a, b in integral.gaps)
    if integral.covered_s <= 0:
        return ChannelResult(ch, None, None, None, integral.samples, 0.0, gaps, False,
                             "no valid samples in the window")
    mean = integral.mean_w
    return ChannelResult(
        ch, mean, mean * integral.duration_s, integral.energy_j, integral.samples,
        integral.coverage, gaps, True,
    )


def _total(source: str, total: Total, by_name: Mapping[str, ChannelResult]) -> TotalResult:
    parts = [by_name.get(name) for name in total.channels]
    if any(p is None or p.mean_w is None for p in parts) or not parts:
        cov = min((p.coverage for p in parts if p is not None), default=0.0)
        return TotalResult(source, total, None, None, cov, False)
    mean = math.fsum(p.mean_w for p in parts)  # type: ignore[union-attr,misc]
    energy = math.fsum(p.energy_j for p in parts)  # type: ignore[union-attr,misc]
    cov = min(p.coverage for p in parts)  # type: ignore[union-attr]
    return TotalResult(source, total, mean, energy, cov, all(p.valid for p in parts))  # type: ignore[union-attr]
