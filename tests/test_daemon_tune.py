"""Issue 40: `jetbench daemon --tune` against `jetbench sim app` on a simulated TX1: a
sim:resnet18 serving frames at 30/s, whose rate follows the board's clocks. The daemon reads
the app's Prometheus counter, searches the GPU clock for the most items per joule that still
keeps up (items_per_s>=27), holds it, shows it in status and metrics, and puts the board back
on SIGTERM. The app and the daemon are real processes; the rate comes over a real socket."""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.request
from typing import Optional

import pytest
from helpers.daemons import TUNE_METRICS, Daemon, board_state, start_sim_app

from conftest import bound_s, make_board, run_cli

pytest.importorskip("prometheus_client")

TX1_GPU = "sys/devices/57000000.gpu/devfreq/57000000.gpu"


def _metric(url: str, name: str) -> float:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    found = [float(v) for n, v in re.findall(r"^(\S+) (\S+)$", text, re.M) if n == name]
    assert found, (name, text[:2000])
    return found[0]


def _rate(url: str, seconds: float) -> float:
    first, t0 = _metric(url, "sim_app_items_total"), time.monotonic()
    time.sleep(seconds)
    return (_metric(url, "sim_app_items_total") - first) / (time.monotonic() - t0)


def test_sim_app_serves_at_the_speed_of_the_boards_clocks(tmp_path):
    base = make_board(tmp_path, "tx1")
    # no kernel runs: the GPU runs what its cur_freq says, the tree's 76.8 MHz, then what a
    # kernel would show once the GPU is at its top, 998.4 MHz
    app, url = start_sim_app(base, "--demand", "max", "--model", "sim:resnet18")
    try:
        slow = _rate(url, 1.0)
        (base / TX1_GPU / "cur_freq").write_text("998400000\n")
        time.sleep(0.2)
        fast = _rate(url, 1.0)
        assert _metric(url, "sim_app_demand_per_s") == 0.0
    finally:
        app.send_signal(signal.SIGTERM)
        assert app.wait(timeout=bound_s(20)) == 0
    # the latency model: 10.8 frames/s at 76.8 MHz, 64.7 at 998.4 MHz
    assert 8 <= slow <= 13 and 50 <= fast <= 75, (slow, fast)


def _holding(daemon: Daemon, seconds: float, since: int = 0,
             below_hz: Optional[int] = None) -> dict:
    """The status once the daemon holds a point after `since` windows (its `tune` object); with
    `below_hz`, a point whose GPU clock is under it."""
    deadline = time.monotonic() + bound_s(seconds)
    tune: dict = {}
    while time.monotonic() < deadline:
        tune = daemon.ask("status").get("tune") or {}
        if tune.get("phase") == "holding" and tune.get("windows", 0) >= since + 4 and (
                below_hz is None or tune["held"]["point_hz"]["gpu"] < below_hz):
            return tune
        time.sleep(0.5)
    raise AssertionError(f"not holding within {bound_s(seconds)} s: {tune} {daemon.output()}")


def _held_kept_up(daemon: Daemon, tune: dict) -> dict:
    """The status once the held point's windows were not busy throughout on average (--busy-from
    read): on a loaded host a window's sleeps overshoot and a held point's mean may touch 97%
    for a window or two, after which the governor looks up (BUSY_FULL); it must settle on a
    point that kept up."""
    deadline = time.monotonic() + bound_s(30)
    while not (tune.get("phase") == "holding" and
               0.1 < (tune["held"].get("busy_share") or 0) < 0.97) and \
            time.monotonic() < deadline:
        time.sleep(0.5)
        tune = daemon.ask("status").get("tune") or {}
    assert 0.1 < tune["held"]["busy_share"] < 0.97, (tune, daemon.output())
    return tune


