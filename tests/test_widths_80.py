"""Issue 39: at 80 columns on a terminal (rich's terminal mode: COLUMNS, TTY_COMPATIBLE), no
line of tune's progress, measure's warnings or their answer is wider than the terminal (a
path is printed whole: those lines are left out), a warning whose figure differs per
configuration reads as a range and short names, and tune names its best point only when it
changes."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, SIM_BOARDS, bound_s, make_board

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
COLUMNS = 80


def _terminal(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"), COLUMNS=str(COLUMNS),
               TTY_COMPATIBLE="1", FORCE_COLOR="1")
    res = subprocess.run([sys.executable, "-m", "jetbench.cli.main", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=bound_s(300), env=env, cwd=cwd)
    lines = [ln for ln in _ANSI.sub("", res.stdout).splitlines() if "━" not in ln]
    return res.returncode, lines


def _too_wide(lines, base):
    return [ln for ln in lines if len(ln) > COLUMNS and str(base) not in ln
            and not ln.startswith(("results:", "profile:", "plot:"))]


def test_measure_warnings_and_answer_fit_and_read(tmp_path):
    board = make_board(tmp_path, "orin-nano")
    rc, lines = _terminal("--root", str(board), "measure", "--model", "sim:resnet18",
                          "--precision", "fp16,fp32", "--batch", "1,8", "--duration", "0.3s",
                          "--iterations", "3", "--warmup", "0.2s", "--out",
                          str(tmp_path / "m"), cwd=tmp_path)
    assert rc == 0, "\n".join(lines)
    assert not _too_wide(lines, tmp_path), "\n".join(lines)
    text = " ".join(lines)
    assert "[X:" not in text and " X " not in text
    # the img/s/W uncertainty of each configuration, named by precision and batch only (the
    # network and the clock are the same in every row and said above the table)
    assert re.search(r"uncertainty \d+\.\d%\.\.\d+\.\d% exceeds 1%", text), text
    assert "[FP16 b1 " in text
    # measure ran four configurations: its answer, as sweep's (docs/measure.md)
    assert any(ln.startswith(("most efficient", "fastest")) for ln in lines), "\n".join(lines)


def test_tune_progress_fits_and_names_the_best_once_per_change(tmp_path):
    pytest.importorskip("optuna")
    board = make_board(tmp_path, "orin-nano")
    budget = 5
    rc, lines = _terminal("--root", str(board), "tune", "--model", "sim:resnet18",
                          "--precision", "fp16", "--batch", "1,8", "--knobs", "gpu,emc",
                          "--budget", str(budget), "--seed", "1", "--duration", "0.3s",
                          "--iterations", "3", "--warmup", "0.2s", "--no-plot",
                          "--out", str(tmp_path / "t"), cwd=tmp_path)
    assert rc == 0, "\n".join(lines)
    assert not _too_wide(lines, tmp_path), "\n".join(lines)
    text = "\n".join(lines)
    assert len(re.findall(r"^trial \d/5: ", text, re.M)) == budget, text
    # the first feasible trial is the best so far; five trials cannot change the best five
    # times and still say it on every line (the old progress repeated it on each)
    assert 1 <= text.count("best so far") < budget, text
    # one way of writing a clock in one output: the best point's table as the progress lines
    # ('2.133 GHz'; it said '2133MHz')
    assert not re.search(r"\d[MG]Hz", text), text


INFO_LINES = 30  # issue 39: `info` within 30 lines at 80 columns (it was 56 on an Orin Nano)


@pytest.mark.parametrize("key", SIM_BOARDS)
def test_info_fits_30_lines_at_80_columns_without_splitting_a_value(tmp_path, key):
    board = make_board(tmp_path, key)
    rc, lines = _terminal("--root", str(board), "info", cwd=tmp_path)
    assert rc == 0, "\n".join(lines)
    # the root row holds pytest's long folder, folded over lines of its own: one line of them
    path_lines = [ln for ln in lines if ln.strip() and ln.strip() in str(board)]
    assert len(lines) - len(path_lines) <= INFO_LINES, "\n".join(lines)
    assert not [ln for ln in lines if len(ln) > COLUMNS], "\n".join(lines)
    text = "\n".join(lines)
    assert "…" not in text
    # no value cut or split: every clock figure stands whole beside its unit on one line
    assert not re.search(r"^\s*[MG]Hz\b", text, re.M), text
    for row in ("model", "power mode", "Clocks", "current"):
        assert row in text, row


def test_report_of_two_directories_says_each_rows_directory(tmp_path):
    # the case: the same configuration in r1 and r2 printed as two identical rows
    # (rich took the `[r1]` that tells them apart for a style tag and dropped it)
    board = make_board(tmp_path, "orin-nano")
    rc, lines = _terminal("--root", str(board), "measure", "--model", "sim:resnet18",
                          "--precision", "fp16,fp32", "--duration", "0.3s", "--iterations", "3",
                          "--warmup", "0.2s", "--out", str(tmp_path / "r1"), cwd=tmp_path)
    assert rc == 0, "\n".join(lines)
    shutil.copytree(tmp_path / "r1", tmp_path / "r2")
    rc, lines = _terminal("report", "r1", "r2", cwd=tmp_path)
    assert rc == 0, "\n".join(lines)
    assert not _too_wide(lines, tmp_path), "\n".join(lines)
    header = next(ln for ln in lines if ln.startswith("configuration"))
    assert header.split()[:2] == ["configuration", "dir"], header
    rows = [ln.split() for ln in lines if ln.startswith(("FP16 b1", "FP32 b1"))]
    # each configuration once per directory in the first part of the table: 2 x 2 rows,
    # each row naming its directory once, none repeating the clock in its label
    first = rows[:4]
    assert sorted((r[0], r[3]) for r in first) == [("FP16", "r1"), ("FP16", "r2"),
                                                   ("FP32", "r1"), ("FP32", "r2")], lines
    assert not any("@" in ln for ln in lines if ln.startswith(("FP16", "FP32"))), lines
