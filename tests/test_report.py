"""report: the whitepaper table (pure cells, rich and Markdown), compare, plots (opened and
checked for size and axes, not pixels), atomic result writes under kill -9."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from helpers.results import result_doc

from jetbench.errors import UsageError
from jetbench.report import compare, io, plots, tables

from conftest import REPO, bound_s


def test_whitepaper_table_cells():
    docs = [result_doc(691.2, ips=47, watts=5.5), result_doc(691.2, ips=67, watts=5.1,
                                                     precision="fp16")]
    headers, rows = tables.table_cells(docs)
    assert headers == ["alexnet FP32 b1", "alexnet FP16 b1"]
    by = dict(rows)
    assert by["Performance (img/s)"] == ["47.0", "67.0"]
    # 4% of 5.5 W = 0.22 W; of 5.1 W = 0.204 W. img/s/W: 47/5.5 = 8.545, 5% = 0.427;
    # 67/5.1 = 13.137, 5% = 0.657. VDD_GPU: 10% of 2 W.
    assert by["Power (W): VDD_IN, module input; module, measured"] == ["5.50 +- 0.22",
                                                                     "5.10 +- 0.20"]
    assert by["Performance/W (img/s/W): VDD_IN; module, measured"] == ["8.55 +- 0.43",
                                                                      "13.1 +- 0.7"]
    assert by["  VDD_GPU (rail) W"] == ["2.00 +- 0.20", "2.00 +- 0.20"]
    assert by["Valid"] == ["yes", "yes"]
    assert by["GPU clock (runs)"] == ["691.2 MHz", "691.2 MHz"]
    assert "ESTIMATE" not in " ".join(by)  # only when asked for
    assert "SIMULATED" in tables.title(docs)
    assert "SIMULATED" not in tables.title([result_doc(691.2, simulated=False)])
    md = tables.markdown(docs)
    assert ("| Performance/W (img/s/W): VDD_IN; module, measured | 8.55 +- 0.43 | 13.1 +- 0.7 |"
            in md)


def test_unknown_uncertainty_is_said_never_zero():
    doc = result_doc(691.2, power_pct=None)
    by = dict(tables.table_cells([doc])[1])
    assert by["Power (W): VDD_IN, module input; module, measured"] == ["5.50 +- unknown"]
    assert by["Performance/W (img/s/W): VDD_IN; module, measured"] == ["8.55 +- unknown"]
    advice = tables.uncertainty_advice([doc])
    assert len(advice) == 1 and "uncertainty is unknown" in advice[0] and "1%" in advice[0]
    assert tables.uncertainty_advice([result_doc(691.2, power_pct=0.5, throughput_pct=0.3)]) == []
    assert "a longer window" in tables.uncertainty_advice([result_doc(691.2)])[0]
    # issue 39: why every power cell reads `+- unknown`, said once (the result's own basis)
    why = "INA3221 VDD_IN: shunt resistance unknown"
    doc["power"]["total"]["uncertainty"] = {"basis": why}
    advice = tables.uncertainty_advice([doc, doc])
    assert len(advice) == 1 and f"every power figure reads +- unknown: {why}" in advice[0]


def test_invalid_results_are_marked_in_tables_and_plots(tmp_path):
    reason = "gpu 57000000.gpu ran at 76.8 MHz, 691.2 MHz was applied"
    docs = [result_doc(614.4, ips=40, watts=5.0), result_doc(691.2, ips=47, watts=5.5,
                                                     reasons=(reason,)),
            result_doc(768.0, ips=52, watts=6.0)]
    headers, rows = tables.table_cells(docs)
    # Same network, three clocks: each column says its clock (issue 13.5).
    # The clocks as every table writes them (614.4, not 614: issue 39).
    assert headers == ["alexnet FP32 b1 @ 614.4 MHz", "alexnet FP32 b1 @ 691.2 MHz INVALID",
                       "alexnet FP32 b1 @ 768 MHz"]
    assert dict(rows)["Valid"] == ["yes", "NO: 1 reason(s)", "yes"]
    md = tables.markdown(docs)
    assert f"- alexnet FP32 b1 @ 691.2 MHz: {reason}" in md
    series = plots.freq_series(docs)["alexnet FP32 b1"]
    assert [p["valid"] for p in series] == [True, False, True]
    # Error bars: img/s/W x (4% + 1%), from the result's efficiency.uncertainty.
    assert series[0]["images_per_j_err"] == pytest.approx(40 / 5.0 * 0.05)
    assert series[2]["images_per_j_err"] == pytest.approx(52 / 6.0 * 0.05)
    figs = []
    real_save = plots._save

    def keep(fig, path):
        figs.append(fig)
        return real_save(fig, path)

    import unittest.mock as mock
    with mock.patch.object(plots, "_save", keep):
        plots.plot_vs_freq(docs, tmp_path / "f.png")
    top, _power, bottom = figs[0].axes
    joined = [line for line in top.lines if line.get_linestyle() != "None"]
    assert [list(line.get_xdata()) for line in joined] == [[614.4, 768.0]]  # never joined
    crosses = [line for line in top.lines if line.get_marker() == "x"]
    assert [list(line.get_xdata()) for line in crosses] == [[691.2]]
    assert crosses[0].get_color() == "red"
    # The bottom axis has error bars whose half-length is the uncertainty.
    bars = [c for c in bottom.collections if c.__class__.__name__ == "LineCollection"]
    segs = bars[0].get_segments()
    assert segs[0][1][1] - segs[0][0][1] == pytest.approx(2 * 40 / 5.0 * 0.05)


def test_compare_change_per_metric():
    # uncertainties 1.5% each: the -6.4% img/s/W change is beyond them (no caveat)
    a = result_doc(691.2, ips=47, watts=5.5, power_pct=1.0, throughput_pct=0.5)
    b = result_doc(998.4, ips=60, watts=7.5, power_pct=1.0, throughput_pct=0.5)
    a["throughput"]["cv"] = b["throughput"]["cv"] = 0.02  # the rate's spread, 2%
    changes = {c.metric: c for c in compare.compare(a, b)}
    assert changes["img/s"].ratio == pytest.approx(60 / 47 - 1)
    assert changes["img/s"].verdict == "better"
    assert changes["power (W)"].verdict == "worse"
    assert changes["img/s/W"].verdict == "worse"  # 8.55 -> 8.0
    assert compare.caveats(a, b) == []
    assert compare.caveats(a, result_doc(691.2, simulated=False)) == [
        "one result is from a SIMULATED board"]
    # 47/5.5 = 8.545 vs 48/5.5 = 8.727: +2.1%, within 5% + 5%; and B invalid.
    bad = result_doc(691.2, ips=48, watts=5.5, reasons=("gpu ran at 76.8 MHz, 691.2 MHz applied",))
    assert compare.caveats(result_doc(691.2, ips=47, watts=5.5), bad) == [
        "B is INVALID: gpu ran at 76.8 MHz, 691.2 MHz applied",
        "the img/s/W change (+2.1%) is within the two results' uncertainties (+-5.0% and "
        "+-5.0%)"]


def test_plots_are_pngs_with_the_right_axes(tmp_path, monkeypatch):
    figs = []
    real_save = plots._save

    def capture(fig, path):
        figs.append(fig)
        return real_save(fig, path)

    monkeypatch.setattr(plots, "_save", capture)
    csv = tmp_path / "t.csv"
    csv.write_text("# jetbench power trace; SIMULATED board: not hardware\n"
                   "t_s,ina3221/VDD_IN,ina3221/VDD_GPU\n"
                   + "".join(f"{t / 10:.1f},{5 + t % 3},{2 + t % 2}\n" for t in range(18)))
    docs = [result_doc(mhz, batch=b, ips=10 * b + mhz / 100, path=tmp_path / "r.json")
            for mhz in (307.2, 691.2, 998.4) for b in (1, 8)]
    written = plots.report_plots(docs, tmp_path / "plots")
    names = sorted(p.name for p in written)
    assert names[:2] == ["efficiency_vs_gpu_clock.png", "t.trace.png"]
    assert "throughput_vs_batch.png" in names
    for p in written:
        assert plots.png_size(p)[0] >= 800
    freq_fig = figs[0]
    top, power, bottom = freq_fig.axes
    assert top.get_ylabel() == "img/s\n(bars: latency CV)"
    assert power.get_ylabel() == "power (W)\n(bars: uncertainty)"
    assert bottom.get_ylabel() == "img/s/W\n(bars: uncertainty)"
    assert bottom.get_xlabel() == "GPU clock (MHz, the clock that ran)"
    assert "SIMULATED" in top.get_title()
    joined = [line for line in top.lines if line.get_linestyle() != "None"]  # not error caps
    assert len(joined) == 2  # b1 and b8
    xs = list(joined[0].get_xdata())
    assert [round(x, 1) for x in xs] == [307.2, 691.2, 998.4]
    batch_ax = figs[1].axes[0]
    assert batch_ax.get_xlabel() == "batch size" and batch_ax.get_xscale() == "log"
    trace_ax = figs[2].axes[0]
    assert trace_ax.get_ylabel() == "power (W)"
    labels = [t.get_text() for t in trace_ax.get_legend().get_texts()]
    assert labels == ["ina3221/VDD_IN", "ina3221/VDD_GPU", "warm-up", "measured window",
                      "window mean VDD_IN 5.50 W"]


def test_load_results_skips_foreign_json_in_directories(tmp_path):
    io.write_json(tmp_path / "a.json", result_doc(691.2))
    (tmp_path / "time.json").write_text('{"schema": "jetbench.time/1"}')
    (tmp_path / ".a.json.x.tmp").write_text("{half")
    docs = io.load_results([tmp_path])
    assert [d["id"] for d in docs] == [result_doc(691.2)["id"]]
    with pytest.raises(UsageError, match="not a jetbench result"):
        io.load_results([tmp_path / "time.json"])


_WRITER = """
import sys
from jetbench.report.io import write_json
doc = {"schema": "jetbench.result/1", "pad": ["x" * 1000] * 2000}
k = 0
while True:
    k += 1
    doc["k"] = k
    write_json(sys.argv[1], doc)
