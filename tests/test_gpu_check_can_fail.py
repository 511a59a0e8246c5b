"""Issue 60, 2: `make gpu-check` fails on what it is meant to prove.

A locked clock (`nvmlDeviceSetGpuLockedClocks`, `nvidia-smi -lgc`) changes neither the max nor
the application clocks, so the restore row compared values a lock left behind never changes.
It now reads the SM clock a busy GPU runs after the restore. And a run whose rows were all
skipped for its time limit printed "N of N ran" and exited 0. The stand-in `nvidia-smi` below
answers from a state file: a GPU whose max is 1980 MHz, locked (or not) at 1005 MHz.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from conftest import REPO

SMI = """#!{python}
import json, sys
state = json.load(open({state!r}))
args = " ".join(sys.argv[1:])
if "-L" in sys.argv:
    print("GPU 0: Stand-in GPU (UUID: GPU-0000)")
elif "clocks.sm,clocks.max.sm" in args:
    print(f"{{state['sm']}}, {{state['max']}}")
elif "supported-clocks" in args:
    print("\\n".join(str(m) for m in (510, 1005, 1980)))
"""


def _gpu_check(monkeypatch, tmp_path: Path, sm_mhz: int):
    state = tmp_path / "smi.json"
    state.write_text(json.dumps({"sm": sm_mhz, "max": 1980}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(SMI.format(python=sys.executable, state=str(state)))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "tools/gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _restore_row(module, tmp_path: Path):
    c = module.Check(tmp_path, tmp_path, 60.0)
    idle = [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))"]
    module.check_restore(c, 1005, tmp_path / "journal.json", idle)
    (row,) = c.rows
    return row


def test_a_lock_left_behind_fails_the_restore_row(monkeypatch, tmp_path):
    module = _gpu_check(monkeypatch, tmp_path, sm_mhz=1005)  # busy, it still runs the lock
    row = _restore_row(module, tmp_path)
    assert row["result"] == "failed", row
    assert "a lock was left behind" in row["reason"]


def test_a_clock_that_rises_under_load_passes_the_restore_row(monkeypatch, tmp_path):
    module = _gpu_check(monkeypatch, tmp_path, sm_mhz=1980)
    row = _restore_row(module, tmp_path)
    assert row["result"] == "ok", row


def test_a_journal_left_fails_the_restore_row(monkeypatch, tmp_path):
    module = _gpu_check(monkeypatch, tmp_path, sm_mhz=1980)
    (tmp_path / "journal.json").write_text("{}")
    assert _restore_row(module, tmp_path)["result"] == "failed"


def test_rows_left_unrun_by_the_time_limit_are_no_success(monkeypatch, tmp_path, capsys):
    module = _gpu_check(monkeypatch, tmp_path, sm_mhz=1980)
    code = module.main(["--limit-s", "0", "--out", str(tmp_path / "out")])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert code == 1, last
    assert "ran" not in last and "not run" in last, last
    rows = json.loads((tmp_path / "out/gpu_check.json").read_text())["rows"]
    assert rows and all(r["result"] in ("not run", "skipped") for r in rows), rows


def test_only_unavailable_and_skipped_rows_prove_nothing(monkeypatch, tmp_path, capsys):
    module = _gpu_check(monkeypatch, tmp_path, sm_mhz=1980)
    rows = [{"result": "unavailable"}, {"result": "skipped"}]
    assert module.summary(rows, tmp_path / "x.json") == 1
    assert module.summary(rows + [{"result": "ok"}], tmp_path / "x.json") == 0
    assert module.summary([{"result": "ok"}, {"result": "failed"}], tmp_path / "x.json") == 1
    assert "1 ok, 1 failed of 2 paths" in capsys.readouterr().out
