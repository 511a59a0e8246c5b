"""The result document (`jetbench.result/1`): one JSON file per measured configuration.

Results are plain dicts (what the JSON holds) built here, with small accessors the tables,
plots and comparisons share, so a file written by an older jetbench reads the same way.
Units are in key names (`_hz`, `_w`, `_j`, `_s`, `_ms`); `None` means "not measured".
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence

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


# The types of what readers (tables, plots, --compare, --by runtime) take from a result, so
# a file with a wrong type anywhere is one message, not a TypeError deep in a table. A dict is
# an object with these keys (others are free; "NAME!" must be there and not null); [X] a list
# of X (never null); "*" any key. Other keys may be absent or null ("not measured").
NUM, STR, BOOL, INT = "number", "string", "boolean", "integer"
_POINT = {"name!": STR, "point!": STR, "source!": STR, "kind": STR, "mean_w": NUM,
          "energy_j": NUM, "images_per_j": NUM, "items_per_j": NUM,
          "mean_w_uncertainty_pct": NUM, "samples": NUM, "coverage": NUM}
RESULT_TYPES: Dict[str, Any] = {
    "schema": STR, "status": STR, "simulated": BOOL, "id": STR, "message": STR,
    "created": STR, "warnings": [STR], "notes": [STR], "interrupted": STR,
    "board": {"model": STR, "soc": STR, "l4t": STR, "family": STR,
              "power_mode": {"text": STR, "caps_lifted": BOOL}},
    "settings": {"requested": {"*": None}, "applied": {"gpu_hz": NUM, "*": None}},
    "workload": {"model": STR, "precision": STR, "batch": INT, "framework": STR,
                 "provider": STR, "runtime": STR, "device": STR, "unit": STR},
    "throughput": {"images_per_s": NUM, "items_per_s": NUM, "unit": STR, "cv": NUM,
                   "latency_ms": {"*": NUM}},
    "power": {"total": _POINT, "totals": [_POINT], "channels": [_POINT],
              "phases_s": {"*": NUM}, "trace_csv": STR,
              "idle": {"total": _POINT}, "idle_unpinned": {"total": _POINT}},
    "devices": [{"device!": STR, "throughput": {"images_per_s": NUM}}],
    "scaling": {"efficiency": NUM, "devices": NUM, "baseline_images_per_s": NUM},
    "efficiency": {"images_per_j": NUM, "items_per_j": NUM, "by_point": [_POINT],
                   "above_idle": {"mean_w": NUM, "images_per_j": NUM, "items_per_j": NUM,
                                  "mean_w_uncertainty_pct": NUM},
                   "pre_regulation_estimate": {"regulator_efficiency!": NUM, "mean_w": NUM,
                                               "images_per_j": NUM, "items_per_j": NUM},
                   "uncertainty": {"power_pct": NUM, "throughput_pct": NUM,
                                   "images_per_j_pct": NUM, "basis": STR,
                                   "lower_it": [STR]}},
    "thermal": {"throttled": BOOL},
    "validity": {"valid": BOOL, "reasons": [STR]},
}
_REQUIRED = {"schema", "status", "simulated"}  # never null
_KIND = {NUM: (int, float), STR: (str,), BOOL: (bool,), INT: (int,)}


def type_problem(value: Any, spec: Any, where: str) -> Optional[str]:
    """Where a document leaves `spec` (see RESULT_TYPES), first found; None when it fits."""
    stack = [(value, spec, where, True)]
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


def _what(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def check(doc: Any, where: str = "result") -> Dict[str, Any]:
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
    problem = type_problem(doc, RESULT_TYPES, "")
    if problem:
        raise UsageError(f"{where}: not a valid {SCHEMA} document: {problem[:200]}")
    work = doc["workload"] if isinstance(doc["workload"], dict) else {}
    if isinstance(doc["workload"], dict) and framework(doc) not in FRAMEWORKS:
        raise UsageError(f"{where}: workload.framework {work.get('framework')!r} is none of "
                         f"{', '.join(FRAMEWORKS)}")
    if framework(doc) == "onnxruntime" and doc["status"] == "ok" \
            and not isinstance(work.get("provider"), str):
        raise UsageError(f"{where}: an ONNX Runtime result without workload.provider")
    return doc


# -- accessors (tolerant: a missing figure is None, never 0) --------------------------------
def _get(doc: Dict[str, Any], *keys: str) -> Any:
    node: Any = doc
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def framework(doc: Dict[str, Any]) -> Any:
    """'pytorch', 'onnxruntime' or 'tensorrt' (results written before the field: pytorch)."""
    work = doc.get("workload")
    return work.get("framework", "pytorch") if isinstance(work, dict) else None


def provider(doc: Dict[str, Any]) -> Optional[str]:
    """ONNX Runtime's execution provider ('CUDAExecutionProvider'); None for other frameworks."""
    return _get(doc, "workload", "provider")


