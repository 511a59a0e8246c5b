"""The result document (`jetbench.result/1`): one JSON file per measured configuration.

Results are plain dicts (what the JSON holds) built here, with small accessors the tables,
plots and comparisons share, so a file written by an older jetbench reads the same way.
Units are in key names (`_hz`, `_w`, `_j`, `_s`, `_ms`); `None` means "not measured".
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import (
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

from .. import documents
from ..documents import ResultDoc
from ..errors import UsageError
from ..units import format_hz
from ..work_units import DEFAULT_UNIT
from ..workload.runtimes.onnx.providers import short_name

SCHEMA = "jetbench.result/1"
TIME_SCHEMA = "jetbench.time/1"  # `jetbench time`'s document (run/timing.py)
STATUSES = ("ok", "oom", "unavailable", "failed", "mismatch")  # failed: a sweep point that
# raised; mismatch: a --runtime whose outputs differ from PyTorch eager (not timed)
# workload.framework: what ran it (absent in results older than ONNX support: pytorch;
# "command": an external command, `measure --cmd`)
FRAMEWORKS = ("pytorch", "onnxruntime", "tensorrt", "command", "sim")  # sim: --model sim:NAME
# interrupted (optional): on a result finished after an interrupt had arrived (its window was
# over): what interrupted the run, "SIGINT", "SIGTERM" or "lease revoked" (docs/measure.md,
# Interrupts).
INTERRUPT_CAUSES = ("SIGINT", "SIGTERM", "lease revoked")


def point_id(model: str, precision: str, batch: int, gpu_hz: Optional[int]) -> str:
    """File stem of one configuration: 'alexnet-fp32-b1-gpu691mhz' (no GPU pin: no suffix)."""
    name = re.sub(r"[^A-Za-z0-9_.]+", "_", model.rsplit("/", 1)[-1]).strip("_") or "model"
    stem = f"{name}-{precision}-b{batch}"
    if gpu_hz:
        stem += f"-gpu{gpu_hz / 1e6:.0f}mhz"
    return stem


# The types of a result's keys, so a file with a wrong type anywhere is one message, not a
# TypeError deep in a table. A spec is one of the four kinds, None (anything), a list of one
# spec ([X]: a list of X, never null, nor its items), or an object's keys (others are free;
# "NAME!" must be there and not null; "*" any key). Other keys may be absent or null ("not
# measured"). It is derived from documents.py's ResultDoc (result_types), the shape's one home.
NUM, STR, BOOL, INT = "number", "string", "boolean", "integer"
Spec = Union[str, None, List["Spec"], Dict[str, "Spec"]]
_REQUIRED = documents.REQUIRED["ResultDoc"]  # never null


def _is_typed_dict(tp: object) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__")


def spec_of(tp: object, whole: bool = False) -> Spec:
    """The spec (see above) of a type as documents.py writes one: a TypedDict is an object of
    its keys (documents.REQUIRED, WHOLE, OPEN_KEYS by its name), List[X] [X], Dict[str, X]
    {"*": X}, Optional[X] X (a key may be null anyway), int or float a number (an int in
    WHOLE an integer), object anything. Any other type is a TypeError: a shape this cannot
    check is a mistake in documents.py, found by the tests, not a check left out."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union:
        types = [a for a in args if a is not type(None)]
        if len(types) != 1:
            raise TypeError(f"documents.py: {tp} is not one type or None")
        return spec_of(types[0], whole)
    if origin is list:
        if get_origin(args[0]) is Union and type(None) in get_args(args[0]):
            raise TypeError(f"documents.py: {tp}: a list's items are never null")
        return [spec_of(args[0])]
    if origin is dict:
        return {"*": spec_of(args[1])}
    if _is_typed_dict(tp):
        return _object_spec(cast(type, tp))
    kinds: Dict[object, Spec] = {bool: BOOL, int: INT if whole else NUM, float: NUM, str: STR,
                                 object: None}
    if tp in kinds:
        return kinds[tp]
    raise TypeError(f"documents.py: no spec for {tp!r}")


