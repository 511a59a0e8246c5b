"""The daemon's judgement on trees whose kernel does not behave like the simple simulation
(issue 10): throttling only with evidence, drift re-pinned in every state, nothing judged before
the clocks settle, counter-measured CPU clocks not taken for throttling."""

import subprocess
import sys
import time

from helpers.daemons import Daemon

from jetbench.sim.create import create_board

from conftest import wait_until as _wait

NANO_GPU = "sys/devices/57000000.gpu/devfreq/57000000.gpu"


def test_static_tree_no_throttling_claimed_and_drift_repinned(tmp_path, started):
    base = tmp_path / "nano"
    create_board("nano", base, quirks=("static-cur",))
    d = Daemon(tmp_path, base, "--profile", "maxperf", interval="0.3s")
    started.append(d)
    ready = d.ready()
    assert "throttling" not in ready  # the first judgement waits for the clocks to settle
    gpu = base / NANO_GPU
    pinned = (gpu / "max_freq").read_text()
    assert (gpu / "cur_freq").read_text() == "76800000\n"  # the quirk: it never follows
    # Something else lowers the knobs: re-pinned within one interval, though the clock is low.
    (gpu / "min_freq").write_text("76800000\n")
    (gpu / "max_freq").write_text("76800000\n")
    t0 = time.monotonic()
    assert _wait(lambda: (gpu / "max_freq").read_text() == pinned
                 and (gpu / "min_freq").read_text() == pinned)
    assert time.monotonic() - t0 <= 0.3 + 0.5  # one interval, and scheduling slack
    # After the settling grace: the low clock is reported as exactly that, never throttling.
    assert _wait(lambda: d.ask("status")["below_pin"])
    status = d.ask("status")
    assert status["throttling"] is False and status["throttle_reasons"] == []
    assert status["below_pin"][0].startswith("gpu 57000000.gpu below its pin (76.8 MHz")
    assert status["below_pin"][0].endswith("cause unknown")
    assert "(gpu below its pin, cause unknown)" in status["summary"]
    assert status["counters"]["repins"] >= 1 and "held" not in status["counters"]
    assert status["counters"]["throttle_events"] == 0
    assert "thermal throttling" not in d.output()
    # `jetbench status` says it too, as a fact and not as throttling.
    shown = subprocess.run([sys.executable, "-m", "jetbench.cli.main", "status", "--socket",
                            str(d.sock_path)], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    assert "below its pin" in shown.stdout and "cause unknown" in shown.stdout
    assert d.stop() == 0


def test_amu_cpu_at_rest_is_not_throttling(tmp_path, started):
    base = tmp_path / "orin"
    create_board("orin-nano", base, quirks=("amu-cpu",))
    d = Daemon(tmp_path, base, "--profile", "maxperf", interval="0.3s")
    started.append(d)
    d.ready()
    time.sleep(2.6)  # past the settling grace, several checks
    status = d.ask("status")
    cpu = [c for c in status["clocks"] if c["domain"] == "cpu"][0]
    assert cpu["cur_hz"] < 0.5 * cpu["min_hz"]  # an idle core's counter reading
    assert status["throttling"] is False and status["below_pin"] == []
    assert status["counters"]["throttle_events"] == 0
    assert d.stop() == 0
