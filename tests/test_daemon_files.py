"""The files shipped for the agent: the systemd unit (verified by `systemd-analyze verify` with
the executable paths substituted), the udev rules (parsed and checked; `udevadm verify` where
it exists), and install-service / uninstall-service into a staging root."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest
from typer.testing import CliRunner

from jetbench.cli.main import app
from jetbench.daemon import install
from jetbench.errors import UsageError

from conftest import REPO

UNIT = REPO / "systemd" / "jetbench.service"
RULES = sorted((REPO / "udev").glob("*.rules"))
JETBENCH = str(Path(sys.executable).with_name("jetbench"))


def _verify(unit: Path) -> Tuple[int, List[str]]:
    """systemd-analyze verify: its exit status and the lines about this unit (unknown keys and
    bad values are only warnings to it, so they are collected, not just the status)."""
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                          text=True, timeout=60)
    about = [line for line in (done.stdout + done.stderr).splitlines() if unit.name in line]
    return done.returncode, about


needs_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None,
    reason="systemd-analyze not installed (apt-get install systemd; .ci/run installs it)")


@needs_analyze
def test_unit_passes_systemd_analyze_verify(tmp_path):
    assert Path(JETBENCH).exists()
    unit = tmp_path / "jetbench.service"
    unit.write_text(install.render_unit(UNIT.read_text(), JETBENCH))
    code, about = _verify(unit)
    assert code == 0 and about == [], about
    # The check can fail: a wrong type and an unknown key are reported.
    bad = tmp_path / "bad" / "jetbench.service"
    bad.parent.mkdir()
    bad.write_text(unit.read_text().replace("Type=notify", "Type=notifyy\nWatchdogSecs=1"))
    code, about = _verify(bad)
    assert len(about) >= 2, about


def test_unit_has_what_the_issue_asks():
    text = UNIT.read_text()
    service = dict(re.findall(r"^(\w+)=(.*)$", text.split("[Service]")[1].split("[Install]")[0],
                              re.M))
    assert service["Type"] == "notify"
    assert service["Restart"] == "on-failure"
    assert service["WatchdogSec"] and service["RuntimeDirectory"] == "jetbench"
    assert service["ReadWritePaths"] == "-/var/lib/jetbench"  # not StateDirectory=: chowns
    assert service["ExecStart"].startswith(install.SHIPPED_EXECUTABLE + " daemon")
    assert service["ExecStopPost"] == install.SHIPPED_EXECUTABLE + " restore --wait 20"
    assert service["ProtectSystem"] == "strict"
    # /sys must stay writable (the clock files): no setting that makes it read-only.
    for key in ("ProtectKernelTunables", "InaccessiblePaths"):
        assert key not in service
    assert service["ReadOnlyPaths"] == "/proc/sys"  # sysctl read-only: /sys is not touched
    # issue 63: the documented examples run (a log in /tmp, NVML's and the meters' devices
    # through install-service's drop-in), with the hardening that costs nothing
    assert "PrivateTmp" not in service and "PrivateDevices" not in service
    assert service["DevicePolicy"] == "closed"
    assert service["SystemCallFilter"] == "@system-service"


@needs_analyze
def test_the_installed_unit_scores_no_worse_than_before_and_verifies(tmp_path):
    """`systemd-analyze security --offline` on the unit as installed with every drop-in
    (a log in a home directory, NVML, meters): at most 4.1, the shipped unit's score before
    issue 63; and it verifies."""
    dest = tmp_path / "root"
    install.install(dest, JETBENCH, logs=["/tmp/ds.log", "/home/u/app/app.log"], nvml=True,
                    meters=True, start=False)
    access = (dest / install.ACCESS_DEST).read_text()
    assert "ReadOnlyPaths=-/tmp\n" in access and "BindReadOnlyPaths=-/home/u/app\n" in access
    assert "ProtectHome=tmpfs" in access and "DeviceAllow=char-nvidia* rw" in access
    assert "DeviceAllow=char-ttyUSB rw" in access
    done = subprocess.run(["systemd-analyze", "security", "--offline=true", f"--root={dest}",
                           "--no-pager", install.UNIT_NAME], capture_output=True, text=True)
    m = re.search(r"Overall exposure level for jetbench.service: ([0-9.]+)", done.stdout)
    assert m, done.stdout + done.stderr
    assert float(m.group(1)) <= 4.1, done.stdout
    code, about = _verify(dest / install.UNIT_DEST)
    assert code == 0 and about == [], about
    # the drop-in is read as systemd reads it (an invalid right, say, is reported by name)
    done = subprocess.run(["systemd-analyze", "verify", f"--root={dest}", install.UNIT_NAME],
                          capture_output=True, text=True, timeout=60)
    assert "20-jetbench-access.conf" not in done.stdout + done.stderr, done.stderr
    with pytest.raises(UsageError, match="absolute"):
        install.access_text(["ds.log"], False, False)
    assert install.access_text([], False, False) is None


# -- udev rules -------------------------------------------------------------------------------
_MATCH_KEYS = {"ACTION", "DEVPATH", "KERNEL", "KERNELS", "SUBSYSTEM", "SUBSYSTEMS", "DRIVER",
               "DRIVERS", "ATTR", "ATTRS", "ENV", "TAG", "TAGS", "TEST", "PROGRAM", "RESULT",
               "NAME", "SYMLINK", "CONST", "SYSCTL"}
_ASSIGN_KEYS = {"NAME", "SYMLINK", "OWNER", "GROUP", "MODE", "ATTR", "ENV", "TAG", "RUN",
                "LABEL", "GOTO", "IMPORT", "OPTIONS", "SECLABEL", "SYSCTL"}
_PAIR = re.compile(r'\s*([A-Z_]+)(?:\{([^}]*)\})?\s*(==|!=|\+=|-=|:=|=)\s*"((?:[^"\\]|\\.)*)"'
                   r"\s*(,|$)")


def parse_rules(text: str) -> List[List[Tuple[str, str, str, str]]]:
    """udev rules -> rules of (key, attribute, operator, value); ValueError says where not."""
    rules = []
    for number, line in enumerate(text.replace("\\\n", "").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pairs, pos = [], 0
        while pos < len(line):
            m = _PAIR.match(line, pos)
            if not m:
                raise ValueError(f"line {number}: cannot parse at {line[pos:pos + 30]!r}")
            key, attr, op, value, _ = m.groups()
            if op in ("==", "!="):
                if key not in _MATCH_KEYS:
                    raise ValueError(f"line {number}: {key} is not a match key")
            elif key not in _ASSIGN_KEYS:
                raise ValueError(f"line {number}: {key} cannot be assigned")
            pairs.append((key, attr or "", op, value))
            pos = m.end()
        rules.append(pairs)
    return rules


def _check_rules(text: str) -> List[List[Tuple[str, str, str, str]]]:
    rules = parse_rules(text)
    labels = {v for rule in rules for k, _, _, v in rule if k == "LABEL"}
    for rule in rules:
        for key, _attr, _op, value in rule:
            if key == "GOTO" and value not in labels:
                raise ValueError(f"GOTO {value} has no LABEL")
            if key == "MODE" and not re.fullmatch(r"0[0-7]{3}", value):
                raise ValueError(f"MODE {value!r}")
            if key == "GROUP" and value != "jetbench":
                raise ValueError(f"GROUP {value!r}")
            if key == "SYMLINK" and not value.startswith("jetbench-meter-"):
                raise ValueError(f"SYMLINK {value!r} is not /dev/jetbench-meter*")
            if key == "RUN":
                _check_run(value)
    return rules


def _check_run(value: str) -> None:
    """RUN programs: absolute; `sh -c '...'` scripts pass `sh -n` (with %p and $$ expanded)."""
    if not value.startswith("/"):
        raise ValueError(f"RUN needs an absolute program: {value[:40]!r}")
    m = re.fullmatch(r"/bin/sh -c '([^']*)'", value)
    if m is None:
        raise ValueError(f"RUN is not a /bin/sh -c '...' line: {value[:40]!r}")
    script = m.group(1).replace("%p", "/devices/x").replace("$$", "$")
    done = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
    if done.returncode != 0:
        raise ValueError(f"sh -n: {done.stderr.strip()}: {script[:60]!r}")


def test_udev_rules_parse_and_check():
    assert [r.name for r in RULES] == ["70-jetbench-access.rules", "71-jetbench-meters.rules"]
    access = _check_rules(RULES[0].read_text())
    meters = _check_rules(RULES[1].read_text())
    subsystems = {v for rule in access for k, _, op, v in rule if k == "SUBSYSTEM" and op == "=="}
    assert {"iio", "hwmon", "powercap", "cpu", "devfreq"} <= subsystems
    run = " ".join(v for rule in access for k, _, _, v in rule if k == "RUN")
    for name in ("energy_uj", "in_power*_input", "curr*_input", "scaling_max_freq", "min_freq",
                 "railgate_enable"):
        assert name in run
    assert any(k == "SYMLINK" for rule in meters for k, _, _, _ in rule)


@pytest.mark.parametrize("bad, message", [
    ('SUBSYSTEM=="tty", SYMLINK+="jetbench-meter-x", GOTO="nowhere"', "no LABEL"),
    ('SUBSYSTEM=="tty" SYMLINK+="x"', "cannot parse"),
    ('SUBSYSTEM=="tty", MODE="660"', "MODE"),
    ('SUBSYSTEM="tty"', "cannot be assigned"),
    ('RUN=="x"', "not a match key"),
    ('SUBSYSTEM=="tty", SYMLINK+="ttyMeter"', "jetbench-meter"),
    ("SUBSYSTEM==\"cpu\", RUN+=\"/bin/sh -c 'for f in a; do'\"", "sh -n"),
    ('SUBSYSTEM=="cpu", RUN+="chmod g+w x"', "absolute"),
])
def test_udev_checker_catches_mistakes(bad, message):
    with pytest.raises(ValueError, match=message):
        _check_rules(bad)


@pytest.mark.skipif(shutil.which("udevadm") is None, reason="udevadm not installed")
def test_udevadm_verify(tmp_path):
    probe = subprocess.run(["udevadm", "verify", "--help"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("this udevadm has no verify command (systemd < 254)")
    done = subprocess.run(["udevadm", "verify", "--resolve-names=never", *map(str, RULES)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# -- install-service / uninstall-service ------------------------------------------------------
def test_install_into_a_staging_root_then_uninstall(tmp_path):
    dest = tmp_path / "image"
    actions = install.install(dest, JETBENCH, profile="maxperf", metrics="127.0.0.1:9101")
    written = {a.what for a in actions if a.kind == "write"}
    unit = dest / install.UNIT_DEST
    assert str(unit) in written
    assert f"ExecStart={JETBENCH} daemon $JETBENCH_ARGS" in unit.read_text()
    assert f"ExecStopPost={JETBENCH} restore" in unit.read_text()
    for rule in RULES:
        assert (dest / install.RULES_DEST / rule.name).read_text() == rule.read_text()
    defaults = (dest / install.DEFAULTS_DEST).read_text()
    assert "JETBENCH_ARGS='--profile maxperf --metrics 127.0.0.1:9101'" in defaults
    # Not the host root: the commands are listed, never run.
    skipped = [a.what for a in actions if a.kind == "skip"]
    assert any(s.startswith("groupadd") for s in skipped)
    assert any("enable --now jetbench.service" in s for s in skipped)
    assert not any(a.kind == "run" for a in actions)
    if shutil.which("systemd-analyze"):
        code, about = _verify(unit)
        assert code == 0 and about == [], about
    # A second install without options keeps the operator's defaults file.
    (dest / install.DEFAULTS_DEST).write_text("JETBENCH_ARGS='--profile mine'\n")
    install.install(dest, JETBENCH)
    assert "mine" in (dest / install.DEFAULTS_DEST).read_text()
    actions = install.uninstall(dest)
    assert not unit.exists() and not (dest / install.DEFAULTS_DEST).exists()
    assert not any((dest / install.RULES_DEST).iterdir())
    assert not any(a.kind == "run" for a in actions)


def test_install_from_a_home_directory_adds_a_dropin(tmp_path):
    dest = tmp_path / "image"
    install.install(dest, "/home/nvidia/venv/bin/jetbench")
    dropin = dest / install.DROPIN_DEST
    assert "ProtectHome=read-only" in dropin.read_text()
    install.uninstall(dest)
    assert not dropin.parent.exists()


def test_install_service_cli_dry_run_writes_nothing(tmp_path):
    result = CliRunner().invoke(app, ["install-service", "--dest", str(tmp_path), "--dry-run",
                                      "--executable", JETBENCH, "--profile", "maxperf"])
    assert result.exit_code == 0, result.output
    assert "write" in result.output and "jetbench.service" in result.output
    assert "skip" in result.output and "systemctl" in result.output
    assert list(tmp_path.iterdir()) == []
