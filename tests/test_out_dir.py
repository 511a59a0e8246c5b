"""--out is checked before any work and named in the message; a --out that fails at the end
keeps the results in a fallback directory the message names (issue 13.1)."""

import shutil
import time

import pytest
from helpers.workloads import quick, write_tiny

from jetbench.hw.fs import Root
from jetbench.run.measure import measure

from conftest import make_board, run_cli


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    write_tiny(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "jb_tinynet:tiny"


def test_measure_out_that_is_a_file_fails_at_once(tmp_path):
    base = make_board(tmp_path, "tx1")
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    t0 = time.monotonic()
    res = run_cli("--root", str(base), "measure", "--model", "alexnet", "--device", "cpu",
                  "--duration", "30", "--out", str(afile))
    assert res.returncode == 1, res.stderr
    assert f"--out {afile}: exists and is not a directory" in res.stderr
    assert time.monotonic() - t0 < 20  # no 30 s window was measured first
    assert afile.read_text() == "mine\n"
    assert not (base / "var/lib/jetbench/journal.json").exists()  # no clock was touched


def test_time_out_under_a_file_fails_at_once(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    res = run_cli("time", "--model", "alexnet", "--device", "cpu", "--duration", "30",
                  "--out", str(afile / "sub"))
    assert res.returncode == 1, res.stderr
    assert f"--out {afile / 'sub'}: cannot write there" in res.stderr
    assert "Traceback" not in res.stderr


def test_sweep_checks_out_first(tmp_path):
    base = make_board(tmp_path, "tx1")
    (tmp_path / "f").write_text("")
    res = run_cli("--root", str(base), "sweep", "--model", "alexnet", "--device", "cpu",
                  "--freq", "all",
                  "--out", str(tmp_path / "f"))
    assert res.returncode == 1 and "--out" in res.stderr and str(tmp_path / "f") in res.stderr


def test_missing_out_dir_is_created(tmp_path, tiny):
    base = make_board(tmp_path, "tx1")
    out = tmp_path / "a" / "b"
    report = measure(Root(base), quick(out))
    assert report.paths and all(p.parent == out for p in report.paths)


def test_out_removed_mid_run_keeps_results_in_the_named_fallback(tmp_path, tiny):
    base = make_board(tmp_path, "tx1")
    out = tmp_path / "out"

    def sabotage(doc, path):  # after the first point: --out becomes a file
        if path.parent == out and out.is_dir():
            shutil.rmtree(out)
            out.write_text("not a directory any more\n")

    report = measure(Root(base), quick(out, batches=(1, 2)), on_result=sabotage)
    assert len(report.paths) == 2
    second = report.paths[1]
    assert second.parent != out and second.is_file()
    assert report.fallback is not None and str(second.parent) in report.fallback
    assert str(out) in report.fallback
    shutil.rmtree(second.parent)
