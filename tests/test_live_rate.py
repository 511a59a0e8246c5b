"""Issue 40: the live workload's rate as `daemon --tune` reads it (daemon/live_rate.py) and its
windows (daemon/live_tuning.py): Prometheus text as Triton, vLLM and prometheus-client write
it, a counter summed over its series, histogram quantiles as histogram_quantile() gives them,
a counter reset, a source that stops answering, a window that lets the workload settle."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import pytest

from jetbench.daemon.live_rate import (
    LiveRate,
    Reading,
    Selector,
    buckets,
    counter_value,
    ms_per_unit,
    parse_exposition,
    parse_source,
    quantile,
    window,
)
from jetbench.daemon.live_tuning import LiveTuning, TuneConfig
from jetbench.daemon.online_tuner import EXPLORING, FROZEN, Decision, Space
from jetbench.errors import HardwareError, UsageError
from jetbench.run.constraint import Constraint

TRITON = """# HELP nv_inference_count Number of inferences performed
# TYPE nv_inference_count counter
nv_inference_count{model="resnet50",version="1"} 1200
nv_inference_count{model="yolo",version="2"} 300
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="llama"} 5.5e3
sim_app_items_total 42.0
sim_app_items_created 1.79e9
lat_seconds_bucket{le="0.01"} 10
lat_seconds_bucket{le="0.02"} 30
lat_seconds_bucket{le="0.05"} 40
lat_seconds_bucket{le="+Inf"} 40
garbage line without a value
"""


def test_the_source_is_parsed_or_refused_with_one_message():
    src = parse_source('prometheus:http://127.0.0.1:8002/metrics#nv_inference_count'
                       '{model="yolo"}')
    assert src.url == "http://127.0.0.1:8002/metrics"
    assert src.selector == Selector("nv_inference_count", (("model", "yolo"),))
    assert parse_source(src.text()) == src
    for bad in ("http://h/m#x", "prometheus:http://h/m", "prometheus:file:///etc#x",
                "prometheus:http://h/m#1bad", 'prometheus:http://h/m#x{a=b}'):
        with pytest.raises(UsageError):
            parse_source(bad)


def test_counters_sum_their_series_and_find_the_total_suffix():
    series = parse_exposition(TRITON, ["nv_inference_count", "vllm:generation_tokens_total",
                                       "sim_app_items_total", "absent"])
    assert counter_value(series, Selector("nv_inference_count")) == 1500
    assert counter_value(series, Selector("nv_inference_count", (("model", "yolo"),))) == 300
    assert counter_value(series, Selector("vllm:generation_tokens_total")) == 5500
    assert counter_value(series, Selector("sim_app_items")) == 42  # prometheus-client's _total
    assert counter_value(series, Selector("absent")) is None


def test_quantiles_interpolate_inside_their_bucket_as_prometheus_does():
    got = buckets(parse_exposition(TRITON, ["lat_seconds_bucket"]), Selector("lat_seconds"))
    assert got == {0.01: 10, 0.02: 30, 0.05: 40, float("inf"): 40}
    assert quantile(0.5, got) == pytest.approx(0.015)  # rank 20 of 40: half-way in (0.01, 0.02]
    assert quantile(0.99, got) == pytest.approx(0.02 + 0.03 * (39.6 - 30) / 10)
    assert quantile(0.5, {1.0: 0, float("inf"): 0}) is None
    assert quantile(0.99, {0.1: 1, float("inf"): 100}) == 0.1  # in +Inf: the largest bound
    assert ms_per_unit("vllm:e2e_request_latency_seconds") == 1000.0
    assert ms_per_unit("nv_inference_first_response_histogram_ms") == 1.0
    assert ms_per_unit("x_us") == 0.001


def test_a_window_is_the_increase_and_a_reset_is_no_window():
    a = Reading(10.0, 100.0, {0.01: 0, 0.1: 5, float("inf"): 5})
    b = Reading(12.0, 160.0, {0.01: 30, 0.1: 60, float("inf"): 60})
    w = window(a, b)
    # 55 new: rank 27.5 falls in (0, 10 ms] where 30 are: 27.5/30 of the way
    assert w.items_per_s == 30.0 and w.latency_ms["p50"] == pytest.approx(10.0 * 27.5 / 30)
    assert window(b, Reading(13.0, 5.0)) is None  # the workload restarted
    assert window(a, Reading(10.0, 100.0)) is None


def test_the_share_over_a_deadline_is_read_from_the_buckets_as_quantiles_are():
    from jetbench.daemon.live_rate import share_over

    got = {0.01: 10, 0.02: 30, 0.05: 40, float("inf"): 40}
    assert share_over(0.02, got) == pytest.approx(10 / 40)  # 30 of 40 at or under 20 ms
    assert share_over(0.015, got) == pytest.approx(1 - 20 / 40)  # half-way in (10, 20]
    assert share_over(0.1, got) == 0.0
    assert share_over(0.1, {0.05: 30, float("inf"): 40}) == pytest.approx(10 / 40)  # +Inf: over
    assert share_over(0.01, {0.01: 0, float("inf"): 0}) is None
    a = Reading(10.0, 100.0, {0.01: 0, 0.1: 5, float("inf"): 5})
    b = Reading(12.0, 160.0, {0.01: 30, 0.1: 60, float("inf"): 60})
    w = window(a, b, deadline_ms=10.0)  # 55 new: 30 by 10 ms, 25 over
    assert w is not None and w.miss_rate == pytest.approx(25 / 55)
    assert window(a, b).miss_rate is None  # no deadline, no share


def test_the_busy_share_is_the_busy_counters_increase_over_the_window(tmp_path):
    """--busy-from: a counter of seconds spent serving, in its name's unit, read with the items
    from one page (or another); a share over BUSY_MAX is no one server's and is not used."""
    from prometheus_client import CollectorRegistry, Counter, start_http_server

    from jetbench.daemon.live_window import busy_used, window_figures
    from jetbench.daemon.window_noise import NoisePool

    registry = CollectorRegistry()
    items = Counter("app_items", "served", registry=registry)
    busy_us = Counter("app_compute_duration_us", "busy", registry=registry)
    server, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        source = LiveRate(parse_source(f"prometheus:{url}#app_items"),
                          busy=parse_source(f"prometheus:{url}#app_compute_duration_us"))
        items.inc(40)
        busy_us.inc(2_500_000)
        reading = source.read()
        assert reading.count == 40 and reading.busy_s == pytest.approx(2.5)
        with pytest.raises(HardwareError, match="app_absent_seconds is not on"):
            LiveRate(parse_source(f"prometheus:{url}#app_items"),
                     busy=parse_source(f"prometheus:{url}#app_absent_seconds")).read()
    finally:
        server.shutdown()
    a, b = Reading(0.0, 0.0, busy_s=1.0), Reading(10.0, 100.0, busy_s=7.0)
    assert window(a, b).busy_share == pytest.approx(0.6)
    assert window(a, Reading(10.0, 100.0, busy_s=0.5)).busy_share is None  # counter reset
    assert window(a, Reading(10.0, 100.0)).busy_share is None  # not read

    def figures(busy_s: float, rate: float = 10.0):
        readings = [Reading(t, rate * t, busy_s=busy_s * t / 10) for t in range(11)]
        return busy_used(window_figures(readings, [5.0] * 11, [], NoisePool()), rate * 10)
    assert figures(6.0)[0].busy_share == pytest.approx(0.6) and figures(6.0)[1] is None
    assert figures(6.0)[0].capacity_per_s == pytest.approx(10 / 0.6)
    assert figures(10.3)[0].busy_share == 1.0  # a scrape's timing: at most all of it
    taken, why = figures(13.0)  # 1.3 of the window: not one server's time
    assert taken.busy_share is None and "rose 1.30 s a second" in why
    assert figures(0.2)[0].capacity_per_s is None  # too little served to say
    # An item's time is added when it ends: the one that ended just after the window's first
    # reading is counted whole. Over 8 items that is 1/8 of the window; over 100, 1/100.
    assert figures(10.9, rate=0.8) == (figures(10.9, rate=0.8)[0], None)
    assert figures(10.9, rate=0.8)[0].busy_share == 1.0
    assert figures(10.9, rate=10.0)[0].busy_share is None
    assert figures(20.0, rate=0.8)[0].busy_share is None  # two servers' time, however few


