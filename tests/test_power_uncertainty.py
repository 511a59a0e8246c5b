"""Uncertainty on every power figure, against figures computed here by hand from docs/hardware.md's
INA3221 datasheet constants (gain 0.25% max on V and on I, shunt offset 80 uV max, bus offset
16 mV max): dP = 2 x 0.0025 x P + V x 80e-6 / R + (P / V) x 0.016."""

import math

import numpy as np
import pytest

from jetbench.errors import UsageError
from jetbench.hw.board import detect_rails
from jetbench.hw.fs import Root
from jetbench.hw.meters.accuracy import channel_accuracies, meter_accuracy, parse_accuracy
from jetbench.hw.meters.ina3221 import Ina3221Source
from jetbench.hw.meters.registry import parse_meter_spec, serial_source
from jetbench.sampling.trace import Trace
from jetbench.sampling.uncertainty import (
    channel_uncertainty,
    efficiency_uncertainty,
    integration_error_frac,
    throughput_sem_pct,
    window_uncertainty,
)
from jetbench.sampling.window import SourceTrace, compute_window
from jetbench.sim.create import create_board


def _set_rail(base, rail, micro_ohm, mv):
    d = base / rail.device.lstrip("/")
    (d / f"shunt{rail.channel}_resistor").write_text(f"{micro_ohm}\n")
    (d / f"in{rail.channel}_input").write_text(f"{mv}\n")


def _constant_window(source, watts_by_name):
    """One second of constant readings at 100 Hz: no integration error, full coverage."""
    channels = tuple(source.channels())
    trace = Trace(len(channels))
    for k in range(101):
        trace.append(k * 0.01, [watts_by_name[c.name] for c in channels])
    src = SourceTrace("ina3221", channels, source.total(), 0.01, 0.01, trace)
    return compute_window([src], 0.0, 1.0), [src]


def test_orin_nano_vdd_in_by_hand(tmp_path):
    base = tmp_path / "orin-nano"
    create_board("orin-nano", base)
    root = Root(base)
    rails = detect_rails(root)
    by_name = {r.name: r for r in rails}
    _set_rail(base, by_name["VDD_IN"], 5000, 5000)  # 5 mOhm (docs/hardware.md), 5.0 V
    source = Ina3221Source(root, rails)
    res, traces = _constant_window(source, {"VDD_IN": 10.0, "VDD_CPU_GPU_CV": 5.0,
                                            "VDD_SOC": 2.0})
    unc = window_uncertainty(res, traces, channel_accuracies(root, [source], "orin-nano"))
    # 10 W at 5 V = 2 A: 0.05 (gain) + 5 x 0.016 A (offset current) + 2 A x 0.016 V = 0.162 W
    expected_w = 2 * 0.0025 * 10.0 + 5.0 * 80e-6 / 0.005 + (10.0 / 5.0) * 0.016
    assert expected_w == pytest.approx(0.162)
    vdd_in = unc["ina3221/VDD_IN"]
    assert vdd_in["mean_w_uncertainty_w"] == pytest.approx(expected_w)
    assert vdd_in["mean_w_uncertainty_pct"] == pytest.approx(1.62)
    assert vdd_in["integration_w"] == pytest.approx(0.0) and vdd_in["uncovered_w"] == 0.0
    assert "shunt1_resistor 5000 uOhm" in vdd_in["basis"]
    # VDD_IN is the total: the same figure.
    assert unc["total:ina3221/VDD_IN"]["mean_w_uncertainty_w"] == pytest.approx(expected_w)


def test_agx_orin_sum_by_hand(tmp_path):
    base = tmp_path / "orin-agx"
    create_board("orin-agx", base)
    root = Root(base)
    rails = detect_rails(root)
    by_name = {r.name: r for r in rails}
    setup = {  # name: (shunt uOhm, bus mV, watts)
        "VDD_GPU_SOC": (5000, 5000, 8.0),
        "VDD_CPU_CV": (10000, 5000, 4.0),
        "VIN_SYS_5V0": (5000, 5000, 2.0),
        "VDDQ_VDD2_1V8AO": (10000, 1800, 0.9),
    }
    assert set(setup) == set(by_name)
    for name, (uohm, mv, _w) in setup.items():
        _set_rail(base, by_name[name], uohm, mv)
    source = Ina3221Source(root, rails)
    res, traces = _constant_window(source, {n: w for n, (_r, _v, w) in setup.items()})
    unc = window_uncertainty(res, traces, channel_accuracies(root, [source], "orin-agx"))
    by_hand = {
        "VDD_GPU_SOC": 0.04 + 5.0 * 0.016 + 1.6 * 0.016,  # 0.1456
        "VDD_CPU_CV": 0.02 + 5.0 * 0.008 + 0.8 * 0.016,  # 0.0728
        "VIN_SYS_5V0": 0.01 + 5.0 * 0.016 + 0.4 * 0.016,  # 0.0964
        "VDDQ_VDD2_1V8AO": 0.0045 + 1.8 * 0.008 + 0.5 * 0.016,  # 0.0269
    }
    for name, watts in by_hand.items():
        assert unc[f"ina3221/{name}"]["mean_w_uncertainty_w"] == pytest.approx(watts), name
    total = [k for k in unc if k.startswith("total:")]
    assert len(total) == 1  # the sum of the connected channels
    assert unc[total[0]]["mean_w_uncertainty_w"] == pytest.approx(0.3417)
    assert unc[total[0]]["mean_w_uncertainty_pct"] == pytest.approx(100 * 0.3417 / 14.9)
    # and its parts: the sensors' (all of it here, a constant load), none uncovered
    assert unc[total[0]]["sensor_w"] == pytest.approx(0.3417)
    assert unc[total[0]]["integration_w"] == pytest.approx(0.0)
    assert unc[total[0]]["uncovered_w"] == 0.0


