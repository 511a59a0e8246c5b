"""Fleet energy counters: `jetbench_energy_joules_total{rail,point,source}` from a real daemon
process on a simulated board, scraped over HTTP; the integration's bookkeeping on its own; the
shipped Prometheus scrape config and Grafana dashboard checked against what the daemon exports."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Dict, Tuple

import pytest
from helpers.daemons import TUNE_METRICS, Daemon

from jetbench.ownership.client import open_lease
from jetbench.sampling.energy_totals import EnergyTotals

from conftest import REPO, make_board
from conftest import wait_until as _wait

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

DATA = REPO / "agent/jetbench/data"
# Orin Nano's module input (docs/hardware.md: 1-0040 channel 1 is VDD_IN), mainline hwmon layout.
VDD_IN = "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1"


def _scrape(url: str) -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _energy(metrics, rail: str) -> float:
    hits = [v for (name, labels), v in metrics.items()
            if name == "jetbench_energy_joules_total" and dict(labels).get("rail") == rail]
    assert len(hits) == 1, sorted(k for k in metrics if "energy" in k[0])
    return hits[0]


def _vdd_in_w(base: Path) -> float:
    """P = V x I from the rail's own files (bus mV, mA), as docs/hardware.md gives the hwmon
    layout."""
    mv = int((base / VDD_IN / "in1_input").read_text())
    ma = int((base / VDD_IN / "curr1_input").read_text())
    return mv * ma / 1e6


def _next_change(url: str, rail: str, after: float, timeout: float = 10.0) -> Tuple[float, float]:
    """Scrape until the counter moves past `after`: (its value, the monotonic time it moved)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = _energy(_scrape(url), rail)
        if value != after:
            return value, time.monotonic()
        time.sleep(0.01)
    raise AssertionError(f"{rail} energy stayed at {after} for {timeout} s")


def test_energy_counter_grows_at_the_rails_power(tmp_path, started):
    base = make_board(tmp_path, "orin-nano")
    d = Daemon(tmp_path, base, "--metrics", "127.0.0.1:0", interval="0.1s")
    started.append(d)
    d.ready()
    url = f"http://{d.ask('status')['metrics']}/metrics"
    first = _energy(_scrape(url), "VDD_IN")
    # Align both ends on a check (the counter moves once per interval): scrape until it moves.
    e0, t0 = _next_change(url, "VDD_IN", first)
    watts = []
    while time.monotonic() < t0 + 4.0:
        watts.append(_vdd_in_w(base))  # the rail as its files say, read by hand
        time.sleep(0.01)
    before = _energy(_scrape(url), "VDD_IN")
    e1, t1 = _next_change(url, "VDD_IN", before)
    rate_w = (e1 - e0) / (t1 - t0)
    mean_w = sum(watts) / len(watts)
    assert mean_w > 1.0  # a live module input, not an empty file
    assert abs(rate_w - mean_w) <= 0.05 * mean_w, (rate_w, mean_w, len(watts))
    labels = [dict(lb) for (name, lb) in _scrape(url) if name == "jetbench_energy_joules_total"]
    assert {"rail": "VDD_IN", "point": "module_input", "source": "ina3221",
            "scope": "module"} in labels
    assert d.stop() == 0, d.output()


