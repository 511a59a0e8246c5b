"""`restore` says which knobs another tool (jetson_clocks, nvpmodel, jtop) moved while jetbench
held the board: journalled knobs it puts back over that tool's value, and knobs jetbench never
wrote that the tool changed (left as they are)."""

import json

import pytest
from typer.testing import CliRunner

from conftest import cli, make_board

runner = CliRunner()



def put(base, path, value):
    (base / path.lstrip("/")).write_text(f"{value}\n")


def get(base, path):
    return (base / path.lstrip("/")).read_text().strip()


GPU = "/sys/devices/57000000.gpu/devfreq/57000000.gpu"
WFI = "/sys/devices/system/cpu/cpu0/cpuidle/state0/disable"
FAN = "/sys/devices/pwm-fan/target_pwm"


def test_restore_names_a_journalled_knob_another_tool_moved(tmp_path):
    base = make_board(tmp_path, "nano")
    original_min = get(base, f"{GPU}/min_freq")
    result = cli(base, "maxperf", "--json")
    assert result.exit_code == 0, result.output
    pinned = get(base, f"{GPU}/min_freq")
    entries = json.loads((base / "var/lib/jetbench/journal.json").read_text())["entries"]
    assert {e["path"]: e.get("wrote") for e in entries}[f"{GPU}/min_freq"] == pinned
    # Another tool moves one knob jetbench pinned.
    put(base, f"{GPU}/min_freq", 614400000)
    result = cli(base, "restore")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert (f"moved by another tool since: {GPU}/min_freq: jetbench wrote {pinned}, now "
            f"614400000; restored to original {original_min}") in text
    assert text.count("moved by another tool since") == 1  # the others held their pins
    assert get(base, f"{GPU}/min_freq") == original_min


def test_restore_after_jetson_clocks_names_knobs_jetbench_never_wrote(tmp_path):
    """jetson_clocks --store; jetbench maxperf; jetson_clocks (WFI off, fan 255); restore."""
    base = make_board(tmp_path, "nano")
    assert get(base, WFI) == "0" and get(base, FAN) != "255"
    fan_before = get(base, FAN)
    assert cli(base, "maxperf").exit_code == 0
    assert get(base, WFI) == "0"  # jetbench keeps WFI; only deep idle states are disabled
    put(base, WFI, 1)
    put(base, FAN, 255)
    result = cli(base, "restore")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"{WFI}: was 0, now 1 (not jetbench's change: left as is)" in text
    assert f"{FAN}: was {fan_before}, now 255 (not jetbench's change: left as is)" in text
    assert "moved by another tool since:" not in text
    # Left as the other tool set them: undoing them silently is not jetbench's call.
    assert get(base, WFI) == "1" and get(base, FAN) == "255"


def test_restore_after_nothing_else_moved_has_no_note(tmp_path):
    base = make_board(tmp_path, "nano")
    assert cli(base, "maxperf", "--fan").exit_code == 0
    result = cli(base, "restore")
    assert result.exit_code == 0, result.output
    assert "another tool" not in result.output


def _hostile_seen_path(doc):
    doc["seen"].append({"path": "/etc/shadow", "raw": "x\n"})


def _malformed_wrote(doc):
    doc["entries"][0]["wrote"] = 5


@pytest.mark.parametrize("tamper", [_hostile_seen_path, _malformed_wrote])
def test_a_tampered_journal_is_refused(tmp_path, tamper):
    base = make_board(tmp_path, "nano")
    assert cli(base, "maxperf").exit_code == 0
    path = base / "var/lib/jetbench/journal.json"
    doc = json.loads(path.read_text())
    tamper(doc)
    path.write_text(json.dumps(doc))
    result = cli(base, "restore")
    assert result.exit_code == 2, result.output
    assert "not one jetbench can trust" in " ".join(result.output.split())


def test_a_rate_the_kernel_rounds_is_not_taken_for_another_tools_change(tmp_path):
    """round-emc: the EMC rate is accepted and kept rounded (a write jetbench does not verify):
    restore does not call the rounding another tool's change."""
    from jetbench.sim.create import create_board

    base = tmp_path / "b"
    create_board("orin-nano", base, quirks=("round-emc",))
    rate = "/sys/kernel/debug/bpmp/debug/clk/emc/rate"
    put(base, rate, 665600000)  # an original the rounding does not touch
    assert cli(base, "maxperf").exit_code == 0
    entries = json.loads((base / "var/lib/jetbench/journal.json").read_text())["entries"]
    assert "wrote" not in {e["path"]: e for e in entries}[rate]  # rounded: never compared
    put(base, rate, 2131200000)  # what the kernel keeps of 2133000000 (after its next pass)
    result = cli(base, "restore")
    assert result.exit_code == 0, result.output
    assert "another tool" not in result.output
