"""measure end to end on simulated boards (their rail simulation) and simulated serial meters:
requested vs applied clocks, img/s/W against a meter's known watts, restore after success and
failure, throttling, the window-too-short refusal, result files."""

import json

import pytest
from helpers.workloads import board_snapshot, quick

from jetbench.errors import UsageError
from jetbench.hw.fs import Root
from jetbench.report.io import load_result
from jetbench.run.measure import measure
from jetbench.sim.meters import sim_for

from conftest import diff, make_board

SLOW_OK = "?timeout=5s"  # a loaded CI machine may answer *IDN? late


def test_requested_vs_applied_and_result_files(tmp_path, tiny):
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    out = tmp_path / "out"
    report = measure(Root(base), quick(out, gpu_freqs=(690_000_000,), idle_s=0.2,
                                       regulator_efficiency=0.8))
    assert report.restored == "restored"
    doc = report.results[0]
    assert doc["schema"] == "jetbench.result/1" and doc["simulated"] is True
    assert doc["status"] == "ok" and doc["board"]["family"] == "tx1"
    assert doc["settings"]["requested"]["gpu_hz"] == 690_000_000
    assert doc["settings"]["resolved"]["gpu_hz"] == 691_200_000
    assert doc["settings"]["applied"]["gpu_hz"] == 691_200_000  # read back from the board
    assert doc["workload"]["batch"] == 1 and doc["workload"]["iterations"] >= 2
    assert set(doc["throughput"]["latency_ms"]) >= {"min", "mean", "p50", "p90", "p99", "max"}
    points = {c["name"]: c["point"] for c in doc["power"]["channels"]}
    assert points == {"VDD_IN": "module_input", "VDD_GPU": "rail", "VDD_CPU": "rail"}
    assert doc["power"]["total"]["name"] == "VDD_IN"
    # The total is VDD_IN alone (never VDD_IN + its rails), checked against the raw trace: the
    # mean of the VDD_IN column over the window, not the document's own figure.
    path = out / "jb_tinynet_tiny-fp32-b1-gpu691mhz.json"
    window = doc["power"]["window"]
    start, end = window["start_s"], window["start_s"] + window["duration_s"]
    rows = [line.split(",") for line in path.with_suffix(".csv").read_text().splitlines()[2:]]
    vdd_in = [float(r[1]) for r in rows if start <= float(r[0]) <= end and r[1]]
    assert len(vdd_in) >= 4
    trace_mean_w = sum(vdd_in) / len(vdd_in)
    assert doc["power"]["total"]["mean_w"] == pytest.approx(trace_mean_w, rel=0.05)
    ipj = doc["efficiency"]["images_per_j"]
    assert ipj == pytest.approx(doc["throughput"]["images_per_s"] / trace_mean_w, rel=0.05)
    assert doc["efficiency"]["above_idle"]["idle_w"] > 0
    pre = doc["efficiency"]["pre_regulation_estimate"]
    assert pre["estimate"] is True and pre["images_per_j"] == pytest.approx(ipj * 0.8)
    assert doc["thermal"]["throttled"] is False
    # Files: the JSON (valid, the same document) and the trace CSV beside it.
    assert report.paths == [path]
    assert json.loads(path.read_text())["id"] == doc["id"]
    csv = path.with_suffix(".csv").read_text().splitlines()
    assert "SIMULATED" in csv[0]
    assert csv[1] == "t_s,ina3221/VDD_IN,ina3221/VDD_GPU,ina3221/VDD_CPU"
    assert len(csv) > 20
    # Clocks put back, journal removed.
    assert not (base / "var/lib/jetbench/journal.json").exists()
    assert diff(before, board_snapshot(base, "tx1")) == []


@pytest.mark.parametrize("protocol", ["scpi", "stream"])
def test_images_per_joule_is_images_per_s_over_meter_watts(tmp_path, tiny, protocol):
    base = make_board(tmp_path, "tx1-r24")
    with sim_for(protocol, 7.5) as meter:
        report = measure(Root(base), quick(tmp_path / "out",
                                           meters=("auto", meter.spec + SLOW_OK),
                                           duration_s=1.0, gpu_freqs=("max",)))
    doc = report.results[0]
    ips = doc["throughput"]["images_per_s"]
    external = [p for p in doc["efficiency"]["by_point"]
                if p["point"] == "external" and p["kind"] == "total"]
    assert len(external) == 1
    assert external[0]["mean_w"] == pytest.approx(7.5, rel=1e-3)
    assert external[0]["images_per_j"] == pytest.approx(ips / 7.5, rel=1e-3)
    # The first meter (the board's rails) stays the primary figure; both are recorded.
    assert doc["power"]["total"]["point"] == "module_input"
    assert {t["point"] for t in doc["power"]["totals"]} == {"module_input", "external"}
    assert doc["settings"]["applied"]["gpu_hz"] == 998_400_000


def test_external_meter_alone_is_the_total(tmp_path, tiny):
    base = make_board(tmp_path, "tx1")
    with sim_for("scpi", 4.0) as meter:
        report = measure(Root(base), quick(tmp_path / "out",
                                           meters=(meter.spec + SLOW_OK,),
                                           duration_s=1.0))
    doc = report.results[0]
    assert [c["point"] for c in doc["power"]["channels"]] == ["external"]
    assert doc["efficiency"]["images_per_j"] == pytest.approx(
        doc["throughput"]["images_per_s"] / 4.0, rel=1e-3)
    assert any("not pinned" in w for w in doc["warnings"])
    assert report.restored == "nothing was changed"


