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

from jetbench.errors import UsageError
from jetbench.report import compare, io, plots, tables
from jetbench.report.schema import SCHEMA, point_id

from conftest import REPO


def result(mhz, batch=1, ips=47.0, watts=5.5, precision="fp32", simulated=True, path=None):
    doc = {
        "schema": SCHEMA, "status": "ok", "simulated": simulated,
        "id": point_id("alexnet", precision, batch, int(mhz * 1e6)),
        "board": {"model": "NVIDIA Jetson TX1 Developer Kit"},
        "settings": {"applied": {"gpu_hz": int(mhz * 1e6)}},
        "workload": {"model": "alexnet", "precision": precision, "batch": batch},
        "throughput": {"images_per_s": ips, "latency_ms": {"p50": 1000 / ips, "p99": 30.0}},
        "power": {"total": {"name": "VDD_IN", "point": "module_input", "source": "ina3221",
                            "mean_w": watts},
                  "totals": [{"name": "VDD_IN", "point": "module_input",
                              "source": "ina3221", "mean_w": watts}],
                  "channels": [{"name": "VDD_IN", "point": "module_input",
                                "source": "ina3221"},
                               {"name": "VDD_GPU", "point": "rail", "source": "ina3221"}],
                  "phases_s": {"start": 0.0, "warmup_start": 0.2, "timed_start": 0.6,
                               "timed_end": 1.6, "end": 1.7},
                  "trace_csv": "t.csv"},
        "efficiency": {"images_per_j": ips / watts, "by_point": [
            {"name": "VDD_IN", "source": "ina3221", "point": "module_input", "kind": "total",
             "mean_w": watts, "images_per_j": ips / watts},
            {"name": "VDD_GPU", "source": "ina3221", "point": "rail", "kind": "channel",
             "mean_w": 2.0, "images_per_j": ips / 2.0}]},
        "thermal": {"throttled": False},
        "warnings": [],
    }
    if path is not None:
        doc["_path"] = str(path)
    return doc


def test_whitepaper_table_cells():
    docs = [result(691.2, ips=47, watts=5.5), result(691.2, ips=67, watts=5.1,
                                                     precision="fp16")]
    headers, rows = tables.table_cells(docs)
    assert headers == ["alexnet FP32 b1", "alexnet FP16 b1"]
    by = dict(rows)
    assert by["Performance (img/s)"] == ["47.0", "67.0"]
    assert by["Power (W): VDD_IN, module input"] == ["5.50", "5.10"]
    assert by["Performance/W (img/s/W): VDD_IN"] == ["8.5", "13.1"]
    assert by["  VDD_GPU (rail) W"] == ["2.00", "2.00"]
    assert by["GPU clock (applied)"] == ["691.2 MHz", "691.2 MHz"]
    assert "ESTIMATE" not in " ".join(by)  # only when asked for
    assert "SIMULATED" in tables.title(docs)
    assert "SIMULATED" not in tables.title([result(691.2, simulated=False)])
    md = tables.markdown(docs)
    assert "| Performance/W (img/s/W): VDD_IN | 8.5 | 13.1 |" in md


def test_compare_change_per_metric():
    a, b = result(691.2, ips=47, watts=5.5), result(998.4, ips=60, watts=7.5)
    changes = {c.metric: c for c in compare.compare(a, b)}
    assert changes["img/s"].ratio == pytest.approx(60 / 47 - 1)
    assert changes["img/s"].verdict == "better"
    assert changes["power (W)"].verdict == "worse"
    assert changes["img/s/W"].verdict == "worse"  # 8.55 -> 8.0
    assert compare.caveats(a, b) == []
    assert compare.caveats(a, result(691.2, simulated=False)) == [
        "one result is from a SIMULATED board"]


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
    docs = [result(mhz, batch=b, ips=10 * b + mhz / 100, path=tmp_path / "r.json")
            for mhz in (307.2, 691.2, 998.4) for b in (1, 8)]
    written = plots.report_plots(docs, tmp_path / "plots")
    names = sorted(p.name for p in written)
    assert names[:2] == ["efficiency_vs_gpu_clock.png", "t.trace.png"]
    assert "throughput_vs_batch.png" in names
    for p in written:
        assert plots.png_size(p)[0] >= 800
    freq_fig = figs[0]
    top, bottom = freq_fig.axes
    assert top.get_ylabel() == "img/s" and bottom.get_ylabel() == "img/s/W"
    assert bottom.get_xlabel() == "GPU clock (MHz, applied)"
    assert "SIMULATED" in top.get_title()
    assert len(top.lines) == 2  # b1 and b8
    xs = list(top.lines[0].get_xdata())
    assert [round(x, 1) for x in xs] == [307.2, 691.2, 998.4]
    batch_ax = figs[1].axes[0]
    assert batch_ax.get_xlabel() == "batch size" and batch_ax.get_xscale() == "log"
    trace_ax = figs[2].axes[0]
    assert trace_ax.get_ylabel() == "power (W)"
    labels = [t.get_text() for t in trace_ax.get_legend().get_texts()]
    assert labels == ["ina3221/VDD_IN", "ina3221/VDD_GPU", "warm-up", "measured window"]


def test_load_results_skips_foreign_json_in_directories(tmp_path):
    io.write_json(tmp_path / "a.json", result(691.2))
    (tmp_path / "time.json").write_text('{"schema": "jetbench.time/1"}')
    (tmp_path / ".a.json.x.tmp").write_text("{half")
    docs = io.load_results([tmp_path])
    assert [d["id"] for d in docs] == [result(691.2)["id"]]
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
        deadline = time.monotonic() + 30
        while not target.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        doc = json.loads(target.read_text())  # whole, never half-written
        assert doc["k"] >= 1 and len(doc["pad"]) == 2000
    assert io.load_results([tmp_path], skip_foreign=True) == []  # not a full result: skipped
