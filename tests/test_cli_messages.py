"""New-user messages (issue 13): a bad --root, flag help, hints; real subprocesses."""

import os

from conftest import make_board, run_cli


def test_root_that_does_not_exist_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "doesnotexist"
    for cmd in ("maxperf", "info"):
        res = run_cli("--root", str(missing), cmd)
        assert res.returncode == 1, (cmd, res.stdout, res.stderr)
        assert f"--root {missing}: no such directory" in res.stderr
        assert "Traceback" not in res.stderr


def test_jetbench_root_without_sys_is_named(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run_cli("info", env=dict(os.environ, JETBENCH_ROOT=str(empty)))
    assert res.returncode == 1
    assert f"JETBENCH_ROOT {empty}: has no sys/ directory" in res.stderr


def test_a_simulated_root_still_works(tmp_path):
    base = make_board(tmp_path, "tx1")
    res = run_cli("--root", str(base), "info")
    assert res.returncode == 0, res.stderr