"""


def test_result_writes_are_atomic_under_kill9(tmp_path):
    target = tmp_path / "r.json"
    rng = random.Random(7)
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)], cwd=REPO)
        deadline = time.monotonic() + bound_s(30)
        while not target.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        doc = json.loads(target.read_text())  # whole, never half-written
        assert doc["k"] >= 1 and len(doc["pad"]) == 2000
    assert io.load_results([tmp_path], skip_foreign=True) == []  # not a full result: skipped


def test_compare_takes_a_directory_holding_one_result_or_says_what_it_holds(tmp_path):
    """Issue 61, 5: `report --compare DIR` said the directory was "not a regular file (a FIFO,
    a device or a socket)"."""
    import json as _json

    from conftest import run_cli

    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    a = tmp_path / "a.json"
    a.write_text(_json.dumps(result_doc(691.2)))
    (one / "b.json").write_text(_json.dumps(result_doc(998.4)))
    (two / "b.json").write_text(_json.dumps(result_doc(998.4)))
    (two / "c.json").write_text(_json.dumps(result_doc(614.4)))
    ok = run_cli("report", str(a), "--compare", str(one))
    assert ok.returncode == 0, ok.stderr
    bad = run_cli("report", str(a), "--compare", str(two))
    assert bad.returncode == 1 and "a directory holding 2 results" in bad.stderr, bad.stderr
    assert "FIFO" not in bad.stderr