def test_window_too_short_is_refused_and_clocks_restored(tmp_path, tiny):
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    with sim_for("scpi", 5.0) as meter:
        # The meter is read once a second: a 0.3 s window spans less than 4 of its periods.
        report = measure(Root(base), quick(tmp_path / "out", duration_s=0.3,
                                           gpu_freqs=(690_000_000,),
                                           meters=("auto", meter.spec + "?interval=1s&timeout=5s")))
    doc = report.results[0]
    assert report.invalid == [doc]  # kept, marked: the CLI exits 3 after writing it
    reasons = " ".join(doc["validity"]["reasons"])
    assert "img/s/W refused" in reasons and "shorter than 4 update periods" in reasons
    assert "--duration" in reasons
    assert doc["efficiency"]["images_per_j"] is None
    assert load_result(tmp_path / "out" / f"{doc['id']}.json")["validity"]["valid"] is False
    assert not (base / "var/lib/jetbench/journal.json").exists()
    assert diff(before, board_snapshot(base, "tx1")) == []


def test_poor_coverage_is_refused(tmp_path, tiny):
    base = make_board(tmp_path, "tx1")
    report = measure(Root(base), quick(tmp_path / "out", min_coverage=1.01))  # never reachable
    reasons = " ".join(report.results[0]["validity"]["reasons"])
    assert "covered only" in reasons and "--duration" in reasons
    assert report.results[0]["efficiency"]["images_per_j"] is None


def test_restore_after_a_failure_mid_run(tmp_path, tiny):
    base = make_board(tmp_path, "tx2")
    before = board_snapshot(base, "tx2")
    with pytest.raises(UsageError):
        measure(Root(base), quick(tmp_path / "out", models=("no_such_module_xyz:net",),
                                  gpu_freqs=("max",), cpu_freq="max", emc_freq="max"))
    assert not (base / "var/lib/jetbench/journal.json").exists()
    assert diff(before, board_snapshot(base, "tx2")) == []


def test_oom_point_is_recorded_and_skipped(tmp_path, tiny):
    base = make_board(tmp_path, "tx1")
    report = measure(Root(base), quick(tmp_path / "out", models=("jb_tinynet:greedy",),
                                       batches=(1, 4)))
    assert [d["status"] for d in report.results] == ["ok", "oom"]
    oom = load_result(tmp_path / "out" / "jb_tinynet_greedy-fp32-b4.json")
    assert oom["status"] == "oom" and "out of memory" in oom["message"]
    assert oom["throughput"] is None and oom["efficiency"]["images_per_j"] is None


def test_existing_journal_is_kept_and_only_own_writes_undone(tmp_path, tiny):
    from typer.testing import CliRunner

    from jetbench.cli.main import app

    base = make_board(tmp_path, "tx1")
    pristine = board_snapshot(base, "tx1")
    assert CliRunner().invoke(app, ["--root", str(base), "maxperf"]).exit_code == 0
    after_maxperf = board_snapshot(base, "tx1")
    journal = (base / "var/lib/jetbench/journal.json").read_text()
    report = measure(Root(base), quick(tmp_path / "out", gpu_freqs=(307_000_000,)))
    assert report.results[0]["settings"]["applied"]["gpu_hz"] == 307_200_000
    assert "earlier jetbench state" in report.restored
    assert diff(after_maxperf, board_snapshot(base, "tx1")) == []
    assert json.loads((base / "var/lib/jetbench/journal.json").read_text())["entries"][
        : len(json.loads(journal)["entries"])] == json.loads(journal)["entries"]
    assert CliRunner().invoke(app, ["--root", str(base), "restore"]).exit_code == 0
    assert diff(pristine, board_snapshot(base, "tx1")) == []


def test_keep_clocks_leaves_the_journal(tmp_path, tiny):
    base = make_board(tmp_path, "tx1")
    report = measure(Root(base), quick(tmp_path / "out", gpu_freqs=(690_000_000,),
                                       keep_clocks=True))
    assert report.restored.startswith("kept")
    node = base / "sys/devices/57000000.gpu/devfreq/57000000.gpu"
    assert (node / "max_freq").read_text().strip() == "691200000"
    assert (base / "var/lib/jetbench/journal.json").exists()


def test_setup_time_is_recorded(tmp_path, tiny):
    base = make_board(tmp_path, "nano")
    report = measure(Root(base), quick(tmp_path / "out", gpu_freqs=(614_000_000,)))
    assert report.setup_s is not None and 0 < report.setup_s < 60
    assert report.results[0]["settings"]["applied"]["gpu_hz"] == 614_400_000


def test_a_second_measure_never_overwrites_the_first(tmp_path, tiny):
    base = make_board(tmp_path, "tx1")
    out = tmp_path / "out"
    first = measure(Root(base), quick(out, profile="tx1-690mhz"))
    second = measure(Root(base), quick(out, profile="tx1-690mhz"))
    assert first.paths[0] != second.paths[0]
    assert first.paths[0].is_file() and second.paths[0].is_file()
    assert second.paths[0].name.endswith("-2.json")
    assert second.paths[0].with_suffix(".csv").is_file()
    for path in (first.paths[0], second.paths[0]):
        doc = load_result(path)
        assert doc["status"] == "ok"
        # each result names its own trace, not the first run's
        assert doc["power"]["trace_csv"] == path.with_suffix(".csv").name
