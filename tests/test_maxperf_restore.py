"""maxperf writes exactly what docs/hardware.md says; restore brings every board back byte for
byte."""

import json

import pytest
from typer.testing import CliRunner

from jetbench.hw.board import detect
from jetbench.hw.fs import Root

from conftest import SIM_BOARDS, cli, diff, make_board, make_generic_host, snapshot

runner = CliRunner()



def read(base, path):
    return (base / path.lstrip("/")).read_text().strip()


# Files the kernel (here: the simulated kernel) rewrites on its own after our writes.
DERIVED = ("scaling_cur_freq", "cpuinfo_cur_freq", "cur_freq", "target_freq", "gbus/rate",
           "emc/rate", "clk_rate", "cur_pwm", "var/lib/jetbench/journal.json")


@pytest.mark.parametrize("key", SIM_BOARDS)
def test_maxperf_then_restore_is_byte_exact(tmp_path, key):
    base = make_board(tmp_path, key)
    board = detect(Root(base))
    before = snapshot(base)

    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    writes = {w["path"]: w["new"] for w in json.loads(result.output)["writes"]}

    # Every CPU cluster: userspace at its max, setspeed at max; cores online; deep idle off.
    for policy in board.cpu.policies:
        top = str(max(policy.available_hz) // 1000)
        assert read(base, f"{policy.path}/scaling_governor") == "userspace"
        assert read(base, f"{policy.path}/scaling_min_freq") == top
        assert read(base, f"{policy.path}/scaling_max_freq") == top
        assert read(base, f"{policy.path}/scaling_setspeed") == top
        assert read(base, f"{policy.path}/scaling_cur_freq") == top
    assert all(read(base, f) == "1" for f in board.cpu.online_files)
    assert board.cpu.idle_files and all(read(base, f) == "1" for f in board.cpu.idle_files)
    if board.cpu.cpuquiet_enable:
        assert read(base, board.cpu.cpuquiet_enable) == "0"
    # GPU pinned at max, railgating off.
    gpu = board.gpu
    if gpu.kind == "devfreq":
        assert read(base, f"{gpu.control}/min_freq") == str(gpu.max_hz)
        assert read(base, f"{gpu.control}/max_freq") == str(gpu.max_hz)
    else:
        assert read(base, f"{gpu.control}/rate") == str(gpu.max_hz)
        assert read(base, f"{gpu.control}/state") == "1"
    assert read(base, gpu.cur_freq) == str(gpu.max_hz)
    # railgate_enable = 0; Thor's GPU is a PCI device: runtime PM `on` (kept powered).
    assert read(base, gpu.railgate) == ("on" if gpu.railgate.endswith("power/control") else "0")
    # EMC locked at its (capped) max; a devfreq EMC (Thor's bwmgr) pinned min = max.
    if board.emc.kind == "devfreq":
        assert read(base, f"{board.emc.control}/min_freq") == str(board.emc.max_hz)
        assert read(base, f"{board.emc.control}/max_freq") == str(board.emc.max_hz)
    else:
        assert read(base, board.emc.lock) == "1"
        assert read(base, board.emc.rate) == str(board.emc.max_hz)
    # The fan is left alone without --fan.
    assert board.fan.pwm not in writes

    changed = diff(before, snapshot(base))
    written = {p.lstrip("/") for p in writes}
    assert written <= set(changed)
    unexpected = [c for c in changed if c not in written and not c.endswith(DERIVED)
                  and not c.endswith("scaling_setspeed")]
    assert unexpected == []

    result = cli(base, "restore")
    assert result.exit_code == 0, result.output
    assert diff(before, snapshot(base)) == []


def test_second_maxperf_keeps_the_original_state(tmp_path):
    base = make_board(tmp_path, "tx1")
    before = snapshot(base)
    assert cli(base, "maxperf").exit_code == 0
    journal = (base / "var/lib/jetbench/journal.json").read_text()
    assert cli(base, "maxperf", "--fan").exit_code == 0
    assert cli(base, "apply", "tx1-690mhz").exit_code == 0
    entries = {e["path"]: e["raw"] for e in
               json.loads((base / "var/lib/jetbench/journal.json").read_text())["entries"]}
    first = {e["path"]: e["raw"] for e in json.loads(journal)["entries"]}
    assert all(entries[p] == raw for p, raw in first.items())  # first values kept
    assert entries["/sys/devices/pwm-fan/target_pwm"] == "0\n"  # added by the second run
    assert read(base, "/sys/devices/57000000.gpu/devfreq/57000000.gpu/max_freq") == "691200000"
    assert cli(base, "restore").exit_code == 0
    assert diff(before, snapshot(base)) == []
    # Nothing left to restore: says so, exit 0.
    result = cli(base, "restore")
    assert result.exit_code == 0 and "Nothing to restore" in result.output


def test_dry_run_writes_nothing(tmp_path):
    base = make_board(tmp_path, "tx2")
    before = snapshot(base)
    result = cli(base, "maxperf", "--dry-run", "--fan")
    assert result.exit_code == 0
    assert "dry run" in result.output and "target_pwm" in result.output
    assert diff(before, snapshot(base)) == []


def test_fan_option(tmp_path):
    base = make_board(tmp_path, "xavier-agx")
    assert cli(base, "maxperf", "--fan").exit_code == 0
    assert read(base, "/sys/devices/pwm-fan/temp_control") == "0"
    assert read(base, "/sys/devices/pwm-fan/target_pwm") == "255"


def test_apply_resolves_nearest_and_shows_both(tmp_path):
    base = make_board(tmp_path, "tx1-r24")
    result = cli(base, "apply", "tx1-690mhz")
    assert result.exit_code == 0, result.output
    assert "690 MHz" in result.output and "691.2 MHz" in result.output
    assert read(base, "/sys/kernel/debug/clock/override.gbus/rate") == "691200000"
    assert read(base, "/sys/kernel/debug/clock/gbus/rate") == "691200000"


def test_generic_host_maxperf_pins_cpu_only(tmp_path):
    make_generic_host(tmp_path)
    before = snapshot(tmp_path)
    result = cli(tmp_path, "maxperf")
    assert result.exit_code == 0, result.output
    assert read(tmp_path, "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor") == \
        "performance"  # no userspace governor here: the next choice
    assert "no gpu control" in result.output
    assert cli(tmp_path, "restore").exit_code == 0
    # The journal's directory stays (as /var/lib/jetbench does on a board); nothing else differs.
    assert diff(before, snapshot(tmp_path, exclude=("var",))) == []


def test_container_has_nothing_to_pin(tmp_path):
    (tmp_path / "sys").mkdir()  # a container's /sys: there, but no clock jetbench can set
    result = cli(tmp_path, "maxperf")
    assert result.exit_code == 0, result.output
    assert "nothing to change" in result.output