def _object_spec(typed: type) -> Dict[str, Spec]:
    name = typed.__name__
    required = documents.REQUIRED.get(name, ())
    whole = documents.WHOLE.get(name, ())
    opened = documents.OPEN_KEYS.get(name, {})
    out: Dict[str, Spec] = {}
    for key, tp in get_type_hints(typed).items():
        spec = spec_of(tp, key in whole)
        if key in opened:  # an open dict: the keys readers take checked, the others free
            keys = _object_spec(getattr(documents, opened[key]))
            spec = {**keys, "*": spec["*"]} if isinstance(spec, dict) else keys
        out[f"{key}!" if key in required else key] = spec
    return out


@lru_cache(maxsize=None)
def result_types() -> Dict[str, Spec]:
    """ResultDoc's spec: what check() holds a file to (worked out at the first check, not at
    start-up)."""
    return _object_spec(ResultDoc)


_KIND = {NUM: (int, float), STR: (str,), BOOL: (bool,), INT: (int,)}


def type_problem(value: object, spec: Spec, where: str) -> Optional[str]:
    """Where a document leaves `spec` (see Spec), first found; None when it fits."""
    stack: List[Tuple[object, Spec, str, bool]] = [(value, spec, where, True)]
    while stack:
        node, want, at, nullable = stack.pop()
        if want is None:
            continue
        if node is None:
            if nullable:
                continue
            return f"{at} is null"
        if isinstance(want, dict):
            if not isinstance(node, dict):
                return f"{at} is {_what(node)}, expected an object"
            for key in want:
                if key.endswith("!") and node.get(key[:-1]) is None:
                    return f"{at}.{key[:-1]} is missing or null"
            for key, sub in node.items():
                inner = want.get(key, want.get(f"{key}!", want.get("*")))
                stack.append((sub, inner, f"{at}.{key}" if at else str(key), True))
        elif isinstance(want, list):
            if not isinstance(node, list):
                return f"{at} is {_what(node)}, expected a list"
            # a list's items are never null
            stack.extend((item, want[0], f"{at}[{k}]", False) for k, item in enumerate(node))
        elif not isinstance(node, _KIND[want]) or (want != BOOL and isinstance(node, bool)):
            return f"{at} is {_what(node)}, expected {'an' if want == INT else 'a'} {want}"
        elif want in (NUM, INT) and not (isinstance(node, float) and node != node) \
                and isinstance(node, (int, float)) and abs(node) > 1e300:
            return f"{at} is out of range"
    return None


