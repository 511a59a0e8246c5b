"""`report` over several directories (issue 13.5): columns say what differs, plots never
overwrite each other, repeated points are one mean with its spread, not a zig-zag."""

import json
import statistics

import pytest
from helpers.results import result_doc

from jetbench.report import plots, tables
from jetbench.report.io import load_results

from conftest import run_cli


def _write(directory, doc, created):
    directory.mkdir(parents=True, exist_ok=True)
    doc = dict(doc, created=created)
    (directory / f"{doc['id']}.json").write_text(json.dumps(doc))
    (directory / "t.csv").write_text("# trace\nt_s,ina3221/VDD_IN\n0.0,5.0\n1.0,5.1\n")
    return doc


def test_columns_name_the_run_directory_when_nothing_else_differs(tmp_path):
    _write(tmp_path / "monday", result_doc(691.2, ips=47), "2026-11-16T10:00:00+0000")
    _write(tmp_path / "tuesday", result_doc(691.2, ips=45), "2026-11-17T10:00:00+0000")
    docs = load_results([tmp_path / "monday", tmp_path / "tuesday"])
    headers, _rows = tables.table_cells(docs)
    assert headers == ["alexnet FP32 b1 [monday]", "alexnet FP32 b1 [tuesday]"]


def test_columns_name_the_board_when_boards_differ():
    a = result_doc(691.2)
    b = dict(result_doc(691.2), board={"model": "NVIDIA Jetson Nano"})
    headers, _ = tables.table_cells([a, b])
    assert headers == ["alexnet FP32 b1 NVIDIA Jetson TX1 Developer Kit",
                       "alexnet FP32 b1 NVIDIA Jetson Nano"]
    same_board = [result_doc(691.2), result_doc(691.2, precision="fp16")]
    assert tables.distinguishing(same_board) == ["", ""]


def test_repeats_are_one_mean_with_spread():
    # Two runs at three clocks: 8.0/9.0, 10.0/12.0, 9.0/9.0 img/s/W (watts fixed at 5).
    runs = [[40, 50, 45], [45, 60, 45]]
    docs = [result_doc(mhz, ips=ips, watts=5.0)
            for run in runs for mhz, ips in zip((614.4, 691.2, 768.0), run)]
    series = plots.freq_series(docs)["alexnet FP32 b1"]
    assert [p["mhz"] for p in series] == pytest.approx([614.4, 691.2, 768.0])  # no zig-zag
    mid = series[1]
    assert mid["repeats"] == 2 and mid["images_per_j"] == pytest.approx(11.0)
    assert mid["images_per_j_range"] == pytest.approx((10.0, 12.0))
    # error bar: the larger of the repeats' stdev (1.414) and their own 5% (0.55)
    assert mid["images_per_j_err"] == pytest.approx(statistics.stdev([10.0, 12.0]))
    assert series[2]["images_per_j_err"] == pytest.approx(9.0 * 0.05)  # no spread: own 5%


def test_report_two_dirs_writes_distinct_trace_plots(tmp_path):
    _write(tmp_path / "a", result_doc(691.2, ips=47), "2026-11-16T10:00:00+0000")
    _write(tmp_path / "b", result_doc(691.2, ips=45), "2026-11-17T10:00:00+0000")
    res = run_cli("report", str(tmp_path / "a"), str(tmp_path / "b"), "--plot",
                  str(tmp_path / "plots"))
    assert res.returncode == 0, res.stderr
    shown = [ln.split("plot: ", 1)[1] for ln in res.stdout.splitlines()
             if ln.startswith("plot: ")]
    assert len(shown) == 2 and len(set(shown)) == 2
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == \
        ["b-t.trace.png", "t.trace.png"]