def test_energy_counter_is_monotonic_across_repins_and_leases(tmp_path, started):
    base = make_board(tmp_path, "orin-nano")
    d = Daemon(tmp_path, base, "--profile", "maxperf", "--metrics", "127.0.0.1:0",
               interval="0.1s")
    started.append(d)
    d.ready()
    url = f"http://{d.ask('status')['metrics']}/metrics"
    seen = [_energy(_scrape(url), "VDD_IN")]

    def scrape_for(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            seen.append(_energy(_scrape(url), "VDD_IN"))
            time.sleep(0.03)

    scrape_for(0.5)
    # A drift the daemon re-pins.
    policy = base / "sys/devices/system/cpu/cpufreq/policy0"
    repins = d.ask("status")["counters"]["repins"]
    (policy / "scaling_governor").write_text("schedutil\n")
    assert _wait(lambda: d.ask("status")["counters"]["repins"] > repins)
    scrape_for(0.5)
    # A lease lent and handed back (the daemon restores and pins again).
    with open_lease(d.sock_path, "test"):
        assert _wait(lambda: d.ask("status")["lease"] is not None)
        scrape_for(0.5)
    assert _wait(lambda: d.ask("status")["lease"] is None)
    scrape_for(0.5)
    assert all(b >= a for a, b in zip(seen, seen[1:])), seen
    assert seen[-1] > seen[0] + 1.0  # > 2 s of a several-watt rail
    assert d.stop() == 0, d.output()


# -- the bookkeeping alone --------------------------------------------------------------------
def test_trapezoid_counter_deltas_and_gaps():
    totals = EnergyTotals()
    # 2 W then 4 W one second later: (2 + 4) / 2 x 1 s = 3 J.
    totals.add_power("p", 10.0, 2.0)
    totals.add_power("p", 11.0, 4.0)
    assert totals.joules("p") == pytest.approx(3.0)
    # A missing reading breaks the chain: nothing is invented across the gap.
    totals.add_power("p", 12.0, None)
    totals.add_power("p", 13.0, 4.0)
    assert totals.joules("p") == pytest.approx(3.0)
    totals.add_power("p", 13.5, 4.0)
    assert totals.joules("p") == pytest.approx(5.0)
    # A counter adds its own increments; going backwards (a wrap, a reset) adds nothing.
    totals.add_counter("c", 0.0, 100.0)
    totals.add_counter("c", 1.0, 107.5)
    totals.add_counter("c", 2.0, 3.0)
    totals.add_counter("c", 3.0, 5.0)
    assert totals.joules("c") == pytest.approx(9.5)
    # A stall longer than MAX_SEGMENT_S is not bridged.
    totals.add_power("s", 0.0, 10.0)
    totals.add_power("s", 1000.0, 10.0)
    assert totals.joules("s") == 0.0


# -- the shipped Prometheus and Grafana files --------------------------------------------------
_METRIC = re.compile(r"\bjetbench_[a-z_]+\b")


def _exported_names(metrics) -> set:
    return {name for name, _labels in metrics}


def test_dashboard_and_scrape_config_query_only_exported_metrics(tmp_path, started):
    dashboard = json.loads((DATA / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", ())]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    titles = {p["title"].lower() for p in dashboard["panels"]}
    for words in ("power", "energy", "clock", "throttl", "re-pin"):
        assert any(words in t for t in titles), (words, titles)
    queried = {m for e in exprs for m in _METRIC.findall(e)}
    scrape = (DATA / "prometheus.yml").read_text()
    assert "job_name: jetbench" in scrape and "9101" in scrape and "/metrics" in scrape
    # What a running daemon on a simulated board exports (pinned, so every family is there).
    base = make_board(tmp_path, "orin-nano")
    d = Daemon(tmp_path, base, "--profile", "maxperf", "--metrics", "127.0.0.1:0",
               interval="0.2s")
    started.append(d)
    d.ready()
    url = f"http://{d.ask('status')['metrics']}/metrics"
    exported = _exported_names(_scrape(url))
    # --tune's panels: exported only under --tune (test_daemon_tune.py checks those names)
    tuned = {m for m in queried if m.startswith("jetbench_tune_")}
    assert tuned <= TUNE_METRICS, sorted(tuned - TUNE_METRICS)
    tuned |= {"jetbench_items_total"} & queried  # the work counter: --tune's source only
    assert queried - tuned and queried - tuned <= exported, sorted(queried - tuned - exported)
    assert "jetbench_energy_joules_total" in queried
    assert d.stop() == 0, d.output()