def _what(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def check(doc: object, where: str = "result") -> ResultDoc:
    """The document if it is a jetbench result; a UsageError naming `where` otherwise."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise UsageError(f"{where}: not a jetbench result (schema {str(found)[:80]!r}, "
                         f"expected {SCHEMA!r})")
    for key in ("simulated", "board", "settings", "workload", "status"):
        if key not in doc:
            raise UsageError(f"{where}: a {SCHEMA} document without {key!r}")
    for key in _REQUIRED:
        if doc[key] is None:
            raise UsageError(f"{where}: {key} is null")
    problem = type_problem(doc, result_types(), "")
    if problem:
        raise UsageError(f"{where}: not a valid {SCHEMA} document: {problem[:200]}")
    work = doc["workload"] if isinstance(doc["workload"], dict) else {}
    if isinstance(doc["workload"], dict) and framework(doc) not in FRAMEWORKS:
        raise UsageError(f"{where}: workload.framework {work.get('framework')!r} is none of "
                         f"{', '.join(FRAMEWORKS)}")
    if framework(doc) == "onnxruntime" and doc["status"] == "ok" \
            and not isinstance(work.get("provider"), str):
        raise UsageError(f"{where}: an ONNX Runtime result without workload.provider")
    return cast(ResultDoc, doc)  # its shape checked above (result_types)


# -- accessors (tolerant: a missing figure is None, never 0) --------------------------------
# They take any mapping (a ResultDoc being built, a dict read from a file) and narrow what they
# find to the type they promise: a file's wrong type was refused by check() already.
Doc = Mapping[str, object]


def _get(doc: Doc, *keys: str) -> object:
    node: object = doc
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _number(value: object) -> Optional[float]:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def number(doc: Doc, key: str) -> Optional[float]:
    """`doc[key]` when it is a number (a bool is not), else None: a figure by its name."""
    return _number(doc.get(key))


def _text(value: object) -> Optional[str]:
    return value if isinstance(value, str) else None


def _mapping(value: object) -> Doc:
    return value if isinstance(value, Mapping) else {}


def framework(doc: Doc) -> Optional[str]:
    """'pytorch', 'onnxruntime' or 'tensorrt' (results written before the field: pytorch)."""
    work = doc.get("workload")
    return _text(work.get("framework", "pytorch")) if isinstance(work, Mapping) else None


def provider(doc: Doc) -> Optional[str]:
    """ONNX Runtime's execution provider ('CUDAExecutionProvider'); None for other frameworks."""
    return _text(_get(doc, "workload", "provider"))


def runtime_label(work: Doc) -> str:
    """What ran a `workload` object (its --runtime; absent in older results: the framework's,
    else torch), ONNX Runtime with its execution provider: 'onnxruntime (cpu)'."""
    runtime = work.get("runtime")
    if not runtime:
        kind = work.get("framework")
        runtime = kind if kind in ("onnxruntime", "tensorrt") else "torch"
    ep = work.get("provider") if runtime == "onnxruntime" else None
    return f"{runtime} ({short_name(ep)})" if isinstance(ep, str) and ep else str(runtime)


def images_per_s(doc: Doc) -> Optional[float]:
    return _number(_get(doc, "throughput", "images_per_s"))


def unit(doc: Doc) -> str:
    """What the result counts (`throughput.unit`; results before units: images)."""
    return _text(_get(doc, "throughput", "unit")) or _text(_get(doc, "workload", "unit")) \
        or DEFAULT_UNIT


def items_per_s(doc: Doc) -> Optional[float]:
    """The throughput in the result's own unit (`unit(doc)`) per second."""
    value = _number(_get(doc, "throughput", "items_per_s"))
    return value if value is not None else images_per_s(doc)


def items_per_j(doc: Doc) -> Optional[float]:
    """Units of work per joule (img/s/W for images, tokens/J for tokens...)."""
    eff = doc.get("efficiency")
    if isinstance(eff, Mapping) and "items_per_j" in eff:
        return _number(eff["items_per_j"])
    return images_per_j(doc)


def latency_ms(doc: Doc, stat: str = "p50") -> Optional[float]:
    return _number(_get(doc, "throughput", "latency_ms", stat))


def timed_iterations(doc: Doc) -> Optional[float]:
    """How many iterations (batches) the timed window held (None: unknown, as a command's)."""
    return _number(_get(doc, "throughput", "iterations"))


def total_w(doc: Doc) -> Optional[float]:
    return _number(_get(doc, "power", "total", "mean_w"))


def total_w_pct(doc: Doc) -> Optional[float]:
    """The total power's uncertainty in percent (None: unknown or not recorded)."""
    return _number(_get(doc, "power", "total", "mean_w_uncertainty_pct"))


def total_sensor_pct(doc: Doc) -> Optional[float]:
    """The part of the total power's uncertainty that is the meters' datasheet limits, in
    percent: the same in every reading on the same meters (None: unknown)."""
    sensor = _number(_get(doc, "power", "total", "uncertainty", "sensor_w"))
    mean = total_w(doc)
    return None if sensor is None or not mean else 100.0 * sensor / abs(mean)


def total_label(doc: Doc) -> Optional[str]:
    total = _get(doc, "power", "total")
    if not isinstance(total, Mapping) or not total:
        return None
    return f"{total.get('name') or '?'}, {str(total.get('point') or '?').replace('_', ' ')}"


def throughput_pct(doc: Doc) -> Optional[float]:
    """The rate's uncertainty in percent, as the efficiency's was worked out (None: unknown)."""
    return _number(_get(doc, "efficiency", "uncertainty", "throughput_pct"))


def images_per_j(doc: Doc) -> Optional[float]:
    return _number(_get(doc, "efficiency", "images_per_j"))


def images_per_j_pct(doc: Doc) -> Optional[float]:
    """img/s/W's (or any unit's per-J figure's) uncertainty in percent (None: unknown or not
    recorded)."""
    return _number(_get(doc, "efficiency", "uncertainty", "images_per_j_pct"))


def gpu_hz(doc: Doc) -> Optional[int]:
    """The GPU clock the run was measured at: the clock that runs for its request (the pin's
    resolution: under a cap that is no table entry, the entry below it, not the knob's value);
    the knob read back where nothing was asked (a result from before `resolved` was kept)."""
    hz = _number(_get(doc, "settings", "resolved", "gpu_hz"))
    if hz is None:  # a result from before `resolved`: the clock sampled, where it held still
        observed = _get(doc, "clocks", "observed")
        steady = [c for c in observed if isinstance(c, Mapping) and c.get("domain") == "gpu"
                  and c.get("min_hz") is not None and c.get("min_hz") == c.get("max_hz")] \
            if isinstance(observed, list) else []
        hz = _number(steady[0]["min_hz"]) if len(steady) == 1 else None
    if hz is None:
        hz = _number(_get(doc, "settings", "applied", "gpu_hz"))
    return None if hz is None else int(hz)


def cv_pct(doc: Doc) -> Optional[float]:
    """The rate's spread, %: the latency CV of its window (None where it was not measured),
    the uncertainty every img/s comparison uses (report/digits.separated)."""
    cv = _number(_get(doc, "throughput", "cv"))
    return None if cv is None else float(cv) * 100


def label(doc: Doc, with_clock: bool = True) -> str:
    """'alexnet FP32 b1 @ 691.2 MHz' for table columns and plot legends."""
    w = _mapping(doc.get("workload"))
    text = f"{w.get('model', '?')} {str(w.get('precision', '?')).upper()} b{w.get('batch', '?')}"
    if framework(doc) in ("onnxruntime", "tensorrt"):
        ep = provider(doc)
        text += f" ({framework(doc)}{' ' + ep.replace('ExecutionProvider', '') if ep else ''})"
    elif w.get("runtime") not in (None, "torch"):
        text += f" ({w['runtime']})"  # torchscript, compile
    hz = gpu_hz(doc)
    if with_clock and hz:
        text += f" @ {format_hz(hz)}"  # as every table and progress line writes a clock
    return text


def _label_parts(doc: Doc) -> Tuple[str, ...]:
    """label()'s parts: model, precision, batch, runtime (or provider), clock."""
    w = _mapping(doc.get("workload"))
    runtime = ""
    if framework(doc) in ("onnxruntime", "tensorrt"):
        ep = provider(doc)
        runtime = f"{framework(doc)}{' ' + ep.replace('ExecutionProvider', '') if ep else ''}"
    elif w.get("runtime") not in (None, "torch"):
        runtime = str(w["runtime"])
    hz = gpu_hz(doc)
    return (str(w.get("model", "?")), str(w.get("precision", "?")).upper(),
            f"b{w.get('batch', '?')}", runtime, format_hz(hz) if hz else "")


def differing_labels(docs: Sequence[Doc]) -> List[str]:
    """Each result named by what tells it apart from the others ('675.8 MHz', 'FP16 b8'), for
    answer lines; the whole label where nothing differs (one result, or equal settings)."""
    parts = [_label_parts(d) for d in docs]
    differ = [k for k in range(5) if len({p[k] for p in parts}) > 1]
    if not differ:
        return [label(d) for d in docs]
    return [" ".join(p[k] for k in differ if p[k]) or label(d) for p, d in zip(parts, docs)]


def is_ok(doc: Doc) -> bool:
    return doc.get("status") == "ok"


def is_valid(doc: Doc) -> bool:
    """False when the result says its clocks or its window do not hold (`validity`); results
    written before `validity` existed count as valid."""
    return bool(_mapping(doc.get("validity")).get("valid", True))


def invalid_reasons(doc: Doc) -> List[str]:
    reasons = _mapping(doc.get("validity")).get("reasons")
    return [str(r) for r in reasons] if isinstance(reasons, list) else []


def simulated_any(docs: Sequence[Doc]) -> bool:
    return any(bool(d.get("simulated")) for d in docs)
