"""Profiles are validated whole, against the board, before anything is written."""

import pytest
from typer.testing import CliRunner

from jetbench.cli.main import app
from jetbench.errors import ProfileError
from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.profiles.profile import PACKAGE_PROFILES, list_profiles, parse_profile

from conftest import SIM_BOARDS, diff, make_board, snapshot

runner = CliRunner()


def test_every_shipped_profile_parses():
    names = [name for name, _ in list_profiles("/nonexistent")]
    assert {"maxperf", "tx1-690mhz"} <= set(names)
    for family in ("nano", "tx2", "xavier-agx", "xavier-nx", "orin-agx", "orin-nano", "tx1-r24"):
        assert any(n.startswith(family) for n in names), family
    for path in PACKAGE_PROFILES.glob("*.toml"):
        parse_profile(path.read_text(), path.stem, str(path))


@pytest.mark.parametrize("board", SIM_BOARDS)
def test_family_profile_applies_on_its_board(tmp_path, board):
    base = make_board(tmp_path, board)
    family = detect(Root(base)).family
    matching = []
    for name, path in list_profiles(base):
        profile = parse_profile(path.read_text(), name, str(path))
        if family in profile.match_family:
            matching.append(name)
    assert matching, f"no profile for {board}"
    before = snapshot(base)
    for name in matching:
        result = runner.invoke(app, ["--root", str(base), "apply", name])
        assert result.exit_code == 0, result.output
    assert runner.invoke(app, ["--root", str(base), "restore"]).exit_code == 0
    assert diff(before, snapshot(base)) == []


BAD = {
    "unknown key": ('[gpu]\nfrequency = "690MHz"\n', "unknown key 'frequency'"),
    "unknown section": ('[memory]\nfreq = "max"\n', "unknown key 'memory'"),
    "wrong type": ('[gpu]\nrailgate = "no"\n', "[gpu] railgate"),
    "bad frequency": ('[gpu]\nfreq = "fast"\n', "[gpu] freq"),
    "both freq and min": ('[gpu]\nfreq = "max"\nmin_freq = "min"\n', "not both"),
    "min above max": ('[cpu]\nmin_freq = "1GHz"\nmax_freq = "500MHz"\n', "min_freq is above"),
    "out of range": ('[gpu]\nfreq = "2GHz"\n', "outside this board's range"),
    "below range": ('[gpu]\nmin_freq = "1MHz"\n', "outside this board's range"),
    "unknown governor": ('[cpu]\ngovernor = "turbo"\n', "[cpu] governor"),
    "fan pwm": ('[fan]\npwm = 300\n', "[fan] pwm"),
    "wrong board": ('[match]\nsoc = "tegra234"\n[gpu]\nfreq = "max"\n', "[match] soc"),
    "path outside allowlist": ('[[write]]\npath = "/etc/passwd"\nvalue = "x"\n',
                               "allowlist"),
    "dotdot escape": ('[[write]]\npath = "/sys/devices/../../etc/passwd"\nvalue = "x"\n',
                      "allowlist"),
    "missing write target": ('[[write]]\npath = "/sys/devices/nope/railgate_enable"\nvalue = "1"\n',
                             "no such file"),
    "toml syntax": ('[gpu\nfreq = 1\n', "TOML"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_invalid_profile_refused_and_tree_unchanged(tmp_path, case):
    text, message = BAD[case]
    base = make_board(tmp_path, "tx1")
    (tmp_path / "etc").mkdir(exist_ok=True)
    profile = tmp_path / "bad.toml"
    # A valid first part: the CPU section alone would write, so "nothing written" is tested.
    profile.write_text('[cpu]\ngovernor = "userspace"\nfreq = "max"\n' + text
                       if not text.startswith("[cpu]") else text)
    before = snapshot(base)
    result = runner.invoke(app, ["--root", str(base), "apply", str(profile)])
    assert result.exit_code == 1, result.output
    assert message in result.output, result.output
    assert "nothing was written" in result.output
    assert diff(before, snapshot(base)) == []
    assert not (base / "var/lib/jetbench/journal.json").exists()


def test_symlinked_write_target_escaping_refused(tmp_path):
    import os

    base = make_board(tmp_path, "tx1")
    os.symlink("../../etc/jetbench/simulated.json", base / "sys/devices/sneaky")  # in the root
    os.symlink("../../../outside", base / "sys/devices/away")  # off the root
    (tmp_path / "outside").write_text("x\n")
    for name, message in (("sneaky", "allowlist"), ("away", "outside the root")):
        profile = tmp_path / "p.toml"
        profile.write_text(f'[[write]]\npath = "/sys/devices/{name}"\nvalue = "x"\n')
        result = runner.invoke(app, ["--root", str(base), "apply", str(profile)])
        assert result.exit_code == 1 and message in result.output, result.output
    assert (tmp_path / "outside").read_text() == "x\n"


def test_expert_write_and_min_max_ranges(tmp_path):
    base = make_board(tmp_path, "tx2")
    profile = tmp_path / "p.toml"
    profile.write_text('[gpu]\nmin_freq = "300MHz"\nmax_freq = "0.9GHz"\n'
                       '[[write]]\npath = "/sys/devices/17000000.gp10b/railgate_enable"\n'
                       'value = 0\n')
    result = runner.invoke(app, ["--root", str(base), "apply", str(profile)])
    assert result.exit_code == 0, result.output
    node = base / "sys/devices/17000000.gp10b/devfreq/17000000.gp10b"
    assert (node / "min_freq").read_text() == "318750000\n"
    assert (node / "max_freq").read_text() == "930750000\n"
    assert (base / "sys/devices/17000000.gp10b/railgate_enable").read_text() == "0\n"


def test_profile_parse_errors_name_the_key():
    with pytest.raises(ProfileError) as err:
        parse_profile('[cpu]\nonline = 1\n', "x")
    assert "[cpu] online" in str(err.value)


def test_profiles_commands(tmp_path):
    result = runner.invoke(app, ["profiles"])
    assert result.exit_code == 0 and "tx1-690mhz" in result.output
    result = runner.invoke(app, ["profiles", "show", "tx1-690mhz"])
    assert result.exit_code == 0 and "690 MHz" in result.output, result.output
    result = runner.invoke(app, ["profiles", "show", "nope"])
    assert result.exit_code == 1 and "no profile named" in result.output


def test_the_profile_list_is_a_line_each_at_80_columns(tmp_path):
    """Eleven shipped profiles: a title, a header, a line each (one profile for two boards
    folds its "for" cell onto a second line), the closing hint; every line within 80, every
    name whole. A broken profile file is its own row, never the end of the list."""

    base = make_board(tmp_path, "tx1")
    (base / "etc/jetbench/profiles").mkdir(parents=True, exist_ok=True)
    (base / "etc/jetbench/profiles/broken.toml").write_text("[gpu\n")
    names = [name for name, _ in list_profiles(base)]
    result = runner.invoke(app, ["--root", str(base), "profiles"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(len(line) <= 80 for line in lines), result.output
    assert len(lines) <= len(names) + 3 + 2, result.output
    for name in names:
        assert any(line.startswith(name + " ") for line in lines), name
    assert any(line.startswith("broken ") and "invalid" in line for line in lines)