@pytest.mark.long
def test_the_daemon_tunes_the_live_app_follows_its_demand_and_restores(tmp_path, started):
    base = make_board(tmp_path, "tx1")
    before = board_state(base)
    demand = tmp_path / "demand"
    demand.write_text("30\n")
    app, url = start_sim_app(base, "--demand-file", str(demand), "--model", "sim:resnet18")
    try:
        daemon = Daemon(tmp_path, base, "--tune", "--tune-knobs", "gpu", "--tune-window", "2s",
                        "--throughput-from", f"prometheus:{url}#sim_app_items",
                        "--latency-from", f"prometheus:{url}#sim_app_latency_seconds",
                        "--busy-from", f"prometheus:{url}#sim_app_busy_seconds",
                        "--constraint", "items_per_s>=27", "--metrics", "127.0.0.1:0",
                        interval="0.5s")
        started.append(daemon)
        daemon.ready()
        # (a probe of 0.8 s at 30 frames/s is 20% unsure until the windows' spread is learnt,
        # window_noise.py: the floor 10% under the demand may be shown met nowhere at first,
        # and the top is held until the demand read there over a few windows shows it)
        tune = _holding(daemon, 90, below_hz=998_400_000)
        held = tune["held"]["point_hz"]["gpu"]
        # 230 MHz serves 27.1 frames/s, 307 MHz 33.4 (the model): the lowest that keeps up
        # with 30/s is 307 MHz; noise on a loaded host may stop it a step higher, never lower
        assert 307_200_000 <= held < 998_400_000, (tune, daemon.output())
        assert tune["held"]["items_per_s"] >= 27
        # saved once a window at the held point is counted against the top's at this demand
        deadline = time.monotonic() + bound_s(30)
        while tune["energy_saved_j"] <= 0 and time.monotonic() < deadline:
            time.sleep(0.5)
            tune = daemon.ask("status")["tune"]
        assert tune["energy_saved_j"] > 0, tune
        assert "p99" in tune["latency_ms"]
        # the app's busy seconds read (--busy-from): the held point kept up, not busy throughout
        assert tune["busy_source"].endswith("#sim_app_busy_seconds"), tune
        tune = _held_kept_up(daemon, tune)
        # pinned there (between the short reads of other points a held point's windows are
        # most of the time: the look one step up, the walk beside it, a close call's rival)
        deadline = time.monotonic() + bound_s(30)
        pinned = int((base / TX1_GPU / "max_freq").read_text())
        while pinned != daemon.ask("status")["tune"]["held"]["point_hz"]["gpu"] and \
                time.monotonic() < deadline:
            time.sleep(0.2)
            pinned = int((base / TX1_GPU / "max_freq").read_text())
        assert pinned == daemon.ask("status")["tune"]["held"]["point_hz"]["gpu"], (pinned, held)
        doc = daemon.ask("status")
        status = run_cli("status", "--socket", str(daemon.sock_path))
        assert status.returncode == 0 and "tune held" in status.stdout, status.stdout
        wide = run_cli("status", "--socket", str(daemon.sock_path),
                       env={**os.environ, "COLUMNS": "300"}).stdout
        assert "busy from prometheus:" in wide and ", busy " in wide, wide
        text = urllib.request.urlopen(f"http://{doc['metrics']}/metrics", timeout=5).read()
        text = text.decode()
        assert 'jetbench_tune_phase{phase="holding"} 1.0' in text
        exported = set(re.findall(r"^(jetbench_tune_[a-z_]+)", text, re.M))
        assert TUNE_METRICS <= exported, sorted(TUNE_METRICS - exported)
        # the work counter (issue 58): items/J over any window is rate(items) / rate(joules)
        from prometheus_client.parser import text_string_to_metric_families

        items = [s for f in text_string_to_metric_families(text) for s in f.samples
                 if s.name == "jetbench_items_total"]
        assert [s.labels for s in items] == [{"unit": "items"}]
        assert items[0].value >= 27  # at least a second's frames at the held point
        # more frames: the held point serves what it can (above the constraint), and the look
        # one step up finds more served, and more per joule: searched again, held where more
        # than 33.4 frames/s are served (384 MHz, 38.9, or higher; a point held a step high
        # at 30/s may be held again: 460.8 MHz serves 43.6, as efficient as any at 45/s)
        demand.write_text("45\n")
        windows = tune["windows"]
        deadline = time.monotonic() + bound_s(120)
        phases = set()
        while time.monotonic() < deadline:
            tune = daemon.ask("status")["tune"]
            phases.add(tune["phase"])
            if "re-tuning" in phases and tune["phase"] == "holding":
                break
            time.sleep(0.5)
        assert "re-tuning" in phases and tune["phase"] == "holding", (tune, daemon.output())
        assert tune["held"]["point_hz"]["gpu"] >= 384_000_000 and tune["windows"] > windows, \
            (held, tune, daemon.output())
        last = tune["held"]["point_hz"]
        assert daemon.stop() == 0
        # restarted (issue 61, 5): it starts from the point it held, not from the top again
        again = Daemon(tmp_path, base, "--tune", "--tune-knobs", "gpu", "--tune-window", "2s",
                       "--throughput-from", f"prometheus:{url}#sim_app_items",
                       "--latency-from", f"prometheus:{url}#sim_app_latency_seconds",
                       "--constraint", "items_per_s>=27", interval="0.5s", name="again")
        started.append(again)
        again.ready()
        resumed = again.ask("status")["tune"]
        assert resumed["resumed_from_hz"] == last, resumed
        assert "held before the restart" in again.output()
        assert again.stop() == 0
    finally:
        app.send_signal(signal.SIGTERM)
        app.wait(timeout=bound_s(20))
    assert board_state(base) == before  # the clocks put back (and the app's load file idle)


