"""Figures worth reading (issue 27.2, 27.7): significant digits matching the uncertainty in
every table, result files without float noise, the trust labels (valid but noisy, a change
within noise), the simulated Orin Nano's power within its modes."""

import json

import pytest
from helpers.results import result_doc

from jetbench.report import compare, io, tables
from jetbench.report.digits import csv_cell, plus_minus, plus_minus_pct, significant, stored
from jetbench.run.sweep import summarize


@pytest.mark.parametrize("x, err, text", [
    (0.0656, 0.017, "0.066 +- 0.017"),   # was '0.1 +- 0.0' in the table
    (0.0656, 0.0656 * 0.259, "0.066 +- 0.017"),
    (12.56, 0.38, "12.6 +- 0.4"),
    (9.30, 0.36, "9.30 +- 0.36"),
    (365.1, 0.38, "365 +- 0.4"),
    (12345.0, 512.0, "12300 +- 500"),
    (0.19, 0.03, "0.190 +- 0.030"),
    (5.0, None, "5.00 +- unknown"),
    (5.0, 0.0, "5.00 +- 0"),
])
def test_plus_minus_digits_match_the_uncertainty(x, err, text):
    assert plus_minus(x, err) == text


@pytest.mark.parametrize("x", [0.0656, 1e-4, 3.3, 86.8, 365.1, 12345.0, 0.5])
@pytest.mark.parametrize("pct", [0.01, 0.5, 4.3, 25.9, 80.0])
def test_a_nonzero_uncertainty_is_never_printed_as_zero(x, pct):
    text = plus_minus_pct(x, pct)
    value, err = text.split(" +- ")
    assert float(err) > 0, text
    assert float(value) == pytest.approx(x, rel=0.06), text


def test_significant():
    assert significant(0.065612) == "0.0656"
    assert significant(86.816) == "86.8"
    assert significant(None) == "-"


def test_table_sweep_and_report_print_the_same_figure():
    """One formatter: Table 1, the sweep's table and its summary agree on img/s/W."""
    doc = result_doc(691.2, ips=0.36, watts=5.5, power_pct=24.9, throughput_pct=1.0)
    want = plus_minus_pct(0.36 / 5.5, 25.9)
    assert want == "0.065 +- 0.017"
    cells = dict(tables.table_cells([doc])[1])["Performance/W (img/s/W): VDD_IN; module, measured"]
    assert cells == [want]
    assert f"{want} img/s/W" in summarize([doc]).lines()[-1]
    long_row = [c for c in tables.long_table([doc]).columns if c.header == "img/s/W"][0]
    assert list(long_row.cells) == [want]


def test_result_json_and_trace_csv_hold_no_float_noise(tmp_path):
    assert stored({"w": [12.514999999999999, 2], "s": "x"}) == {"w": [12.515, 2], "s": "x"}
    path = io.write_json(tmp_path / "r.json", {"mean_w": 12.514999999999999, "n": 3})
    assert '"mean_w": 12.515' in path.read_text()
    assert json.loads(path.read_text())["mean_w"] == 12.515
    assert csv_cell(8.834999999999999) == "8.835"
    assert csv_cell(2.1999999999999997) == "2.2"


def test_valid_but_noisy_is_said():
    doc = result_doc(691.2)
    doc["throughput"]["cv"] = 0.53
    assert dict(tables.table_cells([doc])[1])["Valid"] == ["yes, noisy (CV 53%)"]
    doc["throughput"]["cv"] = 0.02
    assert dict(tables.table_cells([doc])[1])["Valid"] == ["yes"]


def test_compare_judges_noise():
    a, b = result_doc(691.2, ips=47.0), result_doc(921.6, ips=38.7)
    a["throughput"]["cv"], b["throughput"]["cv"] = 0.19, 0.45
    by = {c.metric: c for c in compare.compare(a, b)}
    assert by["img/s"].verdict == "within noise"  # -17.6% at 19% and 45% CV
    assert by["img/s"].noise == (19.0, 45.0)  # each side's spread, as the one rule counts it
    assert by["GPU clock (MHz)"].verdict == "higher"  # a setting: never "better"
    a["throughput"]["cv"], b["throughput"]["cv"] = 0.01, 0.01
    assert {c.metric: c for c in compare.compare(a, b)}["img/s"].verdict == "worse"


def test_simulated_orin_nano_stays_within_its_power_modes(tmp_path):
    """Full load at the highest clocks reads no more than the 15 W mode on an Orin Nano
    (it read 21-24 W); the AGX Orin (MAXN: no budget) keeps its range."""
    from jetbench.sim.boards import get
    from jetbench.sim.power_model import (
        ClockState,
        component_powers_w,
        module_budget_w,
        rail_powers_w,
    )

    def full_load_w(key):
        board = get(key)
        clocks = ClockState(gpu_hz=max(board.gpu_freqs_hz), gpu_table_hz=board.gpu_freqs_hz,
                            cpu_hz=board.clusters[0].freqs_khz[-1] * 1000.0,
                            cpu_table_hz=[f * 1000 for f in board.clusters[0].freqs_khz],
                            cpu_online_fraction=1.0, emc_hz=board.emc_freqs_hz[-1],
                            emc_max_hz=board.emc_freqs_hz[-1])
        parts = component_powers_w(board.soc, clocks, 1.0, 1.0,
                                   module_budget_w(board.power_modes))
        return rail_powers_w(["VDD_IN"], parts)["VDD_IN"]

    assert module_budget_w(get("orin-nano").power_modes) == 15.0
    assert 9.0 < full_load_w("orin-nano") <= 15.0 + 1e-9
    assert module_budget_w(get("orin-agx").power_modes) is None
    assert full_load_w("orin-agx") > 30.0
