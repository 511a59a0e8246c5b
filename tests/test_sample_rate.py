"""`--sample-rate`: one rate for every power source that has no `?interval=` of its own."""

import pytest

from jetbench.errors import UsageError
from jetbench.hw.meters.registry import with_sample_rate


def test_no_rate_leaves_the_specs_as_given():
    assert with_sample_rate(["auto", "scpi:/dev/ttyUSB0"], None) == ["auto", "scpi:/dev/ttyUSB0"]


@pytest.mark.parametrize("rate, interval", [
    ("200Hz", "5ms"),     # 1000 / 200
    ("1kHz", "1ms"),
    ("50", "20ms"),       # a bare number is Hz
    ("3", "333.333ms"),   # 1000 / 3, six significant digits
])
def test_each_source_without_an_interval_gets_the_rate(rate, interval):
    specs = with_sample_rate(["auto", "stream:socket://127.0.0.1:5025?columns=ms,W"], rate)
    assert specs == [f"auto?interval={interval}",
                     f"stream:socket://127.0.0.1:5025?columns=ms,W&interval={interval}"]


def test_no_meter_given_means_auto_at_that_rate():
    assert with_sample_rate([], "100Hz") == ["auto?interval=10ms"]


def test_an_explicit_interval_and_none_are_kept():
    assert with_sample_rate(["ina3221?interval=2ms", "none"], "1kHz") == \
        ["ina3221?interval=2ms", "none"]


@pytest.mark.parametrize("rate", ["fast", "0", "-5Hz", "1MHz", "20kHz"])
def test_a_bad_rate_is_one_message(rate):
    with pytest.raises(UsageError):
        with_sample_rate(["auto"], rate)


def test_measure_at_a_sample_rate_says_the_sensors_rate_beside_it(tmp_path):
    """A simulated Orin Nano's INA3221 refreshes every update_interval x samples (its tree:
    4 ms, 250 Hz); --sample-rate 1kHz reads it every 1 ms, and the result says both, and once
    that the extra samples repeat readings."""
    import json

    from typer.testing import CliRunner

    from jetbench.cli.main import app
    from jetbench.sim.create import create_board

    base = tmp_path / "b"
    create_board("orin-nano", base)
    out = tmp_path / "r"
    result = CliRunner().invoke(app, [
        "--root", str(base), "measure", "--model", "sim:resnet18", "--duration", "0.5",
        "--warmup", "0.1", "--sample-rate", "1kHz", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(next(out.glob("*.json")).read_text())
    (ina,) = [s for s in doc["sampling"] if s["source"] == "ina3221"]
    assert ina["requested_hz"] == 1000.0 and ina["sensor_hz"] == 250.0
    assert ina["effective_hz"] == 250.0
    notes = [w for w in doc["warnings"] if "repeat readings" in w]
    assert len(notes) == 1 and "every 1 ms (asked)" in notes[0]
