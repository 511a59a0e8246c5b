"""Plots for a report (issue 27.10): titles name the board and the configuration, img/s has
error bars from its CV, a power panel, the legend beside the data (never over it), the
window's mean W on the trace, the simulation caveat on the figure itself."""

import pytest
from helpers.results import result_doc

from jetbench.report import pareto_plot, plots


@pytest.fixture
def figures(monkeypatch):
    """The figures the plot functions draw, kept open (instead of only their PNGs)."""
    kept = []

    def keep(fig, path):
        kept.append(fig)
        return path

    monkeypatch.setattr(plots, "_save", keep)
    yield kept
    for fig in kept:
        plots._plt().close(fig)


def _legend_beside_data(fig, ax):
    fig.canvas.draw()
    legend = ax.get_legend()
    assert legend is not None
    assert legend.get_window_extent().x0 >= ax.get_window_extent().x1


def _sweep(framework=None):
    docs = [result_doc(m, ips=40 + m / 20, watts=3 + m / 200) for m in (307.2, 614.4, 998.4)]
    for d in docs:
        d["throughput"]["cv"] = 0.05
        if framework:
            d["workload"]["framework"] = framework
    return docs


def test_sweep_figure(figures, tmp_path):
    docs = _sweep()
    series = plots.freq_series(docs)["alexnet FP32 b1"]
    assert series[0]["images_per_s_err"] == pytest.approx(series[0]["images_per_s"] * 0.05)
    assert series[0]["watts"] == pytest.approx(3 + 307.2 / 200)
    plots.plot_vs_freq(docs, tmp_path / "f.png")
    fig = figures[0]
    top, middle, bottom = fig.axes[:3]
    title = top.get_title()
    assert "NVIDIA Jetson TX1 Developer Kit" in title and "alexnet FP32 b1" in title
    assert "power (W)" in middle.get_ylabel() and middle.lines  # the power panel
    # img/s drawn with error bars: an errorbar container on the top panel
    assert top.containers and any(len(c) == 3 and c[2] for c in top.containers)
    _legend_beside_data(fig, top)
    assert any("does not follow the simulated GPU clock" in t.get_text() for t in fig.texts)


def test_no_caveat_when_img_s_follows_the_clock(figures, tmp_path):
    plots.plot_vs_freq(_sweep(framework="sim"), tmp_path / "f.png")
    assert not figures[0].texts


def test_trace_figure(figures, tmp_path):
    doc = result_doc(691.2)
    csv = tmp_path / "t.csv"
    csv.write_text("# trace\nt_s,ina3221/VDD_IN\n" +
                   "".join(f"{t / 10:.1f},{5.5 if t > 6 else 3.0}\n" for t in range(18)))
    plots.plot_trace(doc, csv, tmp_path / "t.png")
    fig = figures[0]
    ax = fig.axes[0]
    assert "alexnet FP32 b1" in ax.get_title() and "TX1" in ax.get_title()
    mean = [c for c in ax.collections if str(c.get_label()).startswith("window mean")]
    assert mean and "5.50 W" in mean[0].get_label()
    _legend_beside_data(fig, ax)


def test_batch_figure(figures, tmp_path):
    docs = [result_doc(691.2, batch=b, ips=40.0 * b) for b in (1, 4, 8)]
    for d in docs:
        d["throughput"]["cv"] = 0.1
    plots.plot_vs_batch(docs, tmp_path / "b.png")
    fig = figures[0]
    ax = fig.axes[0]
    assert "alexnet FP32" in ax.get_title() and "TX1" in ax.get_title()
    # img/s drawn with error bars from the CV: 10% of each point
    bars = [c for c in ax.containers if len(c) == 3 and c[2]]
    assert bars
    segments = bars[0][2][0].get_segments()
    assert [s[1][1] - s[0][1] for s in segments] == pytest.approx([8.0, 32.0, 64.0])
    _legend_beside_data(fig, ax)


