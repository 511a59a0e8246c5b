"""README's promises about writes and restores, on FUSE-served boards that refuse a bad write the
moment it is made (`kernel` tests). The server logs every write to a knob, so the order jetbench
writes in, and every refusal, are checked directly: restore's retries cannot hide a wrong order.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import fuse_board

pytestmark = pytest.mark.kernel

CPU0 = "/sys/devices/system/cpu/cpufreq/policy0"
CPU4 = "/sys/devices/system/cpu/cpufreq/policy4"
GPU = "/sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu"
EMC = "/sys/kernel/debug/bpmp/debug/clk/emc"
FAN = "/sys/devices/platform/pwm-fan/hwmon/hwmon0/pwm1"
JOURNAL = "/var/lib/jetbench/journal.json"
# Every knob of the Orin Nano a profile can change (the state a restore must bring back).
KNOBS = [f"{p}/{name}" for p in (CPU0, CPU4)
         for name in ("scaling_governor", "scaling_min_freq", "scaling_max_freq")] + [
    f"{GPU}/min_freq", f"{GPU}/max_freq", f"{GPU}/governor", f"{EMC}/rate",
    f"{EMC}/mrq_rate_locked", FAN, "/sys/devices/platform/bus@0/17000000.gpu/railgate_enable",
] + [f"/sys/devices/system/cpu/cpu{c}/cpuidle/state1/disable" for c in range(6)]


def knobs(board) -> Dict[str, str]:
    return {path: board.read(path) for path in KNOBS}


def profile(tmp_path: Path, text: str) -> str:
    path = tmp_path / "p.toml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def refusals(writes: List[tuple]) -> List[tuple]:
    return [w for w in writes if w[2] != "ok"]


def order(writes: List[tuple], *paths: str) -> List[str]:
    return [w[0] for w in writes if w[0] in paths]


def test_maxperf_then_restore_brings_back_every_knob_and_removes_the_journal(fuse_orin_nano):
    b = fuse_orin_nano
    before = knobs(b)
    assert b.jetbench("maxperf", "--fan").returncode == 0
    applied = b.writes()
    assert refusals(applied) == []
    assert knobs(b) != before
    assert b.p(JOURNAL).exists()
    b.clear_log()
    done = b.jetbench("restore")
    assert done.returncode == 0, done.stderr
    assert knobs(b) == before
    assert not b.p(JOURNAL).exists()
    restored = b.writes()
    assert refusals(restored) == []
    # Newest change first: the restore writes are apply's writes in reverse (each path once).
    assert [w[0] for w in restored] == [w[0] for w in reversed(applied)
                                        if w[0] != f"{CPU0}/scaling_setspeed"
                                        and w[0] != f"{CPU4}/scaling_setspeed"]


def test_a_second_maxperf_keeps_the_first_original_values(fuse_orin_nano):
    b = fuse_orin_nano
    before = knobs(b)
    assert b.jetbench("maxperf").returncode == 0
    assert b.jetbench("maxperf").returncode == 0
    entries = {e["path"]: e["raw"] for e in json.loads(b.p(JOURNAL).read_text())["entries"]}
    assert entries[f"{GPU}/min_freq"] == "306000000\n"
    assert b.jetbench("restore").returncode == 0
    assert knobs(b) == before


@pytest.mark.parametrize("domain", ["cpu", "gpu"])
def test_going_up_writes_max_before_min_and_restore_min_before_max(tmp_path, domain):
    """From min 408/max 510 (GPU; CPU 422.4/499.2 MHz) to a pin above the current max: the max
    must be raised first. Restoring must lower the min first. A wrong order is refused
    (EINVAL) by the kernel and shows in the write log even if a retry then succeeds."""
    d, lo, hi, pin = ((GPU, "408000000", "510000000", "624.75MHz") if domain == "gpu" else
                      (CPU0, "422400", "499200", "960MHz"))
    mn, mx = (f"{d}/min_freq", f"{d}/max_freq") if domain == "gpu" else \
        (f"{d}/scaling_min_freq", f"{d}/scaling_max_freq")
    with fuse_board(tmp_path, "orin-nano") as b:
        b.write(mx, hi)
        b.write(mn, lo)
        b.clear_log()
        section = "[gpu]" if domain == "gpu" else "[cpu]\ngovernor = \"performance\""
        # a max lowered by hand reads as a cap (as jetson_clocks takes it): go past it
        done = b.jetbench("apply", profile(tmp_path, f"{section}\nfreq = \"{pin}\"\n"),
                          "--beyond-power-mode")
        assert done.returncode == 0, done.stderr
        assert refusals(b.writes()) == []
        assert order(b.writes(), mn, mx) == [mx, mn]
        b.clear_log()
        assert b.jetbench("restore").returncode == 0
        assert refusals(b.writes()) == []
        assert order(b.writes(), mn, mx) == [mn, mx]
        assert (b.read(mn), b.read(mx)) == (lo, hi)


@pytest.mark.parametrize("domain", ["cpu", "gpu"])
def test_going_down_writes_min_before_max_and_restore_max_before_min(tmp_path, domain):
    d, lo, hi, pin = ((GPU, "510000000", "624750000", "306MHz") if domain == "gpu" else
                      (CPU0, "960000", "1651200", "345.6MHz"))
    mn, mx = (f"{d}/min_freq", f"{d}/max_freq") if domain == "gpu" else \
        (f"{d}/scaling_min_freq", f"{d}/scaling_max_freq")
    with fuse_board(tmp_path, "orin-nano") as b:
        b.write(mn, lo)
        b.clear_log()
        section = "[gpu]" if domain == "gpu" else "[cpu]\ngovernor = \"performance\""
        # a max lowered by hand reads as a cap (as jetson_clocks takes it): go past it
        done = b.jetbench("apply", profile(tmp_path, f"{section}\nfreq = \"{pin}\"\n"),
                          "--beyond-power-mode")
        assert done.returncode == 0, done.stderr
        assert refusals(b.writes()) == []
        assert order(b.writes(), mn, mx) == [mn, mx]
        b.clear_log()
        assert b.jetbench("restore").returncode == 0
        assert refusals(b.writes()) == []
        assert order(b.writes(), mn, mx) == [mx, mn]
        assert (b.read(mn), b.read(mx)) == (lo, hi)


def test_a_write_refused_mid_step_rolls_the_step_back_and_keeps_the_journal(fuse_orin_nano,
                                                                           tmp_path):
    """Someone raised the CPU min to 1.42 GHz; a profile asks for performance with max 960 MHz:
    the governor write lands, the max write is refused (max below min, EINVAL), the governor is
    put back, the journal still holds the originals and `restore` brings everything back."""
    b = fuse_orin_nano
    b.write(f"{CPU0}/scaling_min_freq", 1420800)
    before = knobs(b)
    b.clear_log()
    done = b.jetbench("apply", profile(tmp_path, """\
        [cpu]
        governor = "performance"
        max_freq = "960MHz"
        """))
    assert done.returncode == 2, done.stderr
    assert "rolled back" in done.stderr
    assert "Traceback" not in done.stderr
    assert b.writes() == [
        (f"{CPU0}/scaling_governor", "performance", "ok"),
        (f"{CPU0}/scaling_max_freq", "960000", "EINVAL"),
        (f"{CPU0}/scaling_governor", "schedutil", "ok"),
    ]
    assert knobs(b) == before
    entries = [e["path"] for e in json.loads(b.p(JOURNAL).read_text())["entries"]]
    assert f"{CPU0}/scaling_governor" in entries and f"{CPU0}/scaling_max_freq" in entries
    assert b.jetbench("restore").returncode == 0
    assert knobs(b) == before
    assert not b.p(JOURNAL).exists()


def test_a_refused_restore_keeps_the_journal(fuse_orin_nano):
    b = fuse_orin_nano
    assert b.jetbench("maxperf").returncode == 0
    doc = json.loads(b.p(JOURNAL).read_text())
    for entry in doc["entries"]:
        if entry["path"] == f"{GPU}/min_freq":
            entry["raw"] = "fast\n"  # a value the kernel refuses
    b.p(JOURNAL).write_text(json.dumps(doc))
    done = b.jetbench("restore")
    assert done.returncode == 2
    assert f"{GPU}/min_freq" in done.stderr
    assert b.p(JOURNAL).exists()


@pytest.mark.parametrize("section", [
    "[cpu]\nmax_freq = \"5GHz\"",
    "[cpu]\nmin_freq = \"10MHz\"",
    "[gpu]\nfreq = \"2GHz\"",
    "[emc]\nfreq = \"5GHz\"",
    "[fan]\npwm = 300",
    "[cpu]\ngovernor = \"turbo\"",
    "[[write]]\npath = \"/etc/passwd\"\nvalue = \"x\"",
    "[[write]]\npath = \"/sys/devices/platform/bus@0/17000000.gpu/unbind\"\nvalue = \"x\"",
])
def test_an_invalid_profile_writes_nothing(fuse_orin_nano, tmp_path, section):
    """Range and validity checks for every domain happen before any write: the kernel sees
    no write at all and no journal appears."""
    b = fuse_orin_nano
    before = knobs(b)
    # Valid settings first, so a check skipped for the bad one would still show as writes.
    text = f"[gpu]\nrailgate = false\n\n{section}\n" if not section.startswith("[gpu]") \
        else f"{section}\nrailgate = false\n"
    done = b.jetbench("apply", profile(tmp_path, text))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert b.writes() == []
    assert knobs(b) == before
    assert not b.p(JOURNAL).exists()
