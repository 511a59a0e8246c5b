"""`--fan` under nvfancontrol (JetPack 5/6): the service that owns pwm1 is stopped (journalled
first) while jetbench holds the fan and started again by restore, even after a kill -9."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jetbench.hw import services
from jetbench.hw.fs import Root

from conftest import cli, make_board

FAKE = Path(__file__).parent / "fake_commands" / "fake_systemctl.py"
runner = CliRunner()


@pytest.fixture
def systemd(tmp_path, monkeypatch):
    """A fake systemd: STATE_DIR/<unit> holds its state, calls.log every systemctl call."""
    state = tmp_path / "systemd"
    state.mkdir()
    monkeypatch.setenv(services.ENV_SYSTEMCTL, f"{sys.executable} {FAKE} {state}")
    return state


def calls(state: Path, verb: str = "") -> list:
    log = state / "calls.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.startswith(verb)]



def pwm(base: Path) -> str:
    return next(base.glob("sys/devices/platform/pwm-fan/hwmon/hwmon*/pwm1")).read_text().strip()


def test_maxperf_fan_stops_the_service_and_restore_starts_it(tmp_path, systemd):
    base = make_board(tmp_path, "orin-nano")
    (systemd / "nvfancontrol").write_text("active\n")
    result = cli(base, "maxperf", "--fan", "--json")
    assert result.exit_code == 0, result.output
    assert calls(systemd, "stop") == ["stop nvfancontrol.service"]
    assert (systemd / "nvfancontrol").read_text().strip() == "inactive"
    assert pwm(base) == "255"
    entries = json.loads((base / "var/lib/jetbench/journal.json").read_text())["entries"]
    svc = [e for e in entries if e["path"] == "service:nvfancontrol"]
    assert svc == [{"path": "service:nvfancontrol", "raw": "active\n", "step": "fan",
                    "kind": "service", "wrote": "inactive"}]
    # The stop comes before the fan write: it is the first entry of the fan step.
    fan_paths = [e["path"] for e in entries if e["step"] == "fan"]
    assert fan_paths[0] == "service:nvfancontrol"

    result = cli(base, "restore")
    assert result.exit_code == 0, result.output
    assert calls(systemd, "start") == ["start nvfancontrol.service"]
    assert (systemd / "nvfancontrol").read_text().strip() == "active"


def test_maxperf_without_fan_leaves_the_service_alone(tmp_path, systemd):
    base = make_board(tmp_path, "orin-nano")
    (systemd / "nvfancontrol").write_text("active\n")
    assert cli(base, "maxperf").exit_code == 0
    assert calls(systemd) == []
    assert cli(base, "restore").exit_code == 0
    assert calls(systemd, "start") == calls(systemd, "stop") == []


def test_no_service_installed_calls_nothing_but_show(tmp_path, systemd):
    base = make_board(tmp_path, "orin-nano")
    result = cli(base, "maxperf", "--fan")
    assert result.exit_code == 0, result.output
    assert pwm(base) == "255"
    assert calls(systemd, "stop") == [] and calls(systemd, "start") == []
    assert cli(base, "restore").exit_code == 0
    assert [c for c in calls(systemd) if not c.startswith("show")] == []


def test_inactive_service_is_not_started_at_restore(tmp_path, systemd):
    base = make_board(tmp_path, "orin-nano")
    (systemd / "nvfancontrol").write_text("inactive\n")
    assert cli(base, "maxperf", "--fan").exit_code == 0
    assert cli(base, "restore").exit_code == 0
    assert calls(systemd, "stop") == calls(systemd, "start") == []
    assert (systemd / "nvfancontrol").read_text().strip() == "inactive"


_KILLED_AFTER_STOP = """
import os, signal, sys
from jetbench.hw import services
original = services.write_knob
def write_then_die(root, path, value):
    original(root, path, value)
    os.kill(os.getpid(), signal.SIGKILL)  # between the stop and anything else
services.write_knob = write_then_die
from jetbench.cli.main import app
sys.argv = ["jetbench"] + sys.argv[1:]
app()
"""


def test_killed_after_the_stop_restore_starts_it(tmp_path, systemd):
    base = make_board(tmp_path, "orin-nano")
    (systemd / "nvfancontrol").write_text("active\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", _KILLED_AFTER_STOP, "--root", str(base),
                           "maxperf", "--fan"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (systemd / "nvfancontrol").read_text().strip() == "inactive"
    assert pwm(base) != "255"  # killed before the fan write

    result = cli(base, "restore")
    assert result.exit_code == 0, result.output
    assert calls(systemd, "start") == ["start nvfancontrol.service"]
    assert (systemd / "nvfancontrol").read_text().strip() == "active"


def test_a_simulated_root_without_the_stand_in_has_no_service_manager(tmp_path, monkeypatch):
    monkeypatch.delenv(services.ENV_SYSTEMCTL, raising=False)
    assert services.systemctl(Root(tmp_path)) is None
    assert services.state(Root(tmp_path), services.NVFANCONTROL) is None


def test_the_host_root_ignores_the_environment(monkeypatch):
    monkeypatch.setenv(services.ENV_SYSTEMCTL, "/tmp/evil")
    command = services.systemctl(Root("/"))
    assert command is None or command[0] in ("/usr/bin/systemctl", "/bin/systemctl")


def test_a_journal_may_name_only_services_jetbench_manages(tmp_path):
    from jetbench.errors import UnsafePath

    with pytest.raises(UnsafePath):
        services.check_value("service:sshd", "inactive\n")
    with pytest.raises(UnsafePath):
        services.check_value("service:nvfancontrol", "masked\n")


def test_the_daemon_stops_it_for_maxperf_fan_re_stops_it_and_starts_it_on_stop(
        tmp_path, systemd, started):
    from helpers.daemons import Daemon

    from conftest import wait_until as _wait

    base = make_board(tmp_path, "orin-nano")
    (systemd / "nvfancontrol").write_text("active\n")
    d = Daemon(tmp_path, base)
    started.append(d)
    d.ready()
    assert calls(systemd, "stop") == []
    assert d.ask("maxperf", fan=True)["ok"]
    assert calls(systemd, "stop") == ["stop nvfancontrol.service"]
    assert pwm(base) == "255"
    # Someone starts it again (nvfancontrol would then move pwm1): the daemon's drift check
    # stops it again, as it re-pins any knob of its profile.
    (systemd / "nvfancontrol").write_text("active\n")
    assert _wait(lambda: len(calls(systemd, "stop")) == 2, timeout=20), d.output()
    assert d.stop() == 0, d.output()
    assert calls(systemd, "start")[-1] == "start nvfancontrol.service"
    assert (systemd / "nvfancontrol").read_text().strip() == "active"