def test_batch_figure_draws_a_line_per_runtime(figures, tmp_path):
    docs = [result_doc(691.2, batch=b, ips=40.0 * b) for b in (1, 4, 8)]
    onnx = [result_doc(691.2, batch=b, ips=50.0 * b) for b in (1, 4, 8)]
    for d in onnx:
        d["workload"].update(runtime="onnxruntime", provider="CPUExecutionProvider")
    plots.plot_vs_batch(docs + onnx, tmp_path / "b.png")
    ax = figures[0].axes[0]
    labels = sorted(c.get_label() for c in ax.containers)
    assert labels == ["alexnet FP32 @ 691.2 MHz", "alexnet FP32, onnxruntime (cpu) @ 691.2 MHz"]
    # the batch sizes as numbers, not powers of two (2^0, 2^2, 2^3)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4", "8"]


def test_the_pareto_plot_draws_each_points_uncertainty_in_the_studys_unit(figures, tmp_path):
    def trial(number, ips, ipj, pct, feasible=True):
        return {"number": number, "feasible": feasible,
                "settings": {"model": "command", "gpu_hz": 76_800_000 * (number + 1)},
                "metrics": {"images_per_s": ips, "images_per_j": ipj, "power_w": ips / ipj,
                            "images_per_j_uncertainty_pct": pct}}

    trials = [trial(0, 17.2, 5.3, 4.0), trial(1, 17.3, 4.4, 3.0), trial(2, 9.0, 3.0, None)]
    doc = {"simulated": True, "unit": "tokens", "trials": trials, "pareto": [trials[0]],
           "best": trials[0]}
    pareto_plot.plot_pareto(doc, tmp_path / "pareto.png")
    ax = figures[0].axes[0]
    bars = [c for c in ax.containers if c.has_xerr]
    assert len(bars) == 1  # one set of error bars: the two points whose uncertainty is known
    segments = bars[0].lines[2][0].get_segments()
    assert sorted(round(abs(b[0] - a[0]), 3) for a, b in segments) == [
        round(2 * 4.4 * 0.03, 3), round(2 * 5.3 * 0.04, 3)]
    assert ax.get_xlabel() == "tokens/J (tokens per joule)" and ax.get_ylabel() == "tokens/s"
    assert "a command" in ax.get_title() and "SIMULATED" in ax.get_title()


def test_the_pareto_plot_labels_each_point_by_what_differs(figures, tmp_path):
    """Issue 61: each point labelled by its clock (the GPU's alone differs: '768 MHz'), not
    'sim:resnet18 fp16 b1 gpu 768 MHz emc 1.6 GHz'; a point read twice labelled once."""
    def trial(number, gpu_mhz, ips, ipj, feasible=True):
        return {"number": number, "feasible": feasible,
                "settings": {"model": "sim:resnet18", "precision": "fp16", "batch": 1,
                             "gpu_hz": int(gpu_mhz * 1e6), "emc_hz": 1_600_000_000},
                "metrics": {"images_per_s": ips, "images_per_j": ipj, "power_w": ips / ipj}}

    trials = [trial(0, 998.4, 64.9, 9.57), trial(1, 691.2, 54.7, 9.68),
              trial(2, 768, 56.7, 9.90), trial(3, 768, 56.8, 9.92), trial(4, 76.8, 9.0, 3.0)]
    doc = {"simulated": True, "unit": "images", "trials": trials, "pareto": [trials[2]],
           "best": trials[2]}
    pareto_plot.plot_pareto(doc, tmp_path / "pareto.png")
    ax = figures[0].axes[0]
    labels = sorted(t.get_text() for t in ax.texts)
    assert labels == ["691.2 MHz", "76.8 MHz", "768 MHz", "998.4 MHz"], labels
    # where two clocks differ, each says its knob; the batch as 'bN'
    trials[4]["settings"].update(emc_hz=800_000_000, batch=8)
    pareto_plot.plot_pareto(doc, tmp_path / "pareto.png")
    labels = sorted(t.get_text() for t in figures[1].axes[0].texts)
    assert "b8 gpu 76.8 MHz emc 800 MHz" in labels and "b1 gpu 768 MHz emc 1.6 GHz" in labels
    # more points than LABEL_ALL_UP_TO: only the front's and the best's labels (no clutter)
    many = [trial(k, 76.8 * (k + 1), 5.0 * (k + 1), 3.0) for k in range(14)]
    doc = {"simulated": True, "unit": "images", "trials": many, "pareto": [many[13]],
           "best": many[13]}
    pareto_plot.plot_pareto(doc, tmp_path / "pareto.png")
    assert [t.get_text() for t in figures[2].axes[0].texts] == ["1.075 GHz"]  # 14 x 76.8
