"""Issue 56, part 5: one constraint vocabulary and one rule for "met", shared by `tune
--constraint` and `daemon --tune --constraint`. The rate is items_per_s everywhere, images_per_s
or fps where the unit is images or frames; an unknown name is answered by name with the names
the workload has, a bad operator as a bad operator; usage errors exit 1 with no traceback."""

from __future__ import annotations

import pytest

from jetbench.daemon.online_tuner import SIGMAS, Window, parse_limit
from jetbench.errors import UsageError
from jetbench.run.constraint import Constraint
from jetbench.run.request import MeasureOptions
from jetbench.run.tune.options import constraints_for

from conftest import make_board, run_cli

IMAGES = MeasureOptions(model="sim:alexnet")


def test_tune_takes_items_per_s_on_an_image_workload_as_its_images_per_s():
    [floor] = constraints_for(["items_per_s>=30"], IMAGES)
    assert floor == Constraint.parse("images_per_s>=30")
    assert floor.violation({"images_per_s": 31.0}) < 0 < floor.violation({"images_per_s": 29.0})
    [per_j] = constraints_for(["items_per_j>=2"], IMAGES)
    assert str(per_j) == "images_per_j>=2"


def test_the_rate_aliases_follow_a_commands_unit():
    frames = MeasureOptions(cmd="app", throughput_from="trtexec", unit="frames")
    tokens = MeasureOptions(cmd="app", throughput_from="trtexec", unit="tokens")
    assert constraints_for(["fps>=30"], frames) == constraints_for(["items_per_s>=30"], tokens)
    with pytest.raises(UsageError, match="unknown constraint name 'images_per_s'.*items_per_s"):
        constraints_for(["images_per_s>=30"], tokens)


@pytest.mark.parametrize("text", ["images_per_s>=30", "fps>=30", "items_per_s>=30"])
def test_the_daemon_takes_the_rates_aliases(text):
    limit = parse_limit(text)
    assert (limit.name, limit.op, limit.value) == ("items_per_s", ">=", 30.0)


def test_an_unknown_name_is_answered_by_name_with_the_names_there_are():
    with pytest.raises(UsageError) as tune_err:
        constraints_for(["foo>=3"], IMAGES)
    text = str(tune_err.value)
    assert "unknown constraint name 'foo'" in text and "expected NAME" not in text
    assert "items_per_s (images_per_s)" in text and "latency_p99_ms" in text and "power_w" in text
    with pytest.raises(UsageError) as daemon_err:
        parse_limit("foo>=3")
    assert "unknown constraint name 'foo'" in str(daemon_err.value)
    assert "demand" in str(daemon_err.value) and "latency_p50_ms" in str(daemon_err.value)


@pytest.mark.parametrize("text", ["images_per_s>30", "images_per_s=30", "images_per_s 30"])
def test_a_bad_operator_is_answered_as_a_bad_operator(text):
    for parse in (lambda t: constraints_for([t], IMAGES), parse_limit):
        with pytest.raises(UsageError, match="operator") as err:
            parse(text)
        assert "unknown constraint name" not in str(err.value)


def test_met_is_one_rule_the_daemon_judging_a_window_at_sigmas_uncertainties():
    """Met only with the whole interval on the right side, in tune (1 uncertainty) and in the
    daemon (SIGMAS of them, one noisy window): the same Constraint, the same rule."""
    floor = Constraint.parse("images_per_s>=30")
    assert floor.violation({"images_per_s": 31.0, "images_per_s_uncertainty_pct": 5.0}) > 0
    assert floor.met(31.0, 5.0) is False and floor.met(31.0, 1.0) is True
    window = Window(31.0, 1.0, 5.0, 1.0)
    limit = parse_limit("images_per_s>=30")
    assert window.meets(limit) is (31.0 * (1 - SIGMAS / 100) >= 30)
    assert not window.breaks(limit) and not Window(31.0, None, 5.0, None).breaks(limit)


def test_usage_errors_of_both_commands_exit_1_without_a_traceback(tmp_path):
    base = make_board(tmp_path, "tx1")
    for args in (["tune", "--model", "sim:alexnet", "--constraint", "foo>=3",
                  "--out", str(tmp_path / "t")],
                 ["daemon", "--tune", "--throughput-from", "prometheus:http://127.0.0.1:9/m#x",
                  "--constraint", "items_per_s>30", "--socket", str(tmp_path / "s")]):
        proc = run_cli("--root", str(base), *args)
        assert proc.returncode == 1, (args, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr
        assert ("unknown constraint name 'foo'" in proc.stderr
                or "operator '>'" in proc.stderr), proc.stderr