def test_an_unreachable_endpoint_is_one_hardware_error():
    source = LiveRate(parse_source("prometheus:http://127.0.0.1:9/metrics#x"), timeout_s=1)
    with pytest.raises(HardwareError, match="did not answer"):
        source.read()


class FakeSource:
    """A counter at `rate` per second of the fake clock; `fail` makes reads fail."""

    def __init__(self, clock: List[float], rate: float):
        self.clock, self.rate, self.fail = clock, rate, False

    def read(self) -> Reading:
        if self.fail:
            raise HardwareError("the metrics endpoint http://x did not answer (refused)")
        return Reading(self.clock[0], self.rate * self.clock[0])


def _tuning(rate: float = 30.0, power: Optional[float] = 5.0, lent: Optional[list] = None):
    clock = [0.0]
    source = FakeSource(clock, rate)
    pins: List[dict] = []
    lent = lent if lent is not None else []
    space = Space(("gpu",), ((100_000_000, 200_000_000, 300_000_000, 400_000_000),))
    config = TuneConfig(rate=parse_source("prometheus:http://x/m#c"),
                        limits=(Constraint("items_per_s", ">=", 20.0),), knobs=("gpu",),
                        window_s=2.0)
    tuning = LiveTuning(config, source, space, lambda: power, pins.append,
                        paused=lambda: lent[0] if lent else None, clock=lambda: clock[0])
    return tuning, clock, source, pins