def test_iio_board_without_a_shunt_file_is_unknown_not_zero(tmp_path):
    base = tmp_path / "nano"
    create_board("nano", base)
    root = Root(base)
    source = Ina3221Source(root, detect_rails(root))
    res, traces = _constant_window(source, {"POM_5V_IN": 4.0, "POM_5V_GPU": 1.0,
                                            "POM_5V_CPU": 1.0})
    unc = window_uncertainty(res, traces, channel_accuracies(root, [source], "nano"))
    assert unc["ina3221/POM_5V_IN"]["mean_w_uncertainty_w"] is None
    assert "shunt resistance unknown" in unc["ina3221/POM_5V_IN"]["basis"]
    assert unc["total:ina3221/POM_5V_IN"]["mean_w_uncertainty_pct"] is None


def test_integration_error_half_rate():
    t = np.arange(0, 101) * 0.01
    square = np.where(np.arange(101) % 2 == 0, 0.0, 10.0)  # mean 5 W; half rate sees only 0 W
    assert integration_error_frac(t, square, 0.0, 1.0, 0.05) == pytest.approx(1.0, abs=0.02)
    ramp = 1.0 + t  # linear: the trapezoid is exact at any rate
    assert integration_error_frac(t, ramp, 0.0, 1.0, 0.05) == pytest.approx(0.0, abs=1e-12)
    assert integration_error_frac(t, square, 0.0, 1.0, 0.05, counter=True) == 0.0


def test_uncovered_share_and_parts_add_up():
    # 10 W, 80% covered, sensor 0.1 W, integration 1%: 0.1 + 0.1 + 2.0 = 2.2 W = 22%.
    doc = channel_uncertainty(10.0, 0.8, 0.1, 0.01, "b")
    assert doc["uncovered_w"] == pytest.approx(2.0)
    assert doc["mean_w_uncertainty_w"] == pytest.approx(2.2)
    assert doc["mean_w_uncertainty_pct"] == pytest.approx(22.0)
    assert channel_uncertainty(10.0, 1.0, None, 0.0, "b")["mean_w_uncertainty_w"] is None


def test_throughput_sem_and_combined_efficiency():
    # latencies 10, 12, 14 ms: sample sd 2, SEM 2/sqrt(3) = 1.1547 ms, of 12 ms = 9.6225%
    assert throughput_sem_pct([10.0, 12.0, 14.0]) == pytest.approx(100 * 2 / math.sqrt(3) / 12)
    assert throughput_sem_pct([10.0]) is None
    unc = efficiency_uncertainty(1.62, 0.3, "INA3221", external_meter=False)
    assert unc["images_per_j_pct"] == pytest.approx(1.92)
    assert unc["power_pct"] == 1.62 and unc["throughput_pct"] == 0.3
    assert any("external meter" in w for w in unc["lower_it"])
    assert not any("longer window" in w for w in unc["lower_it"])
    low = efficiency_uncertainty(0.4, 0.2, "meter", external_meter=True)
    assert low["images_per_j_pct"] == pytest.approx(0.6) and low["lower_it"] == []


def test_meter_accuracy_option():
    assert parse_accuracy("0.1%+0.05W").worst_case_w(20.0) == pytest.approx(0.07)
    assert parse_accuracy("0.5%+50mW").worst_case_w(20.0) == pytest.approx(0.15)
    assert parse_accuracy("0.2%").worst_case_w(10.0) == pytest.approx(0.02)
    with pytest.raises(UsageError):
        parse_accuracy("about 1 percent")
    with pytest.raises(UsageError):
        parse_meter_spec("scpi:loop://?accuracy=lots")
    # WT310 family default: 0.1% of reading + 0.05 W (0.05% of a 100 W range).
    assert meter_accuracy("wt310", None).worst_case_w(100.0) == pytest.approx(0.15)
    assert meter_accuracy("scpi", None).worst_case_w(100.0) is None  # unknown, never 0
    spec = parse_meter_spec("scpi:loop://?accuracy=0.2%+0.1W&timeout=1s")
    source = serial_source(spec)
    acc = channel_accuracies(Root("/nonexistent-root-for-test"), [source])
    assert [a.worst_case_w(50.0) for a in acc.values()] == [pytest.approx(0.2)]


def test_another_sensor_family_is_unknown_not_ina3221(tmp_path):
    base = tmp_path / "orin-nano"
    create_board("orin-nano", base)
    root = Root(base)
    rails = detect_rails(root)
    # a chip with no accuracy table here (the INA238 has one since issue 57)
    (base / rails[0].device.lstrip("/") / "name").write_text("ina226\n")
    acc = channel_accuracies(root, [Ina3221Source(root, rails)], "orin-nano")
    assert acc[f"ina3221/{rails[0].name}"].worst_case_w(10.0) is None
    assert "ina226" in acc[f"ina3221/{rails[0].name}"].basis


def test_nvml_energy_is_never_called_exact():
    """N16: NVML's energy counter was called exact; on A100/H100 its sensor samples about a
    quarter of the time (arXiv 2312.02741). Its accuracy stays unknown, and says why."""
    from jetbench.hw.fs import Root
    from jetbench.hw.meters.accuracy import channel_accuracies
    from jetbench.hw.meters.nvml import NvmlSource

    (acc,) = channel_accuracies(Root("/"), [NvmlSource()]).values()
    assert not acc.known and acc.worst_case_w(300.0) is None
    assert "samples only part of the time" in acc.basis
