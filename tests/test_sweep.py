"""sweep: frequency ranges against a board's table, points written as they complete, resume
after an interruption, OOM points recorded, the most efficient and fastest points."""

import pytest
from helpers.workloads import quick

from jetbench.errors import UsageError
from jetbench.hw.fs import Root
from jetbench.report.io import load_results
from jetbench.run.request import MeasureRequest
from jetbench.run.sweep import expand_freqs, summarize, sweep

from conftest import make_board

T210 = [int(76.8e6 * k) for k in range(1, 14)]  # 76.8 .. 998.4 MHz


def test_expand_freqs():
    assert expand_freqs("307MHz..998MHz", T210) == T210[3:]
    assert expand_freqs("all", T210) == T210
    assert expand_freqs("690MHz,0.3GHz,max", T210) == [307_200_000, 691_200_000, 998_400_000]
    assert expand_freqs("min..230MHz", T210) == T210[:3]
    with pytest.raises(UsageError):
        expand_freqs("998MHz..307MHz", T210)
    with pytest.raises(UsageError):
        expand_freqs("10MHz..20MHz", T210)
    with pytest.raises(UsageError):
        expand_freqs("all", [])


def _docs(pairs, unknown=False):
    """Results with a 1% latency CV and img/s/W stated to 2% (unknown=True: neither stated)."""
    return [{"schema": "jetbench.result/1", "status": status, "id": name,
             "workload": {"model": "m", "precision": "fp32", "batch": 1},
             "settings": {"applied": {"gpu_hz": int(mhz * 1e6)}},
             "throughput": ({"images_per_s": ips} if unknown else
                            {"images_per_s": ips, "cv": 0.01}) if ips else None,
             "power": {"total": {"mean_w": w}} if w else None,
             "efficiency": {"images_per_j": ips / w if ips and w else None,
                            **({} if unknown else
                               {"uncertainty": {"images_per_j_pct": 2.0}})}}
            for name, status, mhz, ips, w in pairs]


def test_summary_picks_the_efficiency_peak_and_the_fastest():
    s = summarize(_docs([("a", "ok", 307, 10.0, 2.0), ("b", "ok", 691, 20.0, 3.0),
                         ("c", "ok", 998, 24.0, 5.0), ("d", "oom", 998, None, None)]))
    assert s.most_efficient["id"] == "b" and s.fastest["id"] == "c" and s.oom == ["d"]
    text = "\n".join(s.lines())
    # named by what differs from the other points (their clocks); 2% of 20/3 = 0.13
    assert "most efficient: 691 MHz, 6.67 +- 0.13 img/s/W" in text
    assert "fastest: 998 MHz, 24.0 img/s" in text
    assert "out of memory" in text
    assert "simulated board" not in text


def test_summary_leaves_invalid_points_out_and_says_simulated_throughput():
    docs = _docs([("a", "ok", 307, 10.0, 2.0), ("b", "ok", 691, 30.0, 3.0),
                  ("c", "ok", 998, 24.0, 5.0)])
    docs[1]["validity"] = {"valid": False, "reasons": ["gpu ran at 76.8 MHz"]}
    docs[0]["simulated"] = True
    docs[0]["power"]["total"]["mean_w_uncertainty_pct"] = 4.0
    docs[0]["efficiency"]["uncertainty"] = {"images_per_j_pct": 5.0}
    s = summarize(docs)
    assert s.most_efficient["id"] == "a" and s.fastest["id"] == "c" and s.invalid == 1
    text = "\n".join(s.lines())
    # 10 img/s / 2 W = 5.00 img/s/W, 5% = 0.25; 4% of 2 W = 0.08 W; 998 MHz's 24 / 5 = 4.8
    # +- 2% overlaps it (5 / 1.05 = 4.76 < 4.8 x 1.02 = 4.90): within noise, said with it
    assert "most efficient: 307 MHz, 5.00 +- 0.25 img/s/W" in text
    assert "(998 MHz within noise: 4.80)" in text
    assert "2.00 +- 0.08 W" in text
    assert "1 invalid point(s) left out" in text
    assert "does not follow the simulated GPU clock" in text


class _Stop(Exception):
    pass


def test_sweep_writes_each_point_and_resumes_after_an_interruption(tmp_path, tiny):
    base = make_board(tmp_path, "tx1")
    out = tmp_path / "sweep"
    request = quick(out, batches=(1, 2))
    seen = []

    def interrupt_after_two(doc, path):
        seen.append(path.name)
        if len(seen) == 3:
            raise KeyboardInterrupt  # Ctrl-C after the third point was written

    with pytest.raises(KeyboardInterrupt):
        sweep(Root(base), request, "307MHz..400MHz", on_result=interrupt_after_two)
    assert len(load_results([out])) == 3
    assert not (base / "var/lib/jetbench/journal.json").exists()  # restored all the same

    import dataclasses

    report = sweep(Root(base), dataclasses.replace(request, resume=True), "307MHz..400MHz")
    assert len(report.skipped) == 3 and len(report.results) == 4
    docs = load_results([out])
    got = sorted((d["settings"]["applied"]["gpu_hz"], d["workload"]["batch"]) for d in docs)
    assert got == [(307_200_000, 1), (307_200_000, 2), (384_000_000, 1), (384_000_000, 2)]
    assert all(d["settings"]["resolved"]["gpu_hz"] == d["settings"]["applied"]["gpu_hz"]
               for d in docs)
    s = summarize(report.results)
    assert s.most_efficient is not None and s.fastest is not None


def test_sweep_records_oom_points_and_needs_an_out_dir(tmp_path, tiny):
    base = make_board(tmp_path, "nano")
    report = sweep(Root(base), quick(tmp_path / "s", models=("jb_tinynet:greedy",),
                                     batches=(2, 8)), "max")
    assert [d["status"] for d in report.results] == ["ok", "oom"]
    assert summarize(report.results).oom == ["jb_tinynet_greedy-fp32-b8-gpu922mhz"]
    with pytest.raises(UsageError):
        sweep(Root(base), MeasureRequest(), "all")


def test_summary_gives_no_verdict_where_the_uncertainty_is_unknown():
    """Issue 61: a point's unknown spread (a command that prints one rate) gives no "most
    efficient" and no "fastest", and says why, as the result states it."""
    docs = _docs([("a", "ok", 307, 10.0, 2.0), ("b", "ok", 998, 30.0, 3.0)], unknown=True)
    for d in docs:
        d["efficiency"]["uncertainty"] = {"basis": "power: x; throughput: unknown (a command "
                                                   "reports no per-iteration times to jetbench)"}
    lines = summarize(docs).answer()
    assert lines == [
        "most efficient: no verdict: the command reports one rate: no spread; print "
        "per-iteration times or repeat it",
        "fastest: no verdict: the command reports one rate: no spread; print per-iteration "
        "times or repeat it"]


def test_summary_answer_last_and_once_when_the_fastest_is_the_most_efficient():
    docs = _docs([("a", "ok", 307, 10.0, 2.0), ("b", "ok", 998, 30.0, 3.0)])
    docs[0]["simulated"] = True
    lines = summarize(docs).lines()
    assert lines[-1].startswith("most efficient and fastest: 998 MHz, 10.0 ")
    assert not any(ln.startswith("fastest") for ln in lines)
    assert "simulated board" in " ".join(lines[:-1])  # the caveat before the answer
