"""Meter specs: parsing, options, and what `auto` picks."""

from __future__ import annotations

import pytest

from jetbench.errors import UsageError
from jetbench.hw.fs import Root
from jetbench.hw.meters.base import EmptySource
from jetbench.hw.meters.ina3221 import Ina3221Source, Rail
from jetbench.hw.meters.rapl import RaplSource
from jetbench.hw.meters.registry import auto_sources, open_sources, parse_meter_spec
from jetbench.hw.meters.scpi import ScpiMeter
from jetbench.hw.meters.stream import StreamMeter, parse_columns


def test_keywords_and_serial_specs():
    assert parse_meter_spec(" AUTO ").kind == "auto"
    s = parse_meter_spec("scpi:/dev/ttyUSB0?baud=9600&query=MEAS:POW?")
    assert (s.kind, s.port, s.options) == ("scpi", "/dev/ttyUSB0",
                                           {"baud": "9600", "query": "MEAS:POW?"})
    s = parse_meter_spec("stream:socket://127.0.0.1:5025?columns=ms,W")
    assert (s.port, s.options) == ("socket://127.0.0.1:5025", {"columns": "ms,W"})
    assert parse_meter_spec("um34c:loop://").port == "loop://"


@pytest.mark.parametrize("bad", ["wattmeter", "scpi:", "scpi:/dev/x?speed=1",
                                 "stream:loop://?query=X", "ftp://x"])
def test_bad_specs_are_usage_errors(bad):
    with pytest.raises(UsageError):
        parse_meter_spec(bad)


def test_options_reach_the_driver():
    (m,) = open_sources(["scpi:loop://?baud=19200&timeout=250ms&interval=50ms&query=POW?"],
                        Root("/"))
    assert isinstance(m, ScpiMeter)
    assert (m.baud, m.timeout_s, m.period_s, m.query) == (19200, 0.25, 0.05, "POW?")
    assert m.name == "scpi:loop://"
    (s,) = open_sources(["stream:loop://?columns=s,V,mA"], Root("/"))
    assert isinstance(s, StreamMeter) and s.pushed and s.baud == 115200
    with pytest.raises(UsageError):
        open_sources(["scpi:loop://", "scpi:loop://"], Root("/"))
    with pytest.raises(UsageError):
        open_sources(["scpi:loop://?vquery=V?"], Root("/"))
    assert open_sources(["none"], Root("/")) == []


def test_columns():
    assert parse_columns("millis,mV,mA") == (("t", 1e-3), ("v", 1e-3), ("i", 1e-3))
    for bad in ("ms,mV", "ms,W,W", "ms,furlongs"):
        with pytest.raises(UsageError):
            parse_columns(bad)


def test_auto_prefers_board_rails_then_rapl_then_nothing(tmp_path):
    rails = [Rail("VDD_IN", "/sys/x/hwmon/hwmon0", 1, "hwmon", "module_input")]
    (ina,) = auto_sources(Root(tmp_path), rails, "VDD_IN")
    assert isinstance(ina, Ina3221Source) and ina.total().name == "VDD_IN"
    assert isinstance(auto_sources(Root(tmp_path))[0], EmptySource)
    zone = tmp_path / "sys/class/powercap/intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text("1\n")
    (zone / "name").write_text("package-0\n")
    assert isinstance(auto_sources(Root(tmp_path))[0], RaplSource)
