"""Output designed for 80 and 100 columns (issue 27): results tables of one row per
configuration, each kind of warning once with its configurations and wrapped at spaces, the
answer and the paths last, figures with significant digits that match their uncertainty."""

import json
import re
import subprocess
import sys

import pytest
from helpers.workloads import write_tiny

from conftest import REPO, make_board, run_cli, terminal_env

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")



def _lines(text: str) -> list:
    # the progress bar's lines are erased on a terminal; drop them as a terminal would show
    out = _ANSI.sub("", text)
    return [ln for ln in out.splitlines() if "━" not in ln]


def _label(doc: dict) -> str:
    """A row's configuration (the network, the same in every row, is said once above)."""
    w = doc["workload"]
    return f"{w['precision'].upper()} b{w['batch']}"


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """measure --precision fp16,fp32 --batch 1,8 on a simulated Orin Nano, at 80 columns."""
    base = tmp_path_factory.mktemp("two_by_two")
    board = make_board(base, "orin-nano")
    out = base / "m"
    res = subprocess.run(
        [sys.executable, "-m", "jetbench.cli.main", "--root", str(board), "measure",
         "--model", "sim:resnet18", "--precision", "fp16,fp32", "--batch", "1,8",
         "--duration", "0.3s", "--iterations", "3", "--warmup", "0.2s", "--idle", "0.2s",
         "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
        env=terminal_env(80), cwd=REPO)
    assert res.returncode == 0, res.stdout
    docs = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    assert len(docs) == 4
    return out, docs, _lines(res.stdout)


def _one_row_per_configuration(lines, docs, columns):
    from jetbench.report.digits import plus_minus_pct

    assert max(len(ln) for ln in lines) <= columns, "\n".join(lines)
    assert not any("…" in ln for ln in lines)
    assert "sim:resnet18" in lines  # the network, once, above the rows
    for d in docs:
        rows = [ln for ln in lines if ln.startswith(_label(d) + " ")]
        # one row (or one row per part of a table split in parts), never a block per metric
        assert 1 <= len(rows) <= 3, (_label(d), lines)
        eff = d["efficiency"]
        ipj = next(p for p in eff["by_point"] if p["kind"] == "total")
        figure = plus_minus_pct(ipj["images_per_j"], eff["uncertainty"]["images_per_j_pct"])
        assert any(figure in r for r in rows), (figure, rows)
        assert any(f"{d['throughput']['images_per_s']:.1f}" in r for r in rows)
        idle = d["power"]["idle"]["total"]  # a row of its own split table: never cut
        idle_w = plus_minus_pct(idle["mean_w"], idle["mean_w_uncertainty_pct"])
        assert any(idle_w in r for r in rows), (idle_w, rows)


def test_measure_two_by_two_at_80_columns(measured):
    _out, docs, lines = measured
    table = lines[:lines.index(next(ln for ln in lines if ln.startswith("warning:")))]
    _one_row_per_configuration(table, docs, 80)
    assert len(table) <= 32, "\n".join(table)  # a block per metric: over 50
    # warnings: each kind once, with the configurations it applies to, wrapped at spaces (a
    # path is printed whole, however long the test's temporary directory makes it)
    assert max(len(ln) for ln in lines if "/tmp" not in ln and "pytest-" not in ln) <= 80, \
        "\n".join(lines)
    text = " ".join(lines)
    assert text.count("clocks not pinned") == 1
    assert "[all 4 configurations]" in text
    assert text.count("simulated workload: latency from") == 1
    # the answer and where it is come last
    assert lines[-1].startswith("results: ")
    assert lines[-2].startswith("clocks: ")


@pytest.mark.parametrize("columns", [80, 100])
def test_report_one_row_per_configuration(measured, columns):
    out, docs, _ = measured
    res = run_cli("report", str(out), env=terminal_env(columns), cwd=REPO)
    assert res.returncode == 0, res.stderr
    _one_row_per_configuration(_lines(res.stdout), docs, columns)


def test_compare_fits_80_columns_and_judges_noise(measured):
    out, docs, _ = measured
    a, b = sorted(out.glob("*.json"))[:2]
    res = run_cli("report", str(a), "--compare", str(b), env=terminal_env(80), cwd=REPO)
    assert res.returncode == 0, res.stderr
    lines = _lines(res.stdout)
    paths = (f"A: {a}", f"B: {b}")  # printed whole, however long the temporary directory is
    assert max(len(ln) for ln in lines if ln not in paths) <= 80, "\n".join(lines)
    cells = [ln.replace("│", " ").strip() for ln in lines]
    rows = [ln for ln in cells if ln.startswith(("img/s ", "power (W)", "latency p50"))]
    assert len(rows) == 3 and all("%" in r for r in rows), lines  # one row per metric
    assert f"A: {a}" in lines and f"B: {b}" in lines


def test_time_two_batches_one_row_each_at_80_columns(tmp_path):
    write_tiny(tmp_path)
    res = run_cli("time", "--model", "jb_tinynet:tiny", "--input-shape", "3,16,16",
                  "--device", "cpu", "--iterations", "2", "--duration", "0.05", "--warmup", "0",
                  "--batch", "1,128", env=dict(terminal_env(80), PYTHONPATH=str(REPO / "agent")),
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = _lines(res.stdout)
    assert max(len(ln) for ln in lines) <= 80
    parts = len([ln for ln in lines if ln.startswith("model ")])
    assert parts >= 1
    for batch in ("1", "128"):
        rows = [ln for ln in lines if re.match(rf"jb_tinynet:tiny\s+{batch}\s", ln)]
        # the row with its figures, not a block per row; in a split table, each part's row
        # names its batch (issue 39)
        assert len(rows) == parts, lines
    assert len(lines) <= 14, "\n".join(lines)
    assert res.stderr.count("latency varies") <= 1  # once, with the configurations


def test_sweep_answer_last_once_per_figure(tmp_path):
    board = make_board(tmp_path, "orin-nano")
    res = subprocess.run(
        [sys.executable, "-m", "jetbench.cli.main", "--root", str(board), "sweep",
         "--model", "sim:resnet18", "--freq", "306MHz,624MHz", "--duration", "0.3s",
         "--iterations", "3", "--warmup", "0.2s", "--idle", "0", "--no-plot",
         "--out", str(tmp_path / "s")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
        env=terminal_env(80), cwd=REPO)
    assert res.returncode == 0, res.stdout
    lines = _lines(res.stdout)
    # a path is never broken (it is copied whole): the rest fits
    assert max(len(ln) for ln in lines if not ln.startswith("results: ")) <= 80, \
        "\n".join(lines)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("most efficient"))
    assert not any(ln.startswith(("warning:", "uncertainty:")) for ln in lines[start:])
    assert lines[-1].startswith("results: ")
    end = next(i for i in range(start + 1, len(lines))
               if lines[i].startswith(("fastest:", "clocks:", "results:")))
    answer = " ".join(lines[start:end])
    assert answer.count("img/s/W") == 1, answer


@pytest.mark.parametrize("width", [80, 100])
def test_split_table_never_cuts_a_figure_or_a_word(width):
    """Long headers wrap, words wrap at spaces, figures stay whole, at any of the widths."""
    from rich.console import Console
    from rich.table import Table

    from jetbench.cli.render import print_results_table
    from jetbench.report.tables import short_label

    labels = ["Performance (img/s)", "Power (W): VDD_IN, module input; module, measured",
              "Performance/W (img/s/W): VDD_IN; module, measured", "Energy above idle: W / img/s/W",
              "Idle W, as pinned (active idle)", "Pre-regulation W, ESTIMATE", "Valid"]
    columns = [["36{k}.5", "7.7{k} +- 0.35", "46.{k} +- 3.7", "0.7{k} +- 0.70 / 490 +- 490",
                "7.0{k} +- 0.35", "8.0{k} +- unknown (80%)",
                "yes, noisy (CV 1{k}%)" if k else "yes"] for k in range(4)]
    table = Table(title="t")
    table.add_column("")
    for cfg in ("FP16 b1", "FP16 b8", "FP32 b1", "FP32 b8"):
        table.add_column(f"sim:resnet18 {cfg}")
    for r, label in enumerate(labels):
        table.add_row(label, *[columns[k][r].format(k=k) for k in range(4)])
    con = Console(width=width, record=True, force_terminal=False, color_system=None)
    print_results_table(con, table, {lb: short_label(lb) for lb in labels})
    text = con.export_text()
    assert max(len(ln) for ln in text.splitlines()) <= width
    for k in range(4):
        for cell in columns[k][:-1]:
            assert cell.format(k=k) in text, (cell.format(k=k), text)
    assert "yes, noisy" in text and "(CV 13%)" in text and "ESTIMATE" in text


def test_grouped_warnings_name_their_configurations():
    from jetbench.report.tables import grouped

    same = [("FP16 b1", "clocks not pinned"), ("FP32 b1", "clocks not pinned")]
    assert grouped(same, 2) == ["clocks not pinned [both configurations]"]
    assert grouped(same + [("FP16 b8", "clocks not pinned")], 3) == [
        "clocks not pinned [all 3 configurations]"]
    assert grouped(same, 3) == ["clocks not pinned [FP16 b1, FP32 b1]"]
    assert grouped([("FP16 b8", "latency varies 14%"), ("FP32 b8", "latency varies 9%")],
                   2) == ["latency varies 9%..14% [FP16 b8 14%, FP32 b8 9%]"]
    # issue 39: named by what tells them apart from every configuration of the output
    every = [f"sim:resnet18 FP16 b1 (sim) @ {mhz} MHz" for mhz in (306, 408, 510)]
    assert grouped([(every[0], "latency varies 2.9% (over 2.5%)"),
                    (every[2], "latency varies 4.7% (over 2.5%)")], 3, every) == [
        "latency varies 2.9%..4.7% (over 2.5%) [306 MHz 2.9%, 510 MHz 4.7%]"]
