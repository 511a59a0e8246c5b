"""jtop (jetson-stats) through stand-ins of both `client.power` shapes: before 4.2 every rail,
VDD_IN included, under 'rail'; from 4.2 (and 7.x) VDD_IN moves to 'tot', which carries its 'name'.
Figures are an Orin-NX-shaped reading: VDD_IN 9 W, sub-rails 3 W + 2 W (their sum, 5 W, is the
wrong total the old code gave). Also: the service's interval wins, and measure keeps the source."""

import sys
import types

import pytest

from jetbench.hw.fs import Root
from jetbench.hw.meters.jtop import JtopSource
from jetbench.run.measure import measure
from jetbench.run.request import MeasureRequest

from conftest import make_board

ORIN_NX_RAILS = {"VDD_CPU_GPU_CV": {"power": 3000, "online": True},
                 "VDD_SOC": {"power": 2000, "online": True}}
ORIN_NX_TOT = {"power": 9000, "volt": 5000, "curr": 1800, "online": True, "name": "VDD_IN"}


def fake_jtop(power, service_interval_s=None):
    mod = types.ModuleType("jtop")

    class JtopException(Exception):
        pass

    class jtop:  # noqa: N801 - the real class name
        instances = []

        def __init__(self, interval=0.5):
            self._asked = interval
            self.power = power
            jtop.instances.append(self)

        @property
        def interval(self):
            return service_interval_s if service_interval_s is not None else self._asked

        def start(self):
            pass

        def close(self):
            pass

    mod.jtop = jtop
    mod.JtopException = JtopException
    return mod


def test_jetson_stats_42_total_is_vdd_in_from_tot(monkeypatch):
    monkeypatch.setitem(sys.modules, "jtop",
                        fake_jtop({"rail": ORIN_NX_RAILS, "tot": ORIN_NX_TOT}))
    src = JtopSource()
    src.open()
    names = [c.name for c in src.channels()]
    assert "VDD_IN" in names
    total = src.total()
    assert (total.kind, total.channels) == ("channel", ("VDD_IN",))
    values = dict(zip(names, src.read().power_w))
    assert values["VDD_IN"] == pytest.approx(9.0)  # not 5.0, the sub-rails' sum
    assert values["VDD_CPU_GPU_CV"] == pytest.approx(3.0)
    src.close()


def test_old_shape_with_vdd_in_under_rail_still_read(monkeypatch):
    rails = dict(ORIN_NX_RAILS, VDD_IN={"power": 9000})
    monkeypatch.setitem(sys.modules, "jtop", fake_jtop({"rail": rails, "tot": {}}))
    src = JtopSource()
    src.open()
    assert src.total().channels == ("VDD_IN",)
    assert dict(zip([c.name for c in src.channels()], src.read().power_w))["VDD_IN"] == 9.0
    src.close()


def test_an_unnamed_tot_is_jtops_own_sum_and_ignored(monkeypatch):
    agx = {"VDD_GPU_SOC": {"power": 4000}, "VDD_CPU_CV": {"power": 2000},
           "VIN_SYS_5V0": {"power": 3000}}
    monkeypatch.setitem(sys.modules, "jtop",
                        fake_jtop({"rail": agx, "tot": {"power": 9000, "name": "ALL"}}))
    src = JtopSource()
    src.open()
    assert src.total().kind == "sum"
    assert sorted(src.read().power_w) == [2.0, 3.0, 4.0]
    src.close()


def test_the_services_interval_becomes_the_period(monkeypatch):
    monkeypatch.setitem(sys.modules, "jtop", fake_jtop(
        {"rail": ORIN_NX_RAILS, "tot": ORIN_NX_TOT}, service_interval_s=1.0))
    src = JtopSource(interval_s=0.5)
    assert src.period_s == 0.5
    src.open()
    assert src.period_s == 1.0
    src.close()


JTOP_FILE = """
POWER = {power!r}
SERVICE_INTERVAL_S = {interval!r}


class JtopException(Exception):
    pass


class jtop:
    def __init__(self, interval=0.5):
        self._asked = interval
        self.power = POWER

    @property
    def interval(self):
        return SERVICE_INTERVAL_S if SERVICE_INTERVAL_S is not None else self._asked

    def start(self):
        pass

    def close(self):
        pass
"""


def test_measure_meter_jtop_is_not_dropped(tmp_path, tiny, monkeypatch):
    # measure opens its sources in the sampler process, which imports `jtop` itself: the
    # stand-in is a file on sys.path (which the sampler process is given), not a sys.modules
    # entry of this process.
    stand_ins = tmp_path / "stand_ins"
    stand_ins.mkdir()
    (stand_ins / "jtop.py").write_text(JTOP_FILE.format(
        power={"rail": ORIN_NX_RAILS, "tot": ORIN_NX_TOT}, interval=0.05))
    monkeypatch.delitem(sys.modules, "jtop", raising=False)
    monkeypatch.syspath_prepend(str(stand_ins))
    base = make_board(tmp_path, "tx1")
    request = MeasureRequest(models=("jb_tinynet:tiny",), input_shape=(3, 16, 16),
                             iterations=2, duration_s=0.6, warmup_s=0.0, device="cpu",
                             out_dir=tmp_path / "out", min_coverage=0.3, meters=("jtop",))
    doc = measure(Root(base), request).results[0]
    assert [c["name"] for c in doc["power"]["channels"]] != []
    assert doc["power"]["total"]["name"] == "VDD_IN"
    assert doc["power"]["total"]["mean_w"] == pytest.approx(9.0)


def test_a_usb_c_supply_listed_beside_the_rails_is_never_summed(monkeypatch):
    """A board without VDD_IN whose jetson-stats lists the USB-C input (a power-supply class
    entry) beside the rails: the sum is the rails' (issue 24, item 11)."""
    agx = {"VDD_GPU_SOC": {"power": 4000}, "VDD_CPU_CV": {"power": 2000},
           "VIN_SYS_5V0": {"power": 3000}, "USBC 5V": {"power": 15000}}
    monkeypatch.setitem(sys.modules, "jtop", fake_jtop({"rail": agx}))
    src = JtopSource()
    src.open()
    total = src.total()
    assert total.kind == "sum" and "USBC 5V" not in total.channels
    assert sorted(total.channels) == ["VDD_CPU_CV", "VDD_GPU_SOC", "VIN_SYS_5V0"]
    assert {c.name: c.point for c in src.channels()}["USBC 5V"] == "board_input"
    src.close()


def test_jetson_stats_41_and_older_is_one_message_not_a_traceback(monkeypatch):
    """N13: jetson-stats <= 4.1's `jtop.power` is a tuple (total, rails): `.get` on it raised
    AttributeError. Its total has lost the input rail's name, so jetbench refuses it plainly."""
    from jetbench.errors import HardwareError

    old = ({"cur": 9000, "avg": 8900}, {"VDD_CPU_GPU_CV": {"cur": 3000, "avg": 2900}})
    monkeypatch.setitem(sys.modules, "jtop", fake_jtop(old))
    src = JtopSource()
    with pytest.raises(HardwareError, match="4.1 or older") as err:
        src.open()
    assert "pip3 install -U jetson-stats" in err.value.hint