@pytest.mark.long
def test_under_a_p99_ceiling_with_the_busy_share_read_it_holds_a_point_that_meets_it(
        tmp_path, started):
    # issue 59: --busy-from beside a tail constraint (refused until the governor stopped
    # exploring past the load a tail allows, bench_governor_tail.py --busy). The app's frames
    # arrive evenly: under its capacity a frame waits for nothing, over it the queue fills
    # (up to a second of frames): a point that does not keep up breaks the ceiling
    base = make_board(tmp_path, "tx1")
    before = board_state(base)
    app, url = start_sim_app(base, "--demand", "30", "--model", "sim:resnet18")
    try:
        daemon = Daemon(tmp_path, base, "--tune", "--tune-knobs", "gpu", "--tune-window", "2s",
                        "--throughput-from", f"prometheus:{url}#sim_app_items",
                        "--latency-from", f"prometheus:{url}#sim_app_latency_seconds",
                        "--busy-from", f"prometheus:{url}#sim_app_busy_seconds",
                        "--constraint", "latency_p99_ms<=100", interval="0.5s")
        started.append(daemon)
        daemon.ready()
        tune = _holding(daemon, 90, below_hz=998_400_000)
        held = tune["held"]
        # 307 MHz serves 33.4 frames/s (30 ms a frame), 230 MHz 27.1: under 307 the queue
        # fills; the load allowed (0.6 at first, tail_judge.py) keeps it higher at first
        assert held["point_hz"]["gpu"] >= 307_200_000, (tune, daemon.output())
        tune = _held_kept_up(daemon, tune)
        assert tune["held"]["point_hz"]["gpu"] >= 307_200_000, (tune, daemon.output())
        deadline = time.monotonic() + bound_s(30)  # (the last window: the held point's)
        while tune["last"]["point_hz"] != tune["held"]["point_hz"] and \
                time.monotonic() < deadline:
            time.sleep(0.3)
            tune = daemon.ask("status")["tune"]
        assert tune["last"]["point_hz"] == tune["held"]["point_hz"], (tune, daemon.output())
        assert tune["latency_ms"]["p99"] <= 100, (tune, daemon.output())
        assert "latency_p99_ms" in tune["tail_margin"], tune
        assert tune["busy_source"].endswith("#sim_app_busy_seconds"), tune
        assert daemon.stop() == 0
    finally:
        app.send_signal(signal.SIGTERM)
        app.wait(timeout=bound_s(20))
    assert board_state(base) == before