def _advance(tuning, clock, seconds: float) -> None:
    end = clock[0] + seconds
    while clock[0] < end:
        clock[0] = max(clock[0] + 1e-6, min(tuning.tick(), end))


def test_the_first_window_settles_then_windows_are_judged_and_points_pinned():
    tuning, clock, source, pins = _tuning()
    tuning.begin({"gpu": 400_000_000})
    assert pins == [{"gpu": 400_000_000}]  # the starting point, pinned (journalled) first
    _advance(tuning, clock, 2.5)  # settle + the settling window: nothing judged
    assert tuning.tuner.windows == 0
    _advance(tuning, clock, 2.5)
    assert tuning.tuner.windows == 1 and len(pins) == 2  # judged: a step down pinned
    doc = tuning.doc()
    assert doc["last"]["items_per_s"] == pytest.approx(30.0)
    assert doc["last"]["items_per_j"] == pytest.approx(6.0)


def test_a_silent_source_freezes_and_the_daemon_goes_on():
    tuning, clock, source, pins = _tuning()
    tuning.begin({"gpu": 400_000_000})
    _advance(tuning, clock, 5.0)
    source.fail = True
    _advance(tuning, clock, 3.0)
    doc = tuning.doc()
    assert doc["phase"] == FROZEN and "did not answer" in doc["why"]
    source.fail = False
    _advance(tuning, clock, 12.0)
    assert tuning.doc()["phase"] != FROZEN


def test_a_lent_board_pauses_the_search_and_is_pinned_again_when_it_comes_back():
    lent: List[str] = []
    tuning, clock, source, pins = _tuning(lent=lent)
    tuning.begin({"gpu": 400_000_000})
    _advance(tuning, clock, 5.0)
    windows, pinned = tuning.tuner.windows, len(pins)
    lent.append("lent to jetbench measure")
    _advance(tuning, clock, 20.0)  # a borrower's clocks are not the search's to judge
    assert tuning.tuner.windows == windows and len(pins) == pinned
    assert tuning.doc()["paused"] == "lent to jetbench measure"
    lent.clear()
    _advance(tuning, clock, 0.5)
    assert len(pins) == pinned + 1 and tuning.doc()["paused"] is None  # its point, again


def test_a_window_that_clearly_breaks_a_constraint_ends_early():
    """Even the first, settling one: judged by 0.6 s of its 2 s (a drained backlog can only
    flatter a point, so one that misses while settling misses). Not at the top: a rate floor
    does not end a read of the demand (stopped where it looks low, it reads low on average)."""
    tuning, clock, source, pins = _tuning(rate=10.0)  # half the 20/s asked, at every point
    tuning.begin({"gpu": 200_000_000})
    _advance(tuning, clock, 1.0)  # 0.2 s settle, then 0.6 s and a sample of the window
    assert tuning.tuner.windows == 1 and "ended early" in tuning.doc()["why"]
    assert pins[-1] == {"gpu": 400_000_000}  # the demand read next, at the top
    top, top_clock, _source, _pins = _tuning(rate=10.0)
    top.begin({"gpu": 400_000_000})
    _advance(top, top_clock, 1.0)
    assert top.tuner.windows == 0  # at the top: the settling window runs whole, unjudged
    while top.tuner.windows == 0 and top_clock[0] < 10.0:
        _advance(top, top_clock, 0.1)
    assert top.tuner.windows == 1 and "ended early" not in top.doc()["why"]  # and the next
    tuning2, clock2, _source, _pins = _tuning(rate=30.0)  # meets it: the settle is waited out
    tuning2.begin({"gpu": 400_000_000})
    _advance(tuning2, clock2, 2.1)
    assert tuning2.tuner.windows == 0


