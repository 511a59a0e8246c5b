"""Issue 9, items 8 and 11: what a profile's [[write]] may say, and hostile TOML.

Values with control characters or longer than a sysfs page are refused; a [[write]] path must
be a clock/power knob by file name; device-control files planted in a simulated tree are refused
both by profile validation and by the write path itself; deep TOML and NUL in a profile path are
clean errors (exit 1), never a traceback.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from jetbench.cli.main import app
from jetbench.errors import ProfileError, UnsafePath, UsageError
from jetbench.hw.fs import Root
from jetbench.profiles.profile import load_profile, parse_profile

from conftest import diff, make_board, run_cli, snapshot

runner = CliRunner()
RAILGATE = "/sys/devices/57000000.gpu/railgate_enable"  # tx1 (R32), docs/hardware.md


def apply_file(tmp_path, base, text):
    profile = tmp_path / "p.toml"
    profile.write_text(text, encoding="utf-8")
    return runner.invoke(app, ["--root", str(base), "apply", str(profile)])


def write_entry(path, value_toml):
    return f'[[write]]\npath = "{path}"\nvalue = {value_toml}\n'


@pytest.mark.parametrize("value_toml, what", [
    (r'"0\n1"', "control character"),          # two lines in one write
    (r'"1\r"', "control character"),
    (r'"1\u0000"', "control character"),
    (r'"\u001b[2J"', "control character"),
    (r'"1\t"', "control character"),
    ('"' + "1" * 4097 + '"', "4096 bytes"),      # more than a sysfs page
])
def test_write_values_no_knob_takes_are_refused(tmp_path, value_toml, what):
    base = make_board(tmp_path, "tx1")
    before = snapshot(base)
    result = apply_file(tmp_path, base, write_entry(RAILGATE, value_toml))
    assert result.exit_code == 1, result.output
    assert "[[write]] #1 value" in result.output and what in result.output, result.output
    assert diff(before, snapshot(base)) == []


def test_a_known_knob_with_a_plain_value_is_written(tmp_path):
    base = make_board(tmp_path, "tx1")
    result = apply_file(tmp_path, base, write_entry(RAILGATE, '"0"'))
    assert result.exit_code == 0, result.output
    assert (base / RAILGATE.lstrip("/")).read_text() == "0\n"
    assert runner.invoke(app, ["--root", str(base), "restore"]).exit_code == 0
    assert (base / RAILGATE.lstrip("/")).read_text() == "1\n"


# Device-control files: planted in the simulated tree, each must be refused.
PLANTED = [
    "sys/devices/57000000.gpu/authorized",
    "sys/devices/57000000.gpu/authorized_default",
    "sys/devices/57000000.gpu/delete",
    "sys/devices/57000000.gpu/remove",
    "sys/devices/57000000.gpu/rescan",
    "sys/devices/57000000.gpu/reset",
    "sys/devices/57000000.gpu/uevent",
    "sys/devices/57000000.gpu/driver/bind",
    "sys/devices/57000000.gpu/driver/unbind",
    "sys/devices/57000000.gpu/driver/new_id",
    "sys/devices/57000000.gpu/driver/remove_id",
    "sys/devices/57000000.gpu/driver_override",
    "sys/devices/system/memory/memory0/online",
    "sys/devices/system/memory/memory12/online",
    "sys/devices/virtual/watchdog/watchdog0/timeout",
    "sys/devices/virtual/watchdog/watchdog0/nowayout",
    "sys/devices/virtual/watchdog/watchdog0/pretimeout",
    # under an allowed directory, but not a knob
    "sys/devices/57000000.gpu/devfreq/57000000.gpu/polling_interval",
    "sys/devices/system/cpu/cpu0/cpufreq/stats/reset",
    "sys/devices/57000000.gpu/power/wakeup",
]


@pytest.mark.parametrize("rel", PLANTED)
def test_planted_device_control_files_are_refused(tmp_path, rel):
    base = make_board(tmp_path, "tx1")
    planted = base / rel
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text("1\n")
    before = snapshot(base)
    result = apply_file(tmp_path, base, write_entry("/" + rel, '"0"'))
    assert result.exit_code == 1, result.output
    assert "not a known clock/power knob" in result.output, result.output
    with pytest.raises(UnsafePath):  # the write path refuses it too, whoever asks
        Root(base).write("/" + rel, "0")
    assert diff(before, snapshot(base)) == []


def test_a_symlink_named_like_a_knob_resolving_to_a_denied_file_is_refused(tmp_path):
    import os

    base = make_board(tmp_path, "tx1")
    target = base / "sys/devices/57000000.gpu/driver/unbind"
    target.parent.mkdir(parents=True)
    target.write_text("\n")
    os.symlink("driver/unbind", base / "sys/devices/57000000.gpu/target_pwm")
    result = apply_file(tmp_path, base, write_entry("/sys/devices/57000000.gpu/target_pwm", '"0"'))
    assert result.exit_code == 1 and "unbind" in result.output, result.output
    assert target.read_text() == "\n"


def test_write_path_refuses_control_characters_itself(tmp_path):
    base = make_board(tmp_path, "tx1")
    root = Root(base)
    for text in ("0\n1\n", "1\r\n", "1\x00\n", "\n\n"):
        with pytest.raises(UnsafePath):
            root.write_raw(RAILGATE, text)
    with pytest.raises(UnsafePath):
        root.write(RAILGATE, "0\n1")
    with pytest.raises(UnsafePath):
        root.write(RAILGATE, "1" * 4096)  # 4097 bytes with the newline
    assert (base / RAILGATE.lstrip("/")).read_text() == "1\n"
    root.write(RAILGATE, "0")  # one trailing newline, as echo writes it: fine
    assert (base / RAILGATE.lstrip("/")).read_text() == "0\n"


# -- item 11: hostile TOML and profile paths ------------------------------------------------
def test_100k_nested_arrays_is_a_clean_profile_error(tmp_path):
    base = make_board(tmp_path, "tx1")
    profile = tmp_path / "deep.toml"
    profile.write_text("description = " + "[" * 100000 + "]" * 100000 + "\n")
    result = run_cli("--root", str(base), "apply", str(profile))
    assert result.returncode == 1, result.stderr
    assert "nested deeper than 32" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("depth, refused", [(33, True), (31, False)])
def test_nesting_limit_is_32(depth, refused):
    # `description` must be a string: past the limit the nesting is what is reported.
    text = "description = " + "[" * depth + "]" * depth + "\n"
    with pytest.raises(ProfileError) as err:
        parse_profile(text, "deep")
    assert ("nested deeper than 32" in err.value.message) is refused, err.value.message


def test_nul_in_a_profile_name_or_file_is_a_usage_error(tmp_path):
    for spec in ("max\x00perf", str(tmp_path / "a\x00b.toml"), "/etc/x\x00/../p.toml"):
        with pytest.raises(UsageError) as err:
            load_profile(spec, tmp_path)
        assert "control characters" in err.value.message and "\\x00" in err.value.message


def test_nul_in_a_write_path_is_a_profile_error(tmp_path):
    base = make_board(tmp_path, "tx1")
    before = snapshot(base)
    result = apply_file(tmp_path, base, write_entry(r"/sys/devices/57000000.gpu/\u0000x", '"0"'))
    assert result.exit_code == 1 and "control characters" in result.output, result.output
    with pytest.raises(UnsafePath):
        Root(base).resolve("/sys/devices/\x00/x")
    assert diff(before, snapshot(base)) == []
