"""`--meter` specs: parsing and opening.

    auto | ina3221 | rapl | nvml | jtop | none   [?interval=1ms: how often the sampler reads
                              it, instead of the sensor's own period; for jtop, the interval
                              asked of the service]
    PROTOCOL:PORT[?options]   PROTOCOL in scpi, wt310, stream, um25c, um24c, um34c;
                              PORT is anything serial_for_url opens (/dev/ttyUSB0,
                              socket://127.0.0.1:5025, loop://);
                              options joined by '&': baud=9600, timeout=0.5 (s or 500ms),
                              interval=100ms, query=MEAS:POW?, vquery=..., iquery=...,
                              columns=ms,W, accuracy=0.1%+0.05W (the meter's
                              accuracy: % of reading + W; hw/meters/accuracy.py)

`auto` needs the board's rails: `auto_sources(root, rails, total_rail)` is the function board
detection calls (the rails, plus NVML where a Jetson's NVML reports power: Thor); it falls back
to RAPL, then NVML, then nothing (EmptySource).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from ...errors import UsageError
from ...units import parse_duration_s
from .. import nvml as nvml_api
from ..fs import Root
from .base import EmptySource, PowerSource
from .ina3221 import rail_sources, scan_rails
from .rapl import RaplSource, rapl_zones, unreadable_reason
from .scpi import ScpiMeter, Wt310Meter
from .serial_meter import SerialMeter
from .stream import StreamMeter
from .um25c import Um25cMeter

KEYWORDS = ("auto", "ina3221", "rapl", "nvml", "jtop", "none")
SERIAL_PROTOCOLS = ("scpi", "wt310", "stream", "um25c", "um24c", "um34c")
OPTIONS = {
    "scpi": ("baud", "timeout", "interval", "query", "vquery", "iquery"),
    "wt310": ("baud", "timeout", "interval", "query"),
    "stream": ("baud", "timeout", "interval", "columns"),
    "um25c": ("baud", "timeout", "interval"),
}
ACCURACY_OPTION = ("accuracy",)  # every serial meter: READING%+RANGE_W
KEYWORD_OPTIONS = ("interval",)  # the built-in sources (not `none`)
MIN_INTERVAL_S = 1e-4
_HINT = (
    "use auto, ina3221, rapl, nvml, jtop, none, or PROTOCOL:PORT[?options] with PROTOCOL one of "
    + ", ".join(SERIAL_PROTOCOLS)
    + " (e.g. scpi:/dev/ttyUSB0?baud=9600, stream:socket://127.0.0.1:5025?columns=ms,W)"
)


@dataclass(frozen=True)
class MeterSpec:
    kind: str  # a keyword or a serial protocol
    port: Optional[str] = None
    options: Dict[str, str] = field(default_factory=dict)

    @property
    def is_serial(self) -> bool:
        return self.kind in SERIAL_PROTOCOLS


def parse_meter_spec(text: str) -> MeterSpec:
    raw = text.strip()
    word, _, query = raw.partition("?")
    if word.lower() in KEYWORDS:
        kind = word.lower()
        options = _options(query, () if kind == "none" else KEYWORD_OPTIONS, kind)
        if "interval" in options:
            _interval_option(options["interval"], kind)
        return MeterSpec(kind, None, options)
    proto, sep, rest = raw.partition(":")
    proto = proto.lower()
    if not sep or proto not in SERIAL_PROTOCOLS:
        raise UsageError(f"unknown meter {text!r}", hint=_HINT)
    port, _, query = rest.partition("?")
    if not port:
        raise UsageError(f"meter {text!r} has no port", hint=_HINT)
    allowed = OPTIONS["um25c" if proto.startswith("um") else proto] + ACCURACY_OPTION
    options = _options(query, allowed, proto)
    if "accuracy" in options:
        from .accuracy import parse_accuracy

        parse_accuracy(options["accuracy"])  # a malformed figure is a usage error, now
    return MeterSpec(proto, port, options)


def _options(query: str, allowed: Sequence[str], kind: str) -> Dict[str, str]:
    """'a=1&b=2' -> {'a': '1', 'b': '2'}; an option the meter does not take is a usage error."""
    options: Dict[str, str] = {}
    for item in filter(None, query.split("&")):
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq or key not in allowed:
            raise UsageError(
                f"unknown option {item!r} for {kind} meters",
                hint="options: " + ", ".join(allowed) if allowed else f"{kind} takes no options",
            )
        options[key] = value.strip()
    return options


def _interval_option(text: str, kind: str) -> float:
    """`?interval=` of a built-in source: a duration from 0.1 ms (faster is no sampling)."""
    try:
        interval_s = parse_duration_s(text)
    except ValueError as err:
        raise UsageError(f"bad interval {text!r} for {kind}: {err}",
                         hint="e.g. ?interval=1ms") from err
    if not interval_s >= MIN_INTERVAL_S:
        raise UsageError(f"interval {text!r} for {kind} is below {MIN_INTERVAL_S * 1e3:g} ms",
                         hint="e.g. ?interval=1ms")
    return interval_s


def _with_interval(sources: List[PowerSource], spec: MeterSpec) -> List[PowerSource]:
    """Give each source of a keyword spec its `?interval=` (read by the samplers)."""
    if "interval" in spec.options:
        interval_s = _interval_option(spec.options["interval"], spec.kind)
        for source in sources:
            source.sample_interval_s = interval_s  # type: ignore[attr-defined]
    return sources


_RATE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(k?hz)?\s*$", re.IGNORECASE)


def with_sample_rate(specs: Sequence[str], rate: Optional[str]) -> List[str]:
    """`--sample-rate RATE` (`200Hz`, `1kHz`; a bare number is Hz): the meter specs with
    `?interval=` added to every source that has none of its own (an explicit one wins; `none`
    takes nothing). Without it each source is read no faster than its sensor refreshes; a
    rate above that is allowed and the result says once that the extra samples repeat
    readings (sampling/rates.py)."""
    if rate is None:
        return list(specs)
    match = _RATE_RE.match(rate)
    hz = float(match.group(1)) * (1000.0 if (match.group(2) or "").lower() == "khz" else 1.0) \
        if match else 0.0
    if not hz > 0:
        raise UsageError(f"not a sample rate: {rate!r}", hint="use e.g. 200Hz, 1kHz or 50")
    if 1.0 / hz < MIN_INTERVAL_S:
        raise UsageError(f"sample rate {rate!r} is above {1e-3 / MIN_INTERVAL_S:g} kHz",
                         hint="no sensor jetbench reads refreshes faster")
    interval = f"interval={1000.0 / hz:.6g}ms"
    out: List[str] = []
    for text in specs or ["auto"]:
        spec = parse_meter_spec(text)
        if spec.kind == "none" or "interval" in spec.options:
            out.append(text)
        else:
            out.append(text + ("&" if "?" in text else "?") + interval)
    return out


def _serial_kwargs(spec: MeterSpec) -> Dict[str, object]:
    opts = dict(spec.options)
    opts.pop("accuracy", None)  # not the driver's: read by the uncertainty (accuracy.py)
    kwargs: Dict[str, object] = {}
    try:
        if "baud" in opts:
            kwargs["baud"] = int(opts.pop("baud"))
        if "timeout" in opts:
            kwargs["timeout_s"] = parse_duration_s(opts.pop("timeout"))
        if "interval" in opts:
            kwargs["interval_s"] = parse_duration_s(opts.pop("interval"))
    except ValueError as err:
        raise UsageError(f"bad meter option in {spec.kind}:{spec.port}: {err}") from err
    kwargs.update(opts)
    return kwargs


def serial_source(spec: MeterSpec) -> PowerSource:
    """The driver for a PROTOCOL:PORT spec (nothing is opened)."""
    assert spec.port is not None
    kwargs = _serial_kwargs(spec)
    source: SerialMeter
    if spec.kind == "scpi":
        if ("vquery" in kwargs) != ("iquery" in kwargs):
            raise UsageError("scpi meters take vquery and iquery together")
        source = ScpiMeter(spec.port, **kwargs)  # type: ignore[arg-type]
    elif spec.kind == "wt310":
        source = Wt310Meter(spec.port, **kwargs)  # type: ignore[arg-type]
    elif spec.kind == "stream":
        source = StreamMeter(spec.port, **kwargs)  # type: ignore[arg-type]
    else:
        source = Um25cMeter(spec.port, protocol=spec.kind, **kwargs)
    source.accuracy_spec = spec.options.get("accuracy")
    return source


def nvml_source(gpu: Optional[object], notes: Optional[List[str]]) -> PowerSource:
    """NVML's source for the workload's GPU; a MIG slice's is its parent GPU's, said in `notes`
    (hw/nvml.mig_note)."""
    from ..cuda_map import CudaGpu, mig_note
    from .nvml import NvmlSource

    cuda = gpu if isinstance(gpu, CudaGpu) else None
    note = mig_note(cuda)
    if note and notes is not None and note not in notes:
        notes.append(note)
    return NvmlSource(gpu=cuda)


def open_sources(
    specs: Sequence[str],
    root: Root,
    rails: Sequence[object] = (),
    total_rail: Optional[str] = None,
    gpu: Optional[object] = None,
    notes: Optional[List[str]] = None,
) -> List[PowerSource]:
    """Sources for `--meter` specs (none given = auto). Constructed, not opened: the sampler
    opens them. `rails`/`total_rail` come from board detection (jetbench.hw.board); `gpu`
    (nvml.CudaGpu) is the workload's CUDA device, which NVML measures (None: NVML's GPU 0,
    or a CPU workload). `notes` receives why `auto` chose what it chose, for the result."""
    out: List[PowerSource] = []
    for text in specs or ["auto"]:
        spec = parse_meter_spec(text)
        if spec.kind == "auto":
            out.extend(_with_interval(
                list(auto_sources(root, rails, total_rail, gpu, notes)), spec))
        elif spec.kind == "none":
            continue
        elif spec.kind == "ina3221":
            from .ina3221 import rail_sources, scan_rails

            board_rails = list(rails) or scan_rails(root)
            if not board_rails:
                raise UsageError(
                    "no INA3221 rails on this machine", hint="see `jetbench info`"
                )
            # The board's rail sensors: the INA3221s, and Thor's INA238 beside them.
            out.extend(_with_interval(
                list(rail_sources(root, board_rails, total_rail)), spec))  # type: ignore[arg-type]
        elif spec.kind == "rapl":
            from .rapl import RaplSource

            out.extend(_with_interval([RaplSource(root)], spec))
        elif spec.kind == "nvml":
            out.extend(_with_interval([nvml_source(gpu, notes)], spec))
        elif spec.kind == "jtop":
            from .jtop import JtopSource

            if "interval" in spec.options:  # the service's cadence: asked of it at open
                out.append(JtopSource(_interval_option(spec.options["interval"], "jtop")))
            else:
                out.append(JtopSource())
        else:
            out.append(serial_source(spec))
    names = [s.name for s in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UsageError(f"the same meter is given twice: {', '.join(dupes)}")
    return out


def auto_sources(
    root: Root, rails: Sequence[object] = (), total_rail: Optional[str] = None,
    gpu: Optional[object] = None, notes: Optional[List[str]] = None,
) -> List[PowerSource]:
    """What `--meter auto` measures: the board's INA3221 rails if it has any; else, for a CUDA
    workload (`gpu` given) with NVML present, the GPU through NVML (its board power: RAPL
    would be the CPU package's); else RAPL zones if their counters are readable (root-only
    since 2020: unreadable ones are skipped, with the reason in `notes`); else an NVIDIA GPU
    through NVML; else nothing (an EmptySource: "not measured", never 0 W)."""
    said = notes if notes is not None else []

    board_rails = list(rails) or scan_rails(root)
    if board_rails:
        out: List[PowerSource] = list(rail_sources(root, board_rails, total_rail))  # type: ignore
        if root.is_host and nvml_api.nvml_power_supported():
            # A Jetson whose NVML reports power (Thor; Orin and older answer NotSupported):
            # the GPU's own figure beside the rails, at point gpu_board.
            out.append(nvml_source(gpu, said))
        return out
    nvml = root.is_host and nvml_api.nvml_available()
    zones = rapl_zones(root)
    if gpu is not None and nvml:
        if zones:
            said.append("meter auto: NVML (the CUDA GPU's board power), not RAPL (the CPU "
                        "package): add --meter rapl to record the CPU too")
        return [nvml_source(gpu, said)]
    if zones:
        reason = unreadable_reason(root)
        if reason is None:
            return [RaplSource(root)]
        said.append(f"meter auto: RAPL skipped: {reason}")
    if nvml:
        return [nvml_source(gpu, said)]
    return [EmptySource()]
