"""Issue 56: the result's shape has one home, documents.py. report/schema.py derives the check a
file that is read must pass (result_types) from its TypedDicts and its REQUIRED, WHOLE and
OPEN_KEYS; it checks at least what the hand-written RESULT_TYPES it replaced did (a superset:
every key that was checked is checked as strictly, the same keys are required), and a type
changed in documents.py changes what a file may hold."""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, List, Optional, TypedDict, Union

import pytest
from helpers.results import result_doc

from jetbench import documents
from jetbench.errors import UsageError
from jetbench.report import schema
from jetbench.report.schema import BOOL, INT, NUM, STR, check, result_types, spec_of

# RESULT_TYPES as it was written by hand before it was derived (the last version, d958b6a)
_POINT: Dict[str, Any] = {"name!": STR, "point!": STR, "source!": STR, "kind": STR,
                          "mean_w": NUM, "energy_j": NUM, "images_per_j": NUM,
                          "items_per_j": NUM, "mean_w_uncertainty_pct": NUM, "samples": NUM,
                          "coverage": NUM}
BEFORE: Dict[str, Any] = {
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
TOP_REQUIRED = {"schema", "status", "simulated"}  # check()'s _REQUIRED before


def _at_least_as_strict(derived: Any, before: Any, where: str) -> List[str]:
    """Where `derived` checks less than `before` did (a kind looser or other, a key no longer
    checked, a required key no longer required); [] when it checks all of it."""
    if before is None:
        return []  # anything was allowed
    if isinstance(before, list):
        if not isinstance(derived, list):
            return [f"{where}: {derived!r}, was a list"]
        return _at_least_as_strict(derived[0], before[0], f"{where}[]")
    if isinstance(before, dict):
        if not isinstance(derived, dict):
            return [f"{where}: {derived!r}, was an object"]
        out = []
        for key, sub in before.items():
            name = key.rstrip("!")
            if key.endswith("!") and f"{name}!" not in derived:
                out.append(f"{where}.{name} no longer required")
            inner = derived.get(name, derived.get(f"{name}!", derived.get("*", "absent")))
            out += (_at_least_as_strict(inner, sub, f"{where}.{name}") if inner != "absent"
                    else [f"{where}.{name} no longer checked"])
        return out
    return [] if derived == before else [f"{where}: {derived!r}, was {before!r}"]


def _required(spec: Any, where: str = "") -> Dict[str, None]:
    """Every required key's path ([] for a list's items)."""
    out: Dict[str, None] = {}
    if isinstance(spec, list):
        out.update(_required(spec[0], f"{where}[]"))
    elif isinstance(spec, dict):
        for key, sub in spec.items():
            name = key.rstrip("!")
            if key.endswith("!"):
                out[f"{where}.{name}"] = None
            out.update(_required(sub, f"{where}.{name}"))
    return out


def test_the_derived_spec_checks_everything_the_hand_written_one_did():
    assert _at_least_as_strict(result_types(), BEFORE, "") == []


def test_the_required_keys_are_those_required_before_and_the_power_points_everywhere():
    derived, before = _required(result_types()), _required(BEFORE)
    assert set(before) <= set(derived)
    assert set(schema._REQUIRED) == TOP_REQUIRED
    assert {p for p in derived if p.count(".") == 1} == {f".{k}" for k in TOP_REQUIRED}
    # the new ones: a power point's name, point and source wherever one is (as a writer
    # builds each: sampling/window.py, run/result.py, distributed/rows.py)
    extra = {p.rsplit(".", 1)[0] for p in set(derived) - set(before)} - {""}
    assert extra == {".power.idle.channels[]", ".power.idle_unpinned.channels[]",
                     ".power.devices_sum", ".devices[].power.channels[]",
                     ".devices[].efficiency.by_point[]",
                     ".devices[].efficiency.pre_regulation_estimate"}, sorted(extra)


def test_an_int_is_any_number_but_where_it_was_an_integer():
    spec = result_types()
    assert spec["workload"]["batch"] == INT
    assert spec["scaling"]["devices"] == NUM  # documents.py: int, a file may say 2.0
    assert spec["settings"]["applied"] == {"*": NUM}


def test_the_marks_name_typed_dicts_and_their_keys():
    for marks in (documents.REQUIRED, documents.WHOLE):
        for name, keys in marks.items():
            typed = getattr(documents, name)
            assert set(keys) <= set(typed.__annotations__), name
    for name, opened in documents.OPEN_KEYS.items():
        for key, keys_of in opened.items():
            assert key in getattr(documents, name).__annotations__
            assert getattr(documents, keys_of).__annotations__


def test_every_hand_built_result_loads(tmp_path):
    variants = [result_doc(691.2), result_doc(1300.5, reasons=("observed gpu below its pin",)),
                result_doc(998.4, batch=8, precision="fp16", simulated=False)]
    for doc in variants:
        assert check(json.loads(json.dumps(doc))) == doc


def test_a_type_changed_in_documents_changes_what_a_file_may_hold(monkeypatch):
    doc = result_doc(691.2)
    doc["thermal"] = {"throttled": True}
    check(copy.deepcopy(doc))
    monkeypatch.setitem(documents.ThermalDoc.__annotations__, "throttled", "str")
    result_types.cache_clear()
    try:
        with pytest.raises(UsageError, match=r"thermal\.throttled is a boolean, expected a "
                                             r"string"):
            check(copy.deepcopy(doc))
        monkeypatch.setitem(documents.REQUIRED, "ThermalDoc", ("throttled",))
        result_types.cache_clear()
        doc["thermal"] = {"throttled": None}
        with pytest.raises(UsageError, match=r"thermal\.throttled is missing or null"):
            check(copy.deepcopy(doc))
    finally:
        monkeypatch.undo()
        result_types.cache_clear()
    check(copy.deepcopy(doc))


class _Small(TypedDict, total=False):
    count: int
    ratio: Optional[float]
    names: List[str]
    by: Dict[str, List[int]]
    extra: Dict[str, object]
    inner: Optional[_Inner]


class _Inner(TypedDict):
    flag: bool


def test_spec_of_a_small_typed_dict():
    assert spec_of(_Small) == {"count": NUM, "ratio": NUM, "names": [STR], "by": {"*": [NUM]},
                               "extra": {"*": None}, "inner": {"flag": BOOL}}


@pytest.mark.parametrize("tp", [Union[int, str], List[Optional[int]], bytes, Any])
def test_a_type_the_check_cannot_say_is_refused(tp):
    with pytest.raises(TypeError, match="documents.py"):
        spec_of(tp)