def test_tune_refuses_to_start_without_a_reachable_source(tmp_path):
    base = make_board(tmp_path, "tx1")
    before = board_state(base)
    done = run_cli("--root", str(base), "daemon", "--socket", str(tmp_path / "d.sock"),
                   "--tune", "--throughput-from", "prometheus:http://127.0.0.1:9/metrics#x",
                   timeout=60)
    assert done.returncode == 2, done.stderr
    assert "--tune" in done.stderr and "did not answer" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert board_state(base) == before


@pytest.mark.parametrize("args,says", [
    (("--tune",), "--tune needs --throughput-from"),
    (("--throughput-from", "prometheus:http://h/m#x"), "is for --tune only"),
    (("--tune", "--throughput-from", "http://h/m"), "expected prometheus:URL#METRIC"),
    (("--tune", "--throughput-from", "prometheus:http://h/m#x", "--constraint", "foo>=3"),
     "unknown constraint name 'foo'"),
    (("--tune", "--throughput-from", "prometheus:http://h/m#x", "--constraint", "fps>3"),
     "operator '>'"),
    (("--tune", "--throughput-from", "prometheus:http://h/m#x", "--constraint",
      "latency_p99_ms<=40"), "needs --latency-from"),
    (("--tune", "--throughput-from", "prometheus:http://h/m#x", "--latency-from",
      "prometheus:http://h/m#l", "--constraint", "miss_rate<=0.02"), "needs --deadline"),
    (("--tune", "--throughput-from", "prometheus:http://h/m#x", "--constraint",
      "miss_rate>=0.02"), "miss_rate<=SHARE"),
    (("--tune", "--throughput-from", "prometheus:http://h/m#x", "--deadline", "50ms"),
     "give --latency-from too"),
    (("--deadline", "50ms"), "--deadline is for --tune only"),
    (("--tune", "--throughput-from", "prometheus:http://h/m#x", "--tune-knobs", "fan"),
     "--tune-knobs"),
    (("--tune", "--throughput-from", "log:/x.log#regex:([0-9]+)", "--latency-from",
      "prometheus:http://h/m#x"), "not yet beside a log"),
    (("--tune", "--throughput-from", "log:/x.log#regex:([0-9]+)", "--busy-from",
      "prometheus:http://h/m#b_seconds"), "--busy-from is read only beside a prometheus"),
    (("--busy-from", "prometheus:http://h/m#b_seconds"), "--busy-from is for --tune only"),
    (("--tune", "--throughput-from", "prometheus:http://h/m#x", "--busy-from", "h/m#b"),
     "--busy-from 'h/m#b': expected prometheus:URL#METRIC"),
    (("--tune", "--throughput-from", "log:/x.log#regex:no group"), "exactly one group"),
    (("--tune", "--throughput-from", "log:/x.log#regex:([0-9]+)", "--tune-silence", "0s"),
     "--tune-silence 0s: at least one window"),
    (("--tune-silence", "30s"), "--tune-silence is for --tune only"),
])
def test_bad_tune_options_are_one_message_before_anything(tmp_path, args, says):
    base = make_board(tmp_path, "tx1")
    done = run_cli("--root", str(base), "daemon", "--socket", str(tmp_path / "d.sock"), *args)
    assert done.returncode == 1 and says in done.stderr, done.stderr
    assert not (tmp_path / "d.sock").exists()


def test_the_demand_schedule_and_file_are_read_or_refused(tmp_path):
    from jetbench.errors import UsageError
    from jetbench.workload.sim_app import DemandStep, parse_demand, read_demand_file

    assert parse_demand("30,60@20,max@40") == (DemandStep(0, 30.0), DemandStep(20, 60.0),
                                               DemandStep(40, None))
    for bad in ("0", "30,60@0", "30@5", "fast", "30,60@20,20@10"):
        with pytest.raises(UsageError):
            parse_demand(bad)
    path = tmp_path / "demand"
    assert read_demand_file(path) == (False, None)
    for text, want in (("45\n", (True, 45.0)), ("max", (True, None)), ("-3", (False, None)),
                       ("x", (False, None))):
        path.write_text(text)
        assert read_demand_file(path) == want
    done = run_cli("sim", "app", str(tmp_path), "--port", "0")
    assert done.returncode == 1 and "not a simulated board" in done.stderr