class Steps:
    """A controller that keeps each point for `stay` windows, then one step down; it notes
    each judged window's first and last reading times."""

    phase, held, held_window, windows = EXPLORING, None, None, 0

    def __init__(self, tuning: LiveTuning, stay: int):
        self.tuning, self.stay, self.spans = tuning, stay, []

    def start(self, point):
        return Decision(point, EXPLORING, "starting")

    def judged(self):
        return ()

    def observe(self, point, window, failure=None):
        readings = self.tuning._readings
        self.spans.append((point, readings[0].t_s, readings[-1].t_s))
        self.windows += 1
        if self.windows % self.stay == 0:
            point = (max(0, point[0] - 1),)
        return Decision(point, EXPLORING, "step")


def test_windows_at_one_point_follow_on_and_a_pin_waits_its_settle_and_asks_for_a_read():
    # the live run's probes: 4 s windows took 6 s (1 s settle, up to a poller period before
    # the first reading); a window at the point held on needs neither
    tuning, clock, source, pins = _tuning()
    asked: List[float] = []
    source.read_at = asked.append  # as PolledSource: its next read when the window opens
    steps = tuning.tuner = Steps(tuning, stay=2)  # type: ignore[assignment]
    tuning.begin({"gpu": 400_000_000})
    _advance(tuning, clock, 7.0)
    spans = steps.spans
    assert [p for p, _, _ in spans[:3]] == [(3,), (3,), (2,)] and len(pins) == 2
    settle = 0.1 * tuning.config.window_s  # a tenth of the 2 s window
    assert spans[0][1] == pytest.approx(settle) and asked[0] == pytest.approx(settle)
    assert spans[1][1] == spans[0][2]  # the same point: from the last window's last reading
    assert spans[2][1] >= spans[1][2] + settle  # pinned: after the settle ...
    assert asked[1] == pytest.approx(spans[1][2] + settle, abs=0.02) == spans[2][1]
    assert len(asked) == 2  # ... which asked for it (the held point's windows did not)
    for _, first, last in spans:
        assert last - first == pytest.approx(2.0, abs=0.3)


def test_a_log_source_integrates_the_rates_its_lines_say(tmp_path):
    from jetbench.daemon.live_log import LogRate, parse_log_source

    log = tmp_path / "ds.log"
    log.write_text("**PERF:  99.0 (99.0)\n")  # before the daemon: not counted
    clock = [100.0]
    pattern = r"\*\*PERF:\s+([0-9.]+)"
    rate = LogRate(parse_log_source(f"log:{log}#regex:{pattern}"), clock=lambda: clock[0])
    rate.check()
    with pytest.raises(HardwareError, match="has matched"):
        rate.read()  # nothing new yet
    with log.open("a") as f:
        f.write("**PERF:  30.0 (29.9)\n**PERF:  ")
    first = rate.read()
    clock[0] = 102.0
    with log.open("a") as f:
        f.write("20.0 (25.0)\nother line\n")  # the half line, finished
    mid = rate.read()
    clock[0] = 104.0
    last = rate.read()
    assert window(first, mid).items_per_s == pytest.approx(30.0)
    assert window(mid, last).items_per_s == pytest.approx(20.0)
    log.rename(tmp_path / "ds.log.1")  # rotated: the new file is read from its start
    log.write_text("**PERF:  10.0 (10.0)\n")
    clock[0] = 106.0
    rotated = rate.read()
    clock[0] = 108.0
    assert window(rotated, rate.read()).items_per_s == pytest.approx(10.0)
    rate.close()


@pytest.mark.parametrize("text", ["log:/x.log", "log:#regex:(1)", "log:/x#regex:no group",
                                  "log:/x#regex:(a)(b)", "log:/x#regex:(\\1)"])
def test_a_bad_log_source_is_one_usage_error(text):
    from jetbench.daemon.live_log import parse_log_source

    with pytest.raises(UsageError):
        parse_log_source(text)


def test_a_journal_source_follows_the_units_new_lines(tmp_path, monkeypatch):
    """A systemd unit's journal, through a stand-in journalctl on PATH."""
    import stat
    import sys
    import time

    from jetbench.daemon.live_log import JournalRate, parse_log_source

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = Path(__file__).parent / "fake_commands" / "fake_journalctl.py"
    exe = bin_dir / "journalctl"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {fake} \"$@\"\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    rate_file = tmp_path / "rate"
    rate_file.write_text("25.0")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_JOURNAL_RATE", str(rate_file))
    source = parse_log_source(r"journal:deepstream.service#regex:\*\*PERF:\s+([0-9.]+)")
    clock = [0.0]
    rate = JournalRate(source, clock=lambda: clock[0])
    rate.check()
    try:
        deadline = time.monotonic() + 30
        first = None
        while first is None and time.monotonic() < deadline:
            try:
                first = rate.read()
            except HardwareError:  # no line yet
                time.sleep(0.05)
        clock[0] = 4.0
        assert window(first, rate.read()).items_per_s == pytest.approx(25.0)
    finally:
        rate.close()
    args = (tmp_path / "rate.args").read_text().split()
    assert args[:2] == ["--unit", "deepstream.service"] and "--follow" in args


