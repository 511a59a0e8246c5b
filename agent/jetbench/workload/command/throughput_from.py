"""`--throughput-from`: how a command's throughput is read from its output. Pure: lines in,
figures out (the command runner in workload/command/run.py feeds it).

    trtexec        trtexec's performance summary: `Throughput: N qps`, its latency and GPU
                   compute time statistics, the inference span
    regex:PATTERN  one group, a number in items/s; the last match wins. Matched by RE2 (no
                   backtracking: time linear in the line, whatever the pattern), so no
                   backreferences or lookaround; refused with one message before anything runs
    items:N        the command processes N items; the rate is N / its run time

trtexec's line formats come from its source, NVIDIA/TensorRT samples/common/sampleReporting.cpp
(printPerformanceReport/printProlog/printEpilog, TensorRT 8.x to 10.x):

    [I] Timing trace has 1234 queries over 3.00 s
    [I] === Performance summary ===
    [I] Throughput: 411.2 qps
    [I] Latency: min = 2.3 ms, max = 2.9 ms, mean = 2.4 ms, median = 2.4 ms,
        percentile(90%) = 2.5 ms, percentile(95%) = 2.6 ms, percentile(99%) = 2.8 ms   (one line)
    [I] GPU Compute Time: min = ... (same statistics)
    [I] Total Host Walltime: 3.00 s

each behind the logger's `[MM/DD/YYYY-HH:MM:SS] [I] ` prefix. Older releases print one
percentile (`percentile(99%)`) and an `End-to-End Host Latency:` line, which is not `Latency:`.
In that file the throughput is `batchSize * queries / walltime` where batchSize is trtexec's
own `--batch` (implicit-batch engines) and 1 for explicit-batch engines, whose query is one
inference of the whole engine batch: so items/s = qps x the batch in `--shapes` (or jetbench's
`--batch`), and qps alone when the command gives trtexec `--batch=N`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...errors import UsageError

KINDS = ("trtexec", "regex:PATTERN", "items:N")
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"

_PREFIX = r"^(?:\[[^\]]*\]\s*)*"  # trtexec's logger: "[11/22/2026-13:50:01] [I] "
_TRT_THROUGHPUT = re.compile(_PREFIX + rf"Throughput:\s*({NUMBER})\s*qps")
_TRT_STATS = re.compile(_PREFIX + r"(Latency|GPU Compute Time):\s*(min\s*=.*)$")
_TRT_TRACE = re.compile(_PREFIX + rf"Timing trace has (\d+) queries over ({NUMBER}) s")
_TRT_WALLTIME = re.compile(_PREFIX + rf"Total Host Walltime:\s*({NUMBER})\s*s")
_TRT_KEYS = ("Throughput:", "Latency:", "GPU Compute Time:", "Timing trace", "Walltime:")
_STAT = re.compile(rf"(min|max|mean|median|percentile\(({NUMBER})%\))\s*=\s*({NUMBER})\s*ms")


@dataclass(frozen=True)
class ThroughputFrom:
    """A parsed `--throughput-from`."""

    kind: str  # "trtexec", "regex" or "items"
    pattern: Optional[str] = None
    items: Optional[float] = None

    def text(self) -> str:
        if self.kind == "regex":
            return f"regex:{self.pattern}"
        if self.kind == "items":
            return f"items:{self.items:g}"
        return self.kind


# google-re2 ships no type information: its compiled pattern is Any here.
Re2Pattern = Any


def compile_user_pattern(pattern: str, multiline: bool = False) -> Re2Pattern:
    """A user's pattern compiled by RE2, which matches in time linear in the text (Python's
    re backtracks: `^(?:a+)+b([0-9])$` on 34 a's runs for minutes). UsageError where RE2
    cannot run it (a syntax error, a backreference, lookaround)."""
    import re2

    options = re2.Options()
    try:
        options.log_errors = False  # the error is our one message, not RE2's log line
    except AttributeError:  # pragma: no cover - a google-re2 without the option
        pass
    try:
        return re2.compile(("(?m)" if multiline else "") + pattern, options)
    except re2.error as err:
        why = err.args[0] if err.args else err
        why = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
        raise UsageError(f"--throughput-from regex:{pattern}: not a regular expression "
                         f"jetbench can match in linear time ({why})",
                         hint="RE2 syntax: no backreferences (\\1) or lookaround (?=...); "
                              r"e.g. regex:^eval rate: +([0-9.]+) tokens/s") from None


def parse_throughput_from(text: str) -> ThroughputFrom:
    """'trtexec', 'regex:PATTERN' (exactly one group) or 'items:N' (N > 0); UsageError else."""
    kind, sep, arg = text.partition(":")
    kind = kind.strip().lower()
    if kind == "trtexec" and not sep:
        return ThroughputFrom("trtexec")
    if kind == "regex" and sep:
        groups = compile_user_pattern(arg).groups
        if groups != 1:
            raise UsageError(f"--throughput-from regex:{arg}: needs exactly one group, the "
                             f"number (it has {groups})",
                             hint=r"e.g. regex:^eval rate: +([0-9.]+) tokens/s")
        return ThroughputFrom("regex", pattern=arg)
    if kind == "items" and sep:
        try:
            items = float(arg)
        except ValueError:
            items = 0.0
        if not (items > 0 and math.isfinite(items)):
            raise UsageError(f"--throughput-from items:{arg}: N must be a positive number")
        return ThroughputFrom("items", items=items)
    raise UsageError(f"--throughput-from {text!r}: expected one of {', '.join(KINDS)}")


def stats_ms(text: str) -> Dict[str, float]:
    """'min = 1 ms, max = 3 ms, mean = 2 ms, median = 2 ms, percentile(99%) = 3 ms' ->
    {'min': 1, 'max': 3, 'mean': 2, 'p50': 2, 'p99': 3} (the result schema's latency keys)."""
    out: Dict[str, float] = {}
    for name, pct, value in _STAT.findall(text):
        if name == "median":
            key = "p50"
        elif pct:
            key = f"p{float(pct):g}"
        else:
            key = name
        out[key] = float(value)
    return out


@dataclass
class OutputParser:
    """Fed the command's output line by line (both streams); keeps what its kind needs, the
    last match winning."""

    spec: ThroughputFrom
    value: Optional[float] = None  # qps for trtexec, the group's number for a regex
    latency_ms: Dict[str, float] = field(default_factory=dict)
    gpu_compute_ms: Dict[str, float] = field(default_factory=dict)
    queries: Optional[int] = None  # trtexec's timed queries
    inference_s: Optional[float] = None  # trtexec's span of timed queries
    trace_line_t_s: Optional[float] = None  # when that line arrived (the span's end)
    walltime_s: Optional[float] = None

    def __post_init__(self) -> None:
        pattern = self.spec.pattern
        self._regex = compile_user_pattern(pattern) if pattern is not None else None
        # a block of lines holds a line's match only if this finds one: a cheap first look
        self._in_block = compile_user_pattern(pattern, multiline=True) \
            if pattern is not None else None

    def feed_block(self, text: str, t_s: Optional[float] = None) -> None:
        """Whole lines joined by newlines, as they arrived together: looked at line by line
        only where something of interest is in the block (chatty commands stay cheap)."""
        if self._in_block is not None:
            wanted = self._in_block.search(text) is not None
        else:
            wanted = self.spec.kind == "trtexec" and any(k in text for k in _TRT_KEYS)
        if wanted:
            for line in text.split("\n"):
                self.feed(line, t_s)

    def feed(self, line: str, t_s: Optional[float] = None) -> None:
        """One line of output; `t_s`: when it arrived (time.monotonic)."""
        if self._regex is not None:
            matches = list(self._regex.finditer(line))
            if matches:
                number = _number(matches[-1].group(1))
                if number is not None:
                    self.value = number
            return
        if self.spec.kind != "trtexec":
            return
        line = line.rstrip("\r\n")
        m = _TRT_THROUGHPUT.search(line)
        if m:
            self.value = float(m.group(1))
            return
        m = _TRT_STATS.search(line)
        if m:
            target = self.latency_ms if m.group(1) == "Latency" else self.gpu_compute_ms
            target.clear()
            target.update(stats_ms(m.group(2)))
            return
        m = _TRT_TRACE.search(line)
        if m:
            self.queries, self.inference_s = int(m.group(1)), float(m.group(2))
            self.trace_line_t_s = t_s
            return
        m = _TRT_WALLTIME.search(line)
        if m:
            self.walltime_s = float(m.group(1))

    def missing(self) -> Optional[str]:
        """Why no throughput can be read from what was fed (None: it can)."""
        if self.spec.kind == "items" or self.value is not None:
            return None
        if self.spec.kind == "trtexec":
            return "no `Throughput: N qps` line (trtexec's performance summary) in its output"
        return f"no line matched regex {self.spec.pattern!r}"


def _number(text: Optional[str]) -> Optional[float]:
    try:
        return float(text.replace(",", "")) if text is not None else None
    except ValueError:
        return None


# -- the batch of a trtexec command ---------------------------------------------------------
def _option_values(argv: Sequence[str], name: str) -> List[str]:
    """Every value of `--name=V` or `--name V` in argv."""
    out = []
    for i, arg in enumerate(argv):
        if arg.startswith(f"{name}="):
            out.append(arg[len(name) + 1:])
        elif arg == name and i + 1 < len(argv):
            out.append(argv[i + 1])
    return out


def shapes_batch(argv: Sequence[str]) -> Tuple[Optional[int], List[str]]:
    """The batch in trtexec's `--shapes=input:8x3x224x224[,mask:8x128]`: each input's first
    dimension; (None, []) without --shapes; a note when the inputs disagree."""
    firsts: List[int] = []
    for value in _option_values(argv, "--shapes"):
        for part in value.split(","):
            dims = part.rsplit(":", 1)[-1].strip().strip("'\"")
            head = dims.split("x", 1)[0]
            if head.isdigit() and int(head) > 0:
                firsts.append(int(head))
    if not firsts:
        return None, []
    notes = [] if len(set(firsts)) == 1 else [
        f"--shapes gives inputs different first dimensions {sorted(set(firsts))}: the first "
        f"({firsts[0]}) is taken as the batch"]
    return firsts[0], notes


def implicit_batch(argv: Sequence[str]) -> Optional[int]:
    """trtexec's own `--batch=N` (implicit-batch engines): its qps already counts samples."""
    values = _option_values(argv, "--batch")
    return int(values[-1]) if values and values[-1].isdigit() else None
