"""Issue 9: the README's "group members run apply/measure without sudo" made true.

`install-service` sets up the state directory as root:jetbench, mode 2775 (a tmpfiles.d entry that
systemd applies at every boot, and directly on the host), and the state directory check accepts
a group-writable directory only when its group is `jetbench`.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from jetbench.cli.main import app
from jetbench.daemon import install
from jetbench.errors import HardwareError
from jetbench.ownership import statedir

from conftest import make_board

JETBENCH = "/usr/local/bin/jetbench"
# tmpfiles.d(5): type, path, mode, user, group, age
TMPFILES_LINE = "d /var/lib/jetbench 2775 root jetbench -"
GID = 4242  # the jetbench group's id inside the staging root


def test_install_into_a_staging_root_writes_the_state_dir_entry(tmp_path):
    dest = tmp_path / "image"
    actions = install.install(dest, JETBENCH)
    conf = dest / "etc/tmpfiles.d/jetbench.conf"
    assert TMPFILES_LINE in conf.read_text().splitlines()
    assert "f /var/lib/jetbench/board.lock 0664 root jetbench -" in conf.read_text().splitlines()
    skipped = [a.what for a in actions if a.kind == "skip"]
    assert f"systemd-tmpfiles --create {conf}" in skipped
    assert f"install -d -o root -g jetbench -m 2775 {dest}/var/lib/jetbench" in skipped
    unit = (dest / install.UNIT_DEST).read_text()
    assert "ReadWritePaths=-/var/lib/jetbench" in unit
    # systemd would chown a StateDirectory= to root:root at each start
    assert not any(line.startswith("StateDirectory") for line in unit.splitlines())
    install.uninstall(dest)
    assert not conf.exists()


@pytest.mark.skipif(shutil.which("systemd-tmpfiles") is None, reason="needs systemd-tmpfiles")
def test_the_entry_gives_a_state_dir_group_members_can_use(tmp_path, monkeypatch):
    base = make_board(tmp_path, "tx1")
    os.rmdir(base / "var/lib/jetbench")
    install.install(base, JETBENCH)  # the simulated board's tree as the image
    with open(base / "etc/group", "a") as f:
        f.write(f"root:x:0:\njetbench:x:{GID}:\n")
    conf = base / "etc/tmpfiles.d/jetbench.conf"
    done = subprocess.run(["systemd-tmpfiles", f"--root={base}", "--create", str(conf)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    st = os.lstat(base / "var/lib/jetbench")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o2775, 0, GID)
    lock = os.lstat(base / "var/lib/jetbench/board.lock")  # members may take the board lock
    assert (stat.S_IMODE(lock.st_mode), lock.st_uid, lock.st_gid) == (0o664, 0, GID)
    # The host has no group named jetbench with that id: a group-writable dir is refused...
    result = CliRunner().invoke(app, ["--root", str(base), "maxperf"])
    assert result.exit_code == 2 and f"writable by group {GID}" in result.output, result.output
    # ...and accepted when its group is the jetbench group.
    monkeypatch.setattr(statedir, "_group_name", lambda gid: "jetbench" if gid == GID else None)
    result = CliRunner().invoke(app, ["--root", str(base), "maxperf"])
    assert result.exit_code == 0, result.output
    journal = os.lstat(base / "var/lib/jetbench/journal.json")
    assert journal.st_gid == GID and stat.S_IMODE(journal.st_mode) == 0o644  # setgid dir
    assert CliRunner().invoke(app, ["--root", str(base), "restore"]).exit_code == 0


def test_host_install_sets_owner_and_mode(tmp_path, monkeypatch):
    """The live branch, on a staging path: no command runs, the group lookup is the image's."""
    ran = []
    monkeypatch.setattr(install, "_run", lambda argv, actions, live, check=True: ran.append(argv))
    monkeypatch.setattr(install.grp, "getgrnam", lambda name: SimpleNamespace(gr_gid=GID))
    actions = []
    install._state_dir(tmp_path, actions, live=True, dry_run=False)
    st = os.lstat(tmp_path / "var/lib/jetbench")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o2775, 0, GID)
    assert ran == [["systemd-tmpfiles", "--create", str(tmp_path / install.TMPFILES_DEST)]]


def test_host_install_refuses_a_symlinked_state_dir(tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "dest/var/lib").mkdir(parents=True)
    os.symlink(outside, tmp_path / "dest/var/lib/jetbench")
    monkeypatch.setattr(install, "_run", lambda *a, **k: None)
    monkeypatch.setattr(install.grp, "getgrnam", lambda name: SimpleNamespace(gr_gid=GID))
    with pytest.raises(HardwareError, match="not a plain directory"):
        install._state_dir(tmp_path / "dest", [], live=True, dry_run=False)
    st = os.lstat(outside)
    assert st.st_gid == 0 and stat.S_IMODE(st.st_mode) != 0o2775