def test_a_reload_pins_the_point_again_and_begins_a_new_window():
    tuning, clock, source, pins = _tuning()
    tuning.begin({"gpu": 400_000_000})
    _advance(tuning, clock, 5.0)
    point, pinned = dict(pins[-1]), len(pins)
    tuning.repin()  # SIGHUP pinned the profile over it
    assert len(pins) == pinned + 1 and pins[-1] == point
    assert tuning._readings == []


def test_a_windows_power_is_its_own_energy_over_its_own_time():
    """Issue 60, 3: an NVML energy counter read by anyone (the drift check, `readings`)
    gives "watts since the previous reading by anyone": cut intervals whose plain mean is noisy
    (a stand-in at 300 W: -10%/+5%, worst +143%). The window's power is now the total's
    energy at its first and last sample over their time: 300 W exactly, whatever the cut
    intervals' watts were."""
    clock = [0.0]
    source = FakeSource(clock, 30.0)
    space = Space(("gpu",), ((100_000_000, 200_000_000),))
    config = TuneConfig(rate=parse_source("prometheus:http://x/m#c"), knobs=("gpu",),
                        window_s=2.0)
    cut = iter([30.0, 900.0, 120.0, 700.0, 310.0] * 100)  # what interleaved reads would give
    tuning = LiveTuning(config, source, space, lambda: next(cut), lambda hz: None,
                        clock=lambda: clock[0],
                        read_energy=lambda: (clock[0], 300.0 * clock[0]))
    tuning.begin({"gpu": 200_000_000})
    _advance(tuning, clock, 5.0)  # the settling window, then one judged
    assert tuning.tuner.windows == 1
    # 30 items/s at 300 W: 0.1 items/J
    assert tuning.doc()["last"]["items_per_j"] == pytest.approx(0.1)


def test_the_daemons_default_knobs_are_those_the_board_has(tmp_path):
    """Issue 60, 3: `daemon --tune` on a PC (an NVIDIA GPU, no EMC control) started with
    gpu,emc and refused, naming tune's --knobs; by default it now takes the board's clocks."""
    from types import SimpleNamespace

    from jetbench.daemon.live_space import knobs_for

    pc = SimpleNamespace(gpu=None, nvml_gpus=(object(),), emc=None)
    jetson = SimpleNamespace(gpu=object(), nvml_gpus=(), emc=object())
    assert knobs_for(pc) == ("gpu",)
    assert knobs_for(jetson) == ("gpu", "emc")


def test_a_new_held_point_is_handed_on_to_be_remembered(tmp_path):
    """Issue 61, 5: each new held point goes to `on_held` (the daemon keeps it in its state
    directory, ownership/tune_memory.py), and is recalled for the same tuning only."""
    from jetbench.hw.fs import Root
    from jetbench.ownership.tune_memory import recall, remember

    clock = [0.0]
    source = FakeSource(clock, 30.0)
    space = Space(("gpu",), ((100_000_000, 200_000_000, 300_000_000, 400_000_000),))
    config = TuneConfig(rate=parse_source("prometheus:http://x/m#c"),
                        limits=(Constraint("items_per_s", ">=", 20.0),), knobs=("gpu",),
                        window_s=2.0)
    held = []
    tuning = LiveTuning(config, source, space, lambda: 5.0, lambda hz: None,
                        clock=lambda: clock[0], on_held=lambda hz, w: held.append(hz))
    tuning.begin({"gpu": 400_000_000})
    _advance(tuning, clock, 60.0)
    assert held and held[-1] == space.hz(tuning.tuner.held), held
    root = Root(tmp_path)
    (tmp_path / "var/lib/jetbench").mkdir(parents=True)
    assert remember(root, "tx1 | x", held[-1], {"items_per_j": 6.0})
    assert recall(root, "tx1 | x") == held[-1]
    assert recall(root, "another tuning") is None
    (tmp_path / "var/lib/jetbench/tune-held.json").write_text("{not json")
    assert recall(root, "tx1 | x") is None