def runtime_label(work: Dict[str, Any]) -> str:
    """What ran a `workload` object (its --runtime; absent in older results: the framework's,
    else torch), ONNX Runtime with its execution provider: 'onnxruntime (cpu)'."""
    runtime = work.get("runtime")
    if not runtime:
        kind = work.get("framework")
        runtime = kind if kind in ("onnxruntime", "tensorrt") else "torch"
    ep = work.get("provider") if runtime == "onnxruntime" else None
    return f"{runtime} ({short_name(ep)})" if isinstance(ep, str) and ep else str(runtime)


def images_per_s(doc: Dict[str, Any]) -> Optional[float]:
    return _get(doc, "throughput", "images_per_s")


def unit(doc: Dict[str, Any]) -> str:
    """What the result counts (`throughput.unit`; results before units: images)."""
    return _get(doc, "throughput", "unit") or _get(doc, "workload", "unit") or DEFAULT_UNIT


def items_per_s(doc: Dict[str, Any]) -> Optional[float]:
    """The throughput in the result's own unit (`unit(doc)`) per second."""
    value = _get(doc, "throughput", "items_per_s")
    return value if value is not None else images_per_s(doc)


def items_per_j(doc: Dict[str, Any]) -> Optional[float]:
    """Units of work per joule (img/s/W for images, tokens/J for tokens...)."""
    eff = doc.get("efficiency")
    if isinstance(eff, dict) and "items_per_j" in eff:
        return eff["items_per_j"]
    return images_per_j(doc)


def latency_ms(doc: Dict[str, Any], stat: str = "p50") -> Optional[float]:
    return _get(doc, "throughput", "latency_ms", stat)


def total_w(doc: Dict[str, Any]) -> Optional[float]:
    return _get(doc, "power", "total", "mean_w")


def total_w_pct(doc: Dict[str, Any]) -> Optional[float]:
    """The total power's uncertainty in percent (None: unknown or not recorded)."""
    return _get(doc, "power", "total", "mean_w_uncertainty_pct")


def total_label(doc: Dict[str, Any]) -> Optional[str]:
    total = _get(doc, "power", "total")
    if not total:
        return None
    return f"{total.get('name') or '?'}, {str(total.get('point') or '?').replace('_', ' ')}"


def images_per_j(doc: Dict[str, Any]) -> Optional[float]:
    return _get(doc, "efficiency", "images_per_j")


def images_per_j_pct(doc: Dict[str, Any]) -> Optional[float]:
    """img/s/W's (or any unit's per-J figure's) uncertainty in percent (None: unknown or not
    recorded)."""
    return _get(doc, "efficiency", "uncertainty", "images_per_j_pct")


def gpu_hz(doc: Dict[str, Any]) -> Optional[int]:
    """The GPU clock the run was measured at (applied, read back)."""
    return _get(doc, "settings", "applied", "gpu_hz")


def cv_pct(doc: Dict[str, Any]) -> Optional[float]:
    """The rate's spread, %: the latency CV of its window (None where it was not measured),
    the uncertainty every img/s comparison uses (report/digits.separated)."""
    cv = (doc.get("throughput") or {}).get("cv")
    return None if cv is None else float(cv) * 100


def label(doc: Dict[str, Any], with_clock: bool = True) -> str:
    """'alexnet FP32 b1 @ 691.2 MHz' for table columns and plot legends."""
    w = doc.get("workload") or {}
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


def is_ok(doc: Dict[str, Any]) -> bool:
    return doc.get("status") == "ok"


def is_valid(doc: Dict[str, Any]) -> bool:
    """False when the result says its clocks or its window do not hold (`validity`); results
    written before `validity` existed count as valid."""
    return bool((doc.get("validity") or {}).get("valid", True))


def invalid_reasons(doc: Dict[str, Any]) -> List[str]:
    return list((doc.get("validity") or {}).get("reasons") or [])


def simulated_any(docs: Sequence[Dict[str, Any]]) -> bool:
    return any(bool(d.get("simulated")) for d in docs)
