"""Issue 59, item 5: `jetbench daemon --meter SPEC`, the energy the user pays for. The daemon's
power, and so --tune's items per joule, comes from the meter named (a simulated SCPI meter on
a pty or a loopback socket, in this process), status and metrics say which, and a meter that
does not open stops the daemon before anything is pinned."""

from __future__ import annotations

import re
import signal
import socket
import time
import urllib.request

import pytest
from helpers.daemons import Daemon, board_state, start_sim_app

from conftest import bound_s, jetbench_env, make_board, run_cli, wait_until

SLOW_OK = "?timeout=5s"  # a loaded machine may answer *IDN? late
METER_W = 42.0  # the meter's constant reading: far from anything the simulated TX1 draws


@pytest.mark.parametrize("transport", ["pty", "tcp"])
def test_the_tuning_daemon_divides_by_the_meters_watts(tmp_path, started, transport):
    pytest.importorskip("prometheus_client")
    from jetbench.sim.meters import ScpiSim

    base = make_board(tmp_path, "tx1")
    before = board_state(base)
    app, url = start_sim_app(base, "--demand", "30", "--model", "sim:resnet18")
    try:
        with ScpiSim(METER_W, transport=transport) as meter:
            daemon = Daemon(tmp_path, base, "--meter", meter.spec + SLOW_OK, "--tune",
                            "--tune-knobs", "gpu", "--tune-window", "1s",
                            "--throughput-from", f"prometheus:{url}#sim_app_items",
                            "--metrics", "127.0.0.1:0", interval="0.5s")
            started.append(daemon)
            daemon.ready()
            assert wait_until(lambda: (daemon.ask("status").get("tune") or {}).get("last"),
                              timeout=60), daemon.output()
            doc = daemon.ask("status")
            last = doc["tune"]["last"]
            # the window's watts are the meter's (the board's own VDD_IN, ~5 W, is read by
            # nobody): its energy over its time, each stamped as read, within 1% on a busy host
            assert last["power_w"] == pytest.approx(METER_W, rel=0.01), last
            assert last["items_per_j"] == pytest.approx(last["items_per_s"] / METER_W,
                                                        rel=0.01)
            assert [r["name"] for r in doc["rails"]] == ["P"]
            assert doc["power_source"] == {"name": "P", "source": meter.spec,
                                           "point": "external", "scope": "wall",
                                           "basis": "measured"}
            text = urllib.request.urlopen(f"http://{doc['metrics']}/metrics",
                                          timeout=5).read().decode()
            from prometheus_client.parser import text_string_to_metric_families

            info = [(s.labels, s.value) for f in text_string_to_metric_families(text)
                    for s in f.samples if s.name == "jetbench_power_source_info"]
            assert info == [({"rail": "P", "source": meter.spec, "point": "external",
                              "scope": "wall", "basis": "measured"}, 1.0)], info
            shown = run_cli("status", "--socket", str(daemon.sock_path),
                            env=dict(jetbench_env(), COLUMNS="250"))
            assert shown.returncode == 0, shown.stderr
            assert re.search(r"power source\s+│ P \(scpi:.*external; wall, measured\)",
                             shown.stdout), shown.stdout
            assert daemon.stop() == 0
    finally:
        app.send_signal(signal.SIGTERM)
        app.wait(timeout=bound_s(20))
    assert board_state(base) == before


def _closed_port() -> int:
    with socket.socket() as s:  # a port nothing listens on (bound, then let go)
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("spec,says", [
    ("scpi:socket://127.0.0.1:PORT?timeout=1s", "cannot open the meter port"),
    ("calibrated", "no wall calibration"),
])
def test_a_meter_that_does_not_open_stops_the_daemon_before_any_pin(tmp_path, spec, says):
    spec = spec.replace("PORT", str(_closed_port()))
    base = make_board(tmp_path, "tx1")
    before = board_state(base)
    t0 = time.monotonic()
    done = run_cli("--root", str(base), "daemon", "--socket", str(tmp_path / "d.sock"),
                   "--profile", "maxperf", "--meter", spec, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"--meter {spec}" in done.stderr and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert "pinned profile" not in done.stderr  # nothing was pinned, nothing to put back
    assert board_state(base) == before
    assert time.monotonic() - t0 < bound_s(30)


@pytest.mark.parametrize("spec,says", [
    ("fluke:/dev/ttyUSB0", "unknown meter"),
    ("scpi:/dev/ttyUSB0?speed=9", "unknown option 'speed=9'"),
])
def test_a_bad_meter_spec_is_one_usage_error_before_anything(tmp_path, spec, says):
    base = make_board(tmp_path, "tx1")
    done = run_cli("--root", str(base), "daemon", "--socket", str(tmp_path / "d.sock"),
                   "--meter", spec)
    assert done.returncode == 1 and says in done.stderr, done.stderr
    assert not (tmp_path / "d.sock").exists()


def test_meter_calibrated_makes_the_wall_the_total_the_daemon_divides_by(tmp_path):
    """`--meter calibrated`: the total is the wall computed from the board's own total by its
    calibration (here wall = 2 W + 1.25 x VDD_IN, a hand-made one)."""
    import json
    import time as clock

    from jetbench.daemon.rails import RailMeter
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.run.calibration import CALIBRATION_PATH, SCHEMA, board_identity

    base = make_board(tmp_path, "orin-nano")
    root = Root(str(base))
    board = detect(root)
    cal = {"schema": SCHEMA, "simulated": True, "created_unix": clock.time(), "label": "hand",
           "board": board_identity(root, board), "meter": "none", "total": "VDD_IN",
           "range_w": [0.0, 100.0], "lag_s": 0.0,
           "model": {"kind": "affine", "coefficients": [2.0, 1.25]}, "residual": {}}
    path = root.path(CALIBRATION_PATH)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cal))
    errors: list = []
    meter = RailMeter([], errors.append)
    meter.open_for(root, board, None, ("calibrated",))
    watts = meter.total_power_w()
    rails = {r["name"]: r for r in meter.read()[0]}
    board_w = rails["VDD_IN"]["power_w"]  # the simulated rails hold between kernel passes
    assert watts == pytest.approx(2.0 + 1.25 * board_w), (watts, board_w, errors)
    assert meter.power_source == {"name": "wall", "source": "calibrated",
                                  "point": "calibrated", "scope": "wall",
                                  "basis": "calibrated"}
    assert meter.total_energy is not None  # the window's energy: the wall's counter
