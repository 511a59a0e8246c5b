"""Result files: atomic name claims under real concurrent writers, a normal file's mode, the
sudo user's ownership, and stale temporaries cleaned on the next run (issues 9.5, 13.4, 13.9)."""

import json
import os
import subprocess
import sys
import time

import pytest

from jetbench.report import io

from conftest import REPO

_WRITER = """
import sys
from jetbench.report import io
out, tag = sys.argv[1], sys.argv[2]
for k in range(int(sys.argv[3])):
    doc = {"writer": tag, "k": k, "power": {"trace_csv": "p.csv"}}
    io.claim_result(out + "/p.json", doc, "# trace of %s %d\\n" % (tag, k))
"""


def test_concurrent_writers_never_lose_a_result(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    writers, each = 4, 15
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(out), f"w{i}", str(each)],
                              env=env) for i in range(writers)]
    assert [p.wait(timeout=120) for p in procs] == [0] * writers
    docs = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert len(docs) == writers * each  # 60 results, none overwritten
    assert {(d["writer"], d["k"]) for d in docs} == {(f"w{i}", k) for i in range(writers)
                                                     for k in range(each)}
    for path in out.glob("*.json"):  # each JSON names its own trace, written by the same run
        doc = json.loads(path.read_text())
        assert doc["power"]["trace_csv"] == path.stem + ".csv"
        expected = f"# trace of {doc['writer']} {doc['k']}\n"
        assert (out / doc["power"]["trace_csv"]).read_text() == expected
    assert not list(out.glob(".*.tmp"))


def test_a_taken_name_gets_the_next_free_one(tmp_path):
    (tmp_path / "p.json").write_text("{}")
    (tmp_path / "p-2.csv").write_text("someone else's trace")
    got = io.claim_result(tmp_path / "p.json", {"power": {"trace_csv": "p.csv"}}, "x\n")
    assert got == tmp_path / "p-3.json"
    assert (tmp_path / "p-2.csv").read_text() == "someone else's trace"
    assert (tmp_path / "p.json").read_text() == "{}"


def test_results_get_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        path = io.claim_result(tmp_path / "r.json", {"power": {}}, "t\n")
        replaced = io.atomic_write_text(tmp_path / "time.json", "{}\n")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert path.with_suffix(".csv").stat().st_mode & 0o777 == 0o644
    assert replaced.stat().st_mode & 0o777 == 0o644


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")
def test_under_sudo_results_belong_to_the_invoking_user(tmp_path, monkeypatch):
    monkeypatch.setenv("SUDO_UID", "4321")
    monkeypatch.setenv("SUDO_GID", "4322")
    path = io.claim_result(tmp_path / "r.json", {"power": {}}, "t\n")
    for p in (path, path.with_suffix(".csv")):
        assert (p.stat().st_uid, p.stat().st_gid) == (4321, 4322)


def test_sudo_ids_of_the_current_user_are_harmless(tmp_path, monkeypatch):
    monkeypatch.setenv("SUDO_UID", str(os.getuid()))
    monkeypatch.setenv("SUDO_GID", str(os.getgid()))
    path = io.atomic_write_text(tmp_path / "a.json", "{}\n")
    assert (path.stat().st_uid, path.stat().st_gid) == (os.getuid(), os.getgid())


def test_stale_temporaries_are_removed_fresh_ones_kept(tmp_path):
    stale = tmp_path / ".p.json.abc.tmp"
    fresh = tmp_path / ".q.json.def.tmp"
    for p in (stale, fresh):
        p.write_text("partial")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    assert io.clean_stale_tmp(tmp_path) == [stale]
    assert not stale.exists() and fresh.exists()


def test_two_measure_runs_into_one_out_keep_both(tmp_path):
    """Real `jetbench measure` processes, two simulated boards, one --out, started together,
    the same network at the same clock (one result name: a simulated network, the files are
    what is tested)."""
    from conftest import make_board

    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
    procs = []
    for key in ("tx1", "nano"):
        base = make_board(tmp_path, key)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "jetbench.cli.main", "--root", str(base), "measure",
             "--model", "sim:alexnet", "--freq", "614MHz", "--iterations", "2", "--warmup",
             "0", "--duration", "0.5", "--out", str(out),
             "--json"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE))
    reports = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode in (0, 3), stderr.decode()
        reports.append(json.loads(stdout))
    families = sorted(json.loads(p.read_text())["board"]["family"] for p in out.glob("*.json"))
    assert families == ["nano", "tx1"]  # both results kept, under two names
    assert len({doc["results"][0]["id"] for doc in reports}) == 1
    assert len(list(out.glob("*.csv"))) == 2


def test_next_run_cleans_stale_temporaries_of_a_killed_one(tmp_path):
    from helpers.workloads import write_tiny

    write_tiny(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    stale = out / ".time.json.x1y2.tmp"
    stale.write_text("{half")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    res = subprocess.run(
        [sys.executable, "-m", "jetbench.cli.main", "time", "--model", "jb_tinynet:tiny",
         "--input-shape", "3,16,16", "--iterations", "2", "--duration", "0", "--warmup", "0",
         "--device", "cpu", "--out", str(out)], cwd=tmp_path, capture_output=True, text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO / "agent")), timeout=120)
    assert res.returncode == 0, res.stderr
    assert not stale.exists() and (out / "time.json").is_file()
    assert (out / "time.json").stat().st_mode & 0o777 == 0o666 & ~_current_umask()


def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
