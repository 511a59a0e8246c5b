"""Issue 61, 2: the latency-spread warning says what fits the board's state.

It advised `jetbench maxperf` on nearly every run, also right after maxperf and in the demo
(which pins its own profile). Now: no warning where the rate's standard error is too small to
change a figure; "the host is busy" on a simulated board; no "lock the clocks" where they are
held (this run pinned them, or an earlier maxperf did); the maxperf advice only where the
clocks are free.
"""

from __future__ import annotations

from jetbench.run.result import noise_advice
from jetbench.workload.timing.stats import LOCK_ADVICE

WARNING = f"latency varies 3.0% between iterations (over 2.5%): {LOCK_ADVICE}"


def test_the_advice_follows_the_state():
    other = "something else"
    assert noise_advice([other, WARNING], False, False, 2.0) == [other, WARNING]  # free clocks
    held = noise_advice([WARNING], False, True, 2.0)
    assert held == ["latency varies 3.0% between iterations (over 2.5%): the clocks are held: "
                    "stop other work on the machine"]
    assert "maxperf" not in held[0]
    simulated = noise_advice([WARNING], True, True, 2.0)
    assert "the host is busy" in simulated[0] and "maxperf" not in simulated[0]
    # a spread whose standard error (0.1% of the rate) changes no figure: no warning
    assert noise_advice([other, WARNING], False, False, 0.1) == [other]


def test_a_measure_after_maxperf_never_advises_maxperf(tmp_path):
    """On a simulated board, after maxperf: whatever the host's load, the warning (if any)
    blames the host, never the clocks."""
    import json

    from conftest import cli, make_board

    base = make_board(tmp_path, "tx1")
    assert cli(base, "maxperf").exit_code == 0
    out = tmp_path / "out"
    result = cli(base, "measure", "--model", "sim:resnet50", "--duration", "0.5", "--meter",
                 "none", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "jetbench maxperf" not in result.output
    doc = json.loads(next(out.glob("*.json")).read_text())
    assert not any("jetbench maxperf" in w for w in doc["warnings"]), doc["warnings"]
    assert cli(base, "restore").exit_code == 0


def test_an_unknown_rate_spread_is_said_and_no_meter_advised():
    """Issue 61: a --cmd that prints one rate has an unknown throughput spread; the line blamed
    the power sensor and advised an external meter, which cannot help."""
    from jetbench.sampling.uncertainty import efficiency_uncertainty

    unc = efficiency_uncertainty(4.6, None, "INA3221 datasheet", False, per_iteration=False)
    assert unc["images_per_j_pct"] is None
    assert unc["lower_it"] == ["the command reports one rate: no spread; print per-iteration "
                               "times or repeat it"]
