"""report / report --compare / sweep summaries in any unit of work: tokens/J and frames/J
where the results count tokens or frames, img/s/W for images (and for results written before
units existed), a Unit row when results count different things, and --compare refusing to
compare different units (exit 1)."""

import json

import pytest

from jetbench.errors import UsageError
from jetbench.report import compare, plots, tables
from jetbench.run.sweep import summarize

from conftest import run_cli


def result(unit, rate, watts, model="llama-bench", gpu_hz=691200000, old=False):
    """A minimal jetbench.result/1 document; rate / watts is its per-J figure."""
    per_j = rate / watts
    thr = {"latency_ms": {"p50": 10.0, "p99": 12.0}}
    eff = {"basis": "VDD_IN", "by_point": [{"name": "VDD_IN", "source": "ina3221",
                                            "point": "module_input", "kind": "total",
                                            "mean_w": watts}]}
    if old:  # written before units: images only, images_* keys
        thr["images_per_s"] = rate
        eff["images_per_j"] = per_j
        eff["by_point"][0]["images_per_j"] = per_j
    else:
        thr.update(items_per_s=rate, unit=unit)
        eff["items_per_j"] = per_j
        eff["by_point"][0]["items_per_j"] = per_j
        if unit == "images":
            thr["images_per_s"] = rate
            eff["images_per_j"] = per_j
            eff["by_point"][0]["images_per_j"] = per_j
    return {"schema": "jetbench.result/1", "status": "ok", "simulated": True,
            "id": f"{model}-cmd-b1", "board": {"model": "NVIDIA Jetson TX1"},
            "settings": {"applied": {"gpu_hz": gpu_hz}},
            "workload": {"model": model, "precision": "cmd", "batch": 1},
            "throughput": thr, "efficiency": eff,
            "power": {"total": {"name": "VDD_IN", "point": "module_input", "source": "ina3221",
                                "mean_w": watts},
                      "totals": [{"name": "VDD_IN", "point": "module_input",
                                  "source": "ina3221", "mean_w": watts}]}}


def rows(docs):
    return dict(tables.table_cells(docs)[1])


def test_tokens_table_says_tokens_per_j():
    cells = rows([result("tokens", 20.0, 8.0)])
    assert cells["Performance (tokens/s)"] == ["20.0"]
    # 20 / 8
    assert cells["Performance/W (tokens/J): VDD_IN; module, measured"] == ["2.50 +- unknown"]
    assert not any("img" in label for label in cells)


def test_images_and_old_results_keep_img_per_s_per_w():
    cells = rows([result("images", 300.0, 6.0), result("images", 150.0, 5.0, old=True)])
    assert cells["Performance (img/s)"] == ["300.0", "150.0"]
    assert cells["Performance/W (img/s/W): VDD_IN; module, measured"] == ["50.0 +- unknown",
                                                                          "30.0 +- unknown"]
    assert "Unit" not in cells


def test_mixed_units_in_one_table_say_each_columns_unit():
    cells = rows([result("frames", 30.0, 5.0, "deepstream"), result("tokens", 20.0, 8.0)])
    assert cells["Unit"] == ["frames", "tokens"]
    assert cells["Performance (per s: see Unit)"] == ["30.0", "20.0"]
    assert cells["Performance/W (per J: see Unit): VDD_IN; module, measured"] == ["6.00 +- unknown",
                                                                "2.50 +- unknown"]


def test_compare_names_the_unit_and_refuses_different_units():
    a, b = result("tokens", 20.0, 8.0), result("tokens", 22.0, 8.0)
    changes = {c.metric: c for c in compare.compare(a, b)}
    assert changes["tokens/J"].a == 2.5 and changes["tokens/J"].b == 2.75
    # their uncertainties are unknown: no verdict (issue 61: "better" from two numbers whose
    # noise nobody knows is a claim from noise)
    assert changes["tokens/J"].verdict == "no verdict"
    assert "unknown" in changes["tokens/J"].judged.why
    assert changes["tokens/s"].ratio == pytest.approx(0.1)
    with pytest.raises(UsageError, match="different units: A counts tokens"):
        compare.compare(a, result("images", 300.0, 6.0))
    # an old result counts images: comparable with a new images result
    assert compare.compare(result("images", 1, 1, old=True), result("images", 2, 1))


def test_sweep_summary_and_plot_series_in_the_unit():
    docs = [result("tokens", 20.0, 8.0, gpu_hz=614400000), result("tokens", 24.0, 8.0)]
    lines = summarize(docs).lines()
    # no stated uncertainty: no verdict (issue 61), each answer saying why
    assert lines[-2].startswith("most efficient: no verdict: ")
    assert lines[-1].startswith("fastest: no verdict: ")
    series = plots.freq_series(docs)
    (pts,) = series.values()
    assert [p["images_per_j"] for p in pts] == [2.5, 3.0]  # per-J in the result's unit


def test_cli_compare_of_different_units_exits_1(tmp_path):
    a, b = tmp_path / "tokens.json", tmp_path / "images.json"
    a.write_text(json.dumps(result("tokens", 20.0, 8.0)))
    b.write_text(json.dumps(result("images", 300.0, 6.0)))
    r = run_cli("report", str(a), "--compare", str(b))
    assert r.returncode == 1, r.stderr
    assert "cannot compare results in different units" in r.stderr
    assert "Traceback" not in r.stderr
    same = tmp_path / "tokens2.json"
    same.write_text(json.dumps(result("tokens", 22.0, 8.0)))
    r = run_cli("report", str(a), "--compare", str(same))
    assert r.returncode == 0, r.stderr
    assert "tokens/J" in r.stdout and "img/s" not in r.stdout


def test_cli_report_plots_one_figure_per_unit(tmp_path):
    pytest.importorskip("matplotlib")
    files = []
    for k, (unit, hz) in enumerate([("tokens", 614400000), ("tokens", 691200000),
                                    ("images", 614400000), ("images", 691200000)]):
        path = tmp_path / f"r{k}.json"
        path.write_text(json.dumps(result(unit, 10.0 + k, 5.0, model=unit, gpu_hz=hz)))
        files.append(str(path))
    r = run_cli("report", *files, "--plot", str(tmp_path / "plots"))
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert names == ["efficiency_vs_gpu_clock-tokens.png", "efficiency_vs_gpu_clock.png"]
