"""`jetbench sweep`: `measure` over many GPU clocks (x batch x precision), each point written as
it completes, so an interrupted sweep resumes where it stopped (`resume=True` skips points whose
result file exists: the JSON is written last and atomically, so its presence means "done").
Out-of-memory points are recorded (status "oom") and skipped; any other failure of one point
(a network error, a Tegra allocation assert, a meter read error) is recorded as status "failed"
with its message, and the sweep goes on.

    --freq 307MHz..998MHz   every table entry in the range
    --freq all              every table entry
    --freq 614MHz,691MHz    a list (each resolved to the nearest entry)
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, Union

from ..documents import ResultDoc
from ..errors import PowerModeCap, UsageError
from ..hw.board import Board, detect
from ..hw.fs import Root
from ..profiles.targets import RANGE_TOLERANCE, mode_caps_now, table_hint
from ..report import schema
from ..report.digits import plus_minus_pct, significant
from ..report.verdict import EFFICIENCY, RATE, best_of, reading_of
from ..units import MAX, MIN, FreqSpec, format_hz, format_spec, resolve_freq
from ..work_units import efficiency_label, rate_label
from ..workload.model_arg import SIM
from .measure import MeasureReport, OnResult, Progress, measure

if TYPE_CHECKING:
    from ..distributed.messages import Leader
from .request import FreqSelection, MeasureRequest, parse_selection


def expand_freqs(selection: Union[str, FreqSelection], table: Sequence[int]) -> List[int]:
    """'307MHz..998MHz' / 'all' / '614MHz,max' -> table entries in Hz, ascending, unique."""
    chosen = parse_selection(selection) if isinstance(selection, str) else selection
    text = chosen.text
    if not table:
        raise UsageError("this board lists no GPU frequency table to sweep",
                         hint="give explicit frequencies, e.g. --freq 614MHz,691MHz")
    ordered = sorted(set(table))
    if chosen.kind == "all":
        return ordered
    if chosen.kind == "range":
        lo, hi = (_bound(chosen.specs[0], ordered), _bound(chosen.specs[1], ordered))
        if lo > hi:
            ends = [e.strip() for e in re.split(r"\.{2,}", text.strip())]
            raise UsageError(f"--freq: empty frequency range: {text!r} (its low end runs above "
                             "its high end)",
                             hint=f"did you mean {ends[-1]}..{ends[0]}? the low end comes first")
        picked = [f for f in ordered if lo <= f <= hi]
        if not picked:
            raise UsageError(f"--freq: no table entry in {text!r}",
                             hint=f"this GPU's table: {format_hz(ordered[0])} .. "
                                  f"{format_hz(ordered[-1])}")
        return picked
    out = set()
    for spec in chosen.specs:
        if isinstance(spec, int) and not (ordered[0] * (1 - RANGE_TOLERANCE) <= spec
                                          <= ordered[-1] * (1 + RANGE_TOLERANCE)):
            raise UsageError(f"--freq: {format_hz(spec)} is outside this board's range "
                             f"{format_hz(ordered[0])} .. {format_hz(ordered[-1])}",
                             hint=table_hint(ordered, spec, ordered[0], ordered[-1]))
        out.add(resolve_freq(spec, ordered))
    return sorted(out)


def _within_mode(root: Root, board: Board, request: MeasureRequest, chosen: FreqSelection,
                 table: Sequence[int]) -> Sequence[int]:
    """The GPU table a sweep may visit: under a power mode's GPU cap (no --beyond-power-mode),
    `all` and ranges stop at the cap, and a listed clock above it is refused before the first
    point (not after an hour of points)."""
    caps = None if request.beyond_power_mode or board.gpu is None else \
        mode_caps_now(root, board)
    if caps is None or caps.gpu_max_hz is None:
        return table
    cap = caps.gpu_max_hz
    if chosen.kind == "list":
        above = [format_spec(spec) for spec in chosen.specs
                 if isinstance(spec, int) and spec > cap * (1 + RANGE_TOLERANCE)]
        if above:
            raise PowerModeCap(f"--freq {', '.join(above)}: above the power mode's cap: mode "
                               f"{caps.mode.text} holds the GPU at {format_hz(cap)} or below",
                               hint=f"nothing was run; {caps.way_out()}")
    return [f for f in table if f <= cap]


def _bound(spec: FreqSpec, table: Sequence[int]) -> int:
    if spec == MAX:
        return table[-1]
    if spec == MIN:
        return table[0]
    assert isinstance(spec, int)
    # "307MHz" means the 307.2 MHz entry: widen by the table's rounding (2%)
    near = resolve_freq(spec, table)
    return near if abs(near - spec) <= 0.02 * spec else spec


@dataclass(frozen=True)
class SweepSummary:
    most_efficient: Optional[ResultDoc]
    fastest: Optional[ResultDoc]
    oom: List[str]
    points: int
    simulated: bool = False
    invalid: int = 0
    failed: List[str] = dataclasses.field(default_factory=list)
    modelled: bool = False  # every point a sim:NAME network: img/s follows the simulated clocks
    # the other points within noise of the most efficient / the fastest (report/verdict.py,
    # the one rule), and why no verdict could be given at all (an unknown uncertainty)
    efficient_ties: List[ResultDoc] = dataclasses.field(default_factory=list)
    fastest_ties: List[ResultDoc] = dataclasses.field(default_factory=list)
    efficient_why: Optional[str] = None
    fastest_why: Optional[str] = None
    names: Dict[int, str] = dataclasses.field(default_factory=dict)  # id(doc) -> its name

    def lines(self) -> List[str]:
        """What is worth knowing about the points, then the answer last: the most efficient
        point and the fastest (one line when they are the same point)."""
        out = []
        if self.oom:
            out.append("out of memory (recorded, skipped): " + ", ".join(self.oom))
        if self.failed:
            out.append("failed (recorded, the sweep went on): " + "; ".join(self.failed))
        if self.invalid:
            out.append(f"{self.invalid} invalid point(s) left out of the above (marked in the "
                       "table and the plots; reasons printed in red)")
        if self.simulated:
            out.append(MODELLED_THROUGHPUT_NOTE if self.modelled else SIMULATED_THROUGHPUT_NOTE)
        return out + self.answer()

    def answer(self) -> List[str]:
        """The most efficient point and the fastest (one line when they are the same point and
        neither has a tie), each named by what tells it apart from the other points: where
        others are within noise of it, they follow with their figures; where an uncertainty is
        unknown, no verdict and why (report/verdict.py, the one rule)."""
        out = []
        same = (self.fastest is not None and self.fastest is self.most_efficient
                and not self.efficient_ties and not self.fastest_ties
                and not self.efficient_why and not self.fastest_why)
        for word, doc, efficient in (
                ("most efficient and fastest" if same else "most efficient",
                 self.most_efficient, True),
                ("fastest", None if same else self.fastest, False)):
            if doc is None:
                continue
            why = self.efficient_why if efficient else self.fastest_why
            if why:
                out.append(f"{word}: no verdict: {why}")
                continue
            rate, eff = rate_label(schema.unit(doc)), efficiency_label(schema.unit(doc))
            ips, ipj = schema.items_per_s(doc), schema.items_per_j(doc)
            ipj_text = _pm(ipj, schema.images_per_j_pct(doc))
            ties = self.efficient_ties if efficient else self.fastest_ties
            if efficient:  # the answer first, then what it costs: each figure once
                figure, rest = f"{ipj_text} {eff}", f"{ips:.1f} {rate}, {_w(doc)}"
            else:
                figure, rest = f"{ips:.1f} {rate}", f"{_w(doc)}, {ipj_text} {eff}"
            line = f"{word}: {self._name(doc)}, {figure} ({rest})"
            if ties:
                line += " " + self._within_noise(ties, efficient)
            out.append(line)
        return out

    def _name(self, doc: ResultDoc) -> str:
        return self.names.get(id(doc)) or schema.label(doc)

    def _within_noise(self, ties: Sequence[ResultDoc], efficient: bool) -> str:
        """'(624.8 MHz within noise: 20.9; ...)': the points that cannot be told from it."""
        shown = []
        for d in ties[:_TIES_NAMED]:
            value = schema.items_per_j(d) if efficient else schema.items_per_s(d)
            shown.append(f"{self._name(d)} within noise: "
                         f"{significant(value, 3) if value is not None else '-'}")
        more = f"; and {len(ties) - _TIES_NAMED} more" if len(ties) > _TIES_NAMED else ""
        return "(" + "; ".join(shown) + more + ")"


_TIES_NAMED = 3  # an answer names this many points within noise of it, then "and N more"


def _best(docs: Sequence[ResultDoc], figure: str
          ) -> Tuple[Optional[ResultDoc], List[ResultDoc], Optional[str]]:
    """The best of `docs` by `figure` (report/verdict.py), those within noise of it, and why
    no verdict where an uncertainty is unknown."""
    if not docs:
        return None, [], None
    top, ties, why = best_of([reading_of(d, figure) for d in docs])
    if top is None:
        return docs[0], [], why
    return docs[top], [docs[i] for i in ties], None


def _pm(x: Optional[float], pct: Optional[float]) -> str:
    return plus_minus_pct(x, pct)


def _w(doc: ResultDoc) -> str:
    w = schema.total_w(doc)
    pct = schema.total_w_pct(doc)
    return "- W" if w is None else f"{_pm(w, pct)} W"


SIMULATED_THROUGHPUT_NOTE = (
    "simulated board: img/s comes from this machine's CPU and does not follow the simulated GPU "
    "clock (only the simulated power does), so the fastest clock above is not a finding")
MODELLED_THROUGHPUT_NOTE = (
    "simulated workload on a simulated board: img/s and W both follow the simulated clocks "
    "through the board's latency and power models (sim/workload_model.py, sim/power_model.py): "
    "a demonstration of the method, never a claim about hardware")


def summarize(results: Sequence[ResultDoc], simulated: bool = False) -> SweepSummary:
    ok = [d for d in results if schema.is_ok(d) and schema.is_valid(d)]
    eff = [d for d in ok if schema.items_per_j(d) is not None]
    most_efficient, efficient_ties, efficient_why = _best(eff, EFFICIENCY)
    fastest, fastest_ties, fastest_why = _best(ok, RATE)
    return SweepSummary(
        most_efficient=most_efficient, fastest=fastest,
        efficient_ties=efficient_ties, fastest_ties=fastest_ties,
        efficient_why=efficient_why, fastest_why=fastest_why,
        names={id(d): name for d, name in zip(ok, schema.differing_labels(ok))},
        oom=[d.get("id", schema.label(d)) for d in results if d.get("status") == "oom"],
        points=len(results),
        simulated=simulated or schema.simulated_any(list(results)),
        invalid=sum(1 for d in results if not schema.is_valid(d)),
        failed=[f"{d.get('id', schema.label(d))}: {d.get('message', '')}" for d in results
                if d.get("status") == "failed"],
        modelled=bool(results) and all((d.get("workload") or {}).get("framework") == SIM
                                       for d in results),
    )


def sweep(root: Root, request: MeasureRequest, freqs: Union[str, FreqSelection],
          progress: Optional[Progress] = None, ranks: Optional[Leader] = None,
          on_result: Optional[OnResult] = None) -> MeasureReport:
    """Every GPU clock of `freqs` (see module docstring) crossed with the request's models,
    precisions and batches. `request.out_dir` is required (points are written as they end)."""
    if request.out_dir is None:
        raise UsageError("a sweep needs --out DIR (each point is written as it completes)")
    board = detect(root)
    if board.gpu is None and not board.nvml_gpus:
        raise UsageError("this board has no GPU clock jetbench can set: nothing to sweep")
    table = board.gpu.available_hz if board.gpu else board.nvml_gpus[0].graphics_hz
    chosen = parse_selection(freqs) if isinstance(freqs, str) else freqs
    if chosen.kind == "list":
        # each item as asked: planning resolves it as measure's --freq (kept exactly, the
        # clock that runs and why it moved said once, a cap refused before the first point)
        specs: Tuple[FreqSpec, ...] = chosen.specs
    else:  # every table entry in the range (within the mode), as numbers: each runs itself
        specs = tuple(expand_freqs(chosen, _within_mode(root, board, request, chosen, table)))
    request = dataclasses.replace(request, gpu_freqs=specs, keep_going=True)
    return measure(root, request, progress=progress, command="sweep", on_result=on_result,
                   ranks=ranks)
