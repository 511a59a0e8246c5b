import pytest

from jetbench.errors import UsageError
from jetbench.units import MAX, MIN, format_hz, parse_duration_s, parse_freq, resolve_freq


@pytest.mark.parametrize("text,hz", [
    ("690MHz", 690_000_000), ("690mhz", 690_000_000), ("0.69GHz", 690_000_000),
    ("690000000", 690_000_000), ("844.8 MHz", 844_800_000), ("204kHz", 204_000),
    (691200000, 691_200_000),
])
def test_parse_freq(text, hz):
    assert parse_freq(text) == hz


def test_parse_freq_symbols():
    assert parse_freq("MAX") == MAX
    assert parse_freq(" min ") == MIN


@pytest.mark.parametrize("bad", ["fast", "690 MHzz", "-5MHz", "0", "", True])
def test_parse_freq_rejects(bad):
    with pytest.raises(UsageError):
        parse_freq(bad)


def test_resolve_nearest_and_ties():
    table = [76_800_000, 614_400_000, 691_200_000, 768_000_000]
    assert resolve_freq(690_000_000, table) == 691_200_000
    assert resolve_freq(MAX, table) == 768_000_000
    assert resolve_freq(MIN, table) == 76_800_000
    assert resolve_freq(652_800_000, table) == 614_400_000  # a tie goes to the lower entry


def test_durations_and_format():
    assert parse_duration_s("10ms") == pytest.approx(0.01)
    assert parse_duration_s("2.5s") == 2.5
    assert parse_duration_s("3m") == 180
    assert parse_duration_s(4) == 4.0
    with pytest.raises(UsageError):
        parse_duration_s("soon")
    assert format_hz(691_200_000) == "691.2 MHz"
    assert format_hz(1_912_500_000) == "1.913 GHz"
    assert format_hz(None) == "-"


def test_a_bare_monitor_interval_is_milliseconds_as_tegrastats():
    """`monitor --interval 250` was 250 seconds; tegrastats' --interval 250 is 250 ms."""
    from jetbench.units import parse_duration_s

    assert parse_duration_s("250", bare="ms") == pytest.approx(0.25)
    assert parse_duration_s("1s", bare="ms") == 1.0 and parse_duration_s("250") == 250.0
