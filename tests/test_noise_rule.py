"""Issue 39: no printed comparison or advice is drawn from noise. One rule
(report/digits.separated) decides measure's and time's precision advice, time's fastest
runtime, sweep's and measure's most efficient / fastest, and tune's tie: two figures differ
only when their intervals (value +- its spread) do not overlap. Every expected figure below is
computed by hand in the comment beside it."""

from __future__ import annotations

from types import SimpleNamespace

from jetbench.report.digits import separated
from jetbench.run.result import precision_advice as measure_advice
from jetbench.run.sweep import summarize
from jetbench.run.timing import fastest_runtime, precision_advice


def test_the_rule():
    # a spread p is a factor 1 + p: 100 at 5% reaches 105; 108 at 3% reaches down to
    # 108 / 1.03 = 104.85: they overlap
    assert not separated(100, 5, 108, 3)
    # 100 at 2% reaches 102 < 104.85: apart
    assert separated(100, 2, 108, 3)
    # 11x at a CV of 91% (3320 / 1.91 = 1738 > 295 * 1.91 = 563): apart, whatever the order;
    # 1.22x at 110% (122 / 2.1 = 58 < 100 * 2.1 = 210): within noise
    assert separated(3320, 91, 295, 91) and separated(295, 91, 3320, 91)
    assert not separated(122, 110, 100, 110)
    # an unknown spread cannot make a tie
    assert separated(100, None, 101, 50)
    assert not separated(100, None, 100, None)


def _row(precision, ips, cv, runtime="torch"):
    return SimpleNamespace(model="resnet18", batch=1, device="cuda", runtime=runtime,
                           precision=precision, status="ok", images_per_s=ips, cv=cv)


def test_time_precision_advice_is_not_drawn_from_noise():
    # the case: fp16 46 img/s at CV 69% against fp32 69 img/s (69 / 46 = 1.5x;
    # 69 / 1.05 = 65.7 < 46 * 1.69 = 77.7: within noise)
    noisy = precision_advice([_row("fp16", 46.0, 0.69), _row("fp32", 69.0, 0.05)])
    assert len(noisy) == 1
    assert "slower" not in noisy[0] and "use fp32" not in noisy[0]
    assert "fp16 and fp32 are within noise" in noisy[0] and "CV 69%" in noisy[0]
    assert "--duration" in noisy[0]
    # the same figures at CV 2% each (69 / 1.02 = 67.6 > 46 * 1.02 = 46.9): the advice stands
    clear = precision_advice([_row("fp16", 46.0, 0.02), _row("fp32", 69.0, 0.02)])
    assert len(clear) == 1 and "fp16 is 1.5x slower than fp32" in clear[0]


def test_time_fastest_runtime_is_not_drawn_from_noise():
    # 122 vs 100 img/s (1.22x) at 110% variation: a tie, no "1.22x PyTorch eager"
    noisy = fastest_runtime([_row("fp32", 100.0, 1.10), _row("fp32", 122.0, 1.10,
                                                            runtime="onnxruntime")])
    assert len(noisy) == 1 and "PyTorch eager" not in noisy[0]
    assert "within noise" in noisy[0] and "CV 110%" in noisy[0]
    # at CV 1% each (122 / 1.01 = 120.8 > 100 * 1.01 = 101): apart
    clear = fastest_runtime([_row("fp32", 100.0, 0.01), _row("fp32", 122.0, 0.01,
                                                            runtime="onnxruntime")])
    assert clear == ["fastest for resnet18 fp32 batch 1 on cuda: onnxruntime "
                     "(122 img/s; torch 100), 1.22x PyTorch eager"]


def _doc(precision, ips, cv, ipj, ipj_pct, mhz=625):
    return {"status": "ok", "workload": {"model": "sim:resnet18", "precision": precision,
                                         "batch": 1, "device": "cuda", "runtime": "torch"},
            "settings": {"applied": {"gpu_hz": mhz * 1_000_000}},
            "throughput": {"images_per_s": ips, "cv": cv},
            "power": {"total": {"mean_w": ips / ipj, "mean_w_uncertainty_pct": 4.0}},
            "efficiency": {"images_per_j": ipj, "uncertainty": {"images_per_j_pct": ipj_pct}}}


def test_measures_precision_advice_uses_the_results_spread():
    # measure's own result documents: fp16 46 img/s at CV 69%, fp32 69 img/s at 5%
    lines = measure_advice([_doc("fp16", 46.0, 0.69, 5.0, 4.0),
                            _doc("fp32", 69.0, 0.05, 7.6, 4.0)])
    assert len(lines) == 1 and "within noise" in lines[0] and "slower" not in lines[0]


def test_sweeps_most_efficient_and_fastest_are_not_drawn_from_noise():
    # the sweep: 27.5 vs 14.5 img/s at CV 60% (27.5 / 1.6 = 17.2 < 14.5 * 1.6 = 23.2);
    # img/s/W 12.6 at 5% vs 12.5 at 5% (12.6 / 1.05 = 12.0 < 12.5 * 1.05 = 13.1)
    docs = [_doc("fp16", 27.5, 0.60, 12.6, 5.0, mhz=306), _doc("fp16", 14.5, 0.60, 12.5, 5.0,
                                                                mhz=408)]
    answer = summarize(docs).answer()
    assert len(answer) == 2
    # the highest named (by what differs: the clock), the point within noise of it with it
    assert answer[0].startswith("most efficient: 306 MHz, 12.6 +- 0.6 img/s/W")
    assert answer[0].endswith("(408 MHz within noise: 12.5)")
    assert answer[1].startswith("fastest: 306 MHz, 27.5 img/s")
    assert answer[1].endswith("(408 MHz within noise: 14.5)")
    # tight spreads (CV 1%, img/s/W 0.1%: 27.5 / 1.01 > 14.5 * 1.01, 12.6 / 1.001 = 12.587 >
    # 12.5 * 1.001 = 12.513): one point named, once for both
    docs = [_doc("fp16", 27.5, 0.01, 12.6, 0.1, mhz=306), _doc("fp16", 14.5, 0.01, 12.5, 0.1,
                                                               mhz=408)]
    answer = summarize(docs).answer()
    assert len(answer) == 1
    assert answer[0].startswith("most efficient and fastest: 306 MHz, 12.6")


def test_the_peak_of_a_plotted_series_follows_the_rule():
    from jetbench.report.plots import peak_point

    one = [{"mhz": 624.75, "images_per_j": 12.0, "images_per_j_err": 0.5}]
    assert peak_point(one) is None  # a single point is no peak
    # 12.6 +- 0.6 (4.8%) against 12.5 +- 0.6 (4.8%): 12.6 / 1.048 = 12.0 < 12.5 * 1.048
    close = [{"mhz": 306.0, "images_per_j": 12.6, "images_per_j_err": 0.6},
             {"mhz": 408.0, "images_per_j": 12.5, "images_per_j_err": 0.6}]
    assert peak_point(close) is None
    # 12.6 +- 0.1 against 11.6 +- 0.1: 12.6 / 1.0079 = 12.5 > 11.6 * 1.0086 = 11.7: the peak
    apart = [{"mhz": 306.0, "images_per_j": 12.6, "images_per_j_err": 0.1},
             {"mhz": 624.75, "images_per_j": 11.6, "images_per_j_err": 0.1}]
    assert peak_point(apart) is apart[0]
