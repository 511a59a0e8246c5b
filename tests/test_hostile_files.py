"""Issue 35: hostile result files and profiles. Whatever a file holds, `report` and the
profile loader answer with a table or one message (exit 0 or 1), never a traceback or a hang;
`report DIR` skips what is not a regular file, naming it."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from typing import Any, List, Tuple

import pytest

hypothesis = pytest.importorskip("hypothesis")
from helpers.results import result_doc  # noqa: E402
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from jetbench.cli.main import app  # noqa: E402
from jetbench.errors import ProfileError, UsageError  # noqa: E402
from jetbench.profiles.profile import parse_profile  # noqa: E402

from conftest import REPO  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

LEAVES = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
          | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6))
VALUES = st.recursive(LEAVES, lambda c: st.lists(c, max_size=3)
                      | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=6)


def _paths(node: Any, prefix: Tuple = ()) -> List[Tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


BASE = result_doc(691.2, reasons=("observed gpu below its pin",))
PATHS = [p for p in _paths(BASE) if p != ("schema",)] + [
    # keys readers take that this base result lacks
    ("board", "power_mode"), ("devices",), ("scaling",), ("efficiency", "above_idle"),
    ("efficiency", "pre_regulation_estimate"), ("power", "idle"), ("throughput", "cv"),
    ("throughput", "unit"), ("workload", "runtime"), ("workload", "framework"),
    ("efficiency", "items_per_j"), ("throughput", "items_per_s"), ("message",)]


def _mutated(mutations) -> dict:
    doc = copy.deepcopy(BASE)
    for path, value in mutations:
        node = doc
        try:
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation replaced a parent: this path is gone
    return doc


def _report(*args: str):
    return CliRunner().invoke(app, ["report", *args])


def _one_message(res) -> None:
    assert res.exit_code in (0, 1), (res.exit_code, res.output)
    assert res.exception is None or isinstance(res.exception, SystemExit), \
        repr(res.exception)


@FUZZ
@example([(("power", "channels", 0), None)], ())  # found by this test (TypeError)
@example([(("power", "channels", 0), {})], ())  # (KeyError 'name')
@example([(("throughput", "images_per_s"), "fast")], ("--markdown",))
@example([(("settings",), [])], ("--json",))
@example([(("workload", "batch"), {"x": 1})], ("--by", "runtime"))
@given(st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=1, max_size=3),
       st.sampled_from([(), ("--markdown",), ("--json",), ("--compare",),
                        ("--by", "runtime")]))
def test_a_result_with_wrong_types_is_a_table_or_one_message(tmp_path_factory, mutations,
                                                            mode):
    folder = tmp_path_factory.mktemp("r")
    path = folder / "r.json"
    path.write_text(json.dumps(_mutated(mutations)))
    if mode == ("--compare",):
        good = folder.parent / f"{folder.name}-good.json"
        good.write_text(json.dumps(BASE))
        _one_message(_report(str(path), "--compare", str(good)))
        _one_message(_report(str(good), "--compare", str(path)))
        return
    _one_message(_report(str(path), *mode))
    _one_message(_report(str(folder), *mode))


def test_json_nested_100k_deep_is_one_message(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema": ' + "[" * 100_000 + "]" * 100_000 + "}")
    res = _report(str(deep))
    assert res.exit_code == 1 and "nested deeper" in res.output, res.output
    _one_message(res)


@pytest.mark.parametrize("text", ["5", '"text"', "null", "true"])
def test_a_result_file_holding_one_scalar_is_one_message(tmp_path, text):
    # the nesting check once iterated a scalar document: a TypeError traceback
    path = tmp_path / "scalar.json"
    path.write_text(text)
    res = _report(str(path))
    assert res.exit_code == 1 and "not a jetbench result" in res.output, res.output
    _one_message(res)


def test_a_huge_result_file_is_refused_not_read(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(200 * 1024 * 1024)  # sparse: 200 MiB of NULs, no disk used
    res = _report(str(big))
    assert res.exit_code == 1 and "larger than" in res.output, res.output


def test_report_dir_skips_a_fifo_and_a_link_naming_them(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(result_doc(691.2)))
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    done = subprocess.run([sys.executable, "-m", "jetbench", "report", str(tmp_path)],
                          capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "fifo.json" in done.stderr and "zero.json" in done.stderr
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr
    assert "691" in done.stdout


# -- profiles --------------------------------------------------------------------------------
TOML_VALUES = st.sampled_from(["inf", "nan", "-inf", "1e400", "-1", "0", "true", '"x"', "[]",
                               "{}", '"1e400MHz"', '"inf"', '"nan Hz"', "1.5", '"\\u0000"',
                               "18446744073709551616", '"690MHz"', '"max"'])
TOML_KEYS = st.sampled_from(["[cpu] freq", "[cpu] min_freq", "[cpu] max_freq", "[gpu] freq",
                             "[gpu] max_freq", "[emc] freq", "[fan] pwm", "[gpu] power_limit",
                             "[gpu] memory_freq", "[cpu] online", "[gpu] railgate"])


@FUZZ
@given(st.lists(st.tuples(TOML_KEYS, TOML_VALUES), min_size=1, max_size=4))
def test_a_profile_with_hostile_values_is_a_profile_or_one_profile_error(entries):
    sections: dict = {}
    for key, value in entries:
        section, name = key.split(" ")
        sections.setdefault(section, {})[name] = value
    text = "".join(f"{section}\n" + "".join(f"{k} = {v}\n" for k, v in body.items())
                   for section, body in sections.items())
    try:
        profile = parse_profile(text, "fuzz")
    except ProfileError as err:
        assert "\n" not in err.message
        return
    except UsageError:
        return
    for spec in (profile.cpu_freq, profile.gpu_freq):
        for bound in (spec.min, spec.max) if spec else ():
            assert bound is None or isinstance(bound, str) or (
                isinstance(bound, int) and 0 < bound < 10**12)
    assert profile.emc_freq is None or isinstance(profile.emc_freq, str) or \
        0 < profile.emc_freq < 10**12
    assert not isinstance(profile.gpu_power_limit, float) or math.isfinite(
        profile.gpu_power_limit)
