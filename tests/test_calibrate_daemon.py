"""The daemon's metrics with a wall calibration (issue 58): the energy counters carry their
scope, the calibrated wall has its own counter, and how power is measured is one info metric.
Read with prometheus_client's own parser, from a real daemon on a simulated board."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from helpers.daemons import Daemon

from conftest import make_board, run_cli

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

C0, C1 = 1.0, 1.25  # the hand-made calibration: wall_w = 1.0 + 1.25 * VDD_IN


def _calibration() -> dict:
    """By hand, for the simulated Orin Nano (its device tree names carrier p3768-0000 and module
    p3767-0005; its total is VDD_IN)."""
    return {"schema": "jetbench.calibration/1", "simulated": True,
            "created": "2026-11-28T00:00:00+00:00", "created_unix": time.time() - 3600,
            "label": "bench brick", "meter": "wt310:/dev/ttyUSB0", "total": "VDD_IN",
            "board": {"model": "NVIDIA Jetson Orin Nano Developer Kit", "family": "orin-nano",
                      "soc": "tegra234", "module": "p3767-0005", "carrier": "p3768-0000",
                      "total": "VDD_IN", "simulated": True},
            "range_w": [0.5, 100.0], "lag_s": 0.3,
            "model": {"kind": "affine", "coefficients": [C0, C1]},
            "residual": {"heldout_rms_pct": 0.2, "heldout_p95_pct": 0.4, "meter_pct": 0.2},
            "runs": []}


def _scrape(url: str):
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text)
            for s in f.samples]


def _energy(samples, rail: str) -> float:
    hits = [v for n, lb, v in samples if n == "jetbench_energy_joules_total"
            and lb.get("rail") == rail]
    assert len(hits) == 1
    return hits[0]


def test_the_daemon_counts_wall_energy_from_the_calibration(tmp_path, started):
    base = make_board(tmp_path, "orin-nano")
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(_calibration()))
    assert run_cli("--root", str(base), "calibrate", "--import", str(cal)).returncode == 0
    d = Daemon(tmp_path, base, "--metrics", "127.0.0.1:0", interval="0.1s")
    started.append(d)
    d.ready()
    url = f"http://{d.ask('status')['metrics']}/metrics"
    first = _scrape(url)
    labels = [lb for n, lb, _ in first if n == "jetbench_energy_joules_total"]
    assert {"rail": "VDD_IN", "point": "module_input", "source": "ina3221",
            "scope": "module"} in labels
    assert {"rail": "wall", "point": "calibrated", "source": "calibrated",
            "scope": "wall"} in labels
    info = [lb for n, lb, _ in first if n == "jetbench_measurement_info"]
    assert info == [{"sampling_hz": "10", "method": "sampled", "calibration": "bench brick"}]
    assert any(n == "jetbench_clock_frequency_hertz" and lb["domain"] == "gpu"
               for n, lb, _ in first)
    # wall energy = integral of (C0 + C1 * P) = C0 * seconds + C1 * VDD_IN's energy, over the
    # same checks (both counters move together, once per check)
    t0, a = time.monotonic(), _scrape(url)
    time.sleep(3.0)  # the span measured, not a wait for an event
    t1, b = time.monotonic(), _scrape(url)
    seconds = t1 - t0
    d_vdd = _energy(b, "VDD_IN") - _energy(a, "VDD_IN")
    d_wall = _energy(b, "wall") - _energy(a, "wall")
    assert d_vdd > 1.0
    # one check's worth (0.1 s) of slack at each end, and the scrapes' own time
    assert d_wall - C1 * d_vdd == pytest.approx(C0 * seconds, abs=0.5)
    assert d.stop() == 0, d.output()
