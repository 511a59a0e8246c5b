"""Issue 61: `report r1 r2` whose table is split to fit 80 or 100 columns: every part repeats
what tells its rows apart. Four results of one configuration differ only by the GPU clock and
the directory; the second part printed rows all `FP16 b1 (sim)`, no clock, no directory."""

import json
import re

import pytest
from helpers.results import result_doc

from conftest import run_cli, terminal_env

# (directory, GPU MHz, img/s, W): r1 and r2 each hold 408 MHz and another clock
POINTS = (("r1", 408, 91.8, 7.28), ("r1", 624.8, 93.3, 7.91), ("r2", 408, 91.9, 7.25),
          ("r2", 510, 93.0, 7.52))
ROW = re.compile(r"^FP16 b1\s+(r[12])\s+([\d.]+ MHz)\s")


@pytest.mark.parametrize("columns", (80, 100))
def test_every_part_of_a_split_report_says_each_rows_clock_and_directory(tmp_path, columns):
    for run, mhz, ips, watts in POINTS:
        doc = result_doc(mhz, ips=ips, watts=watts, precision="fp16")
        doc["power"]["channels"][1]["mean_w"] = 2.0
        # a rail per row of the table: wide enough to be split at 100 columns too
        for k in range(3 if columns == 100 else 0):
            rail = {"name": f"VDD_RAIL{k}", "point": "rail", "source": "ina3221"}
            doc["power"]["channels"].append(rail)
            doc["efficiency"]["by_point"].append(dict(rail, kind="channel", mean_w=1.0 + k,
                                                      mean_w_uncertainty_pct=2.0 + mhz / 1e3))
        (tmp_path / run).mkdir(exist_ok=True)
        (tmp_path / run / f"alexnet-fp16-b1-gpu{int(mhz)}mhz.json").write_text(json.dumps(doc))
    r = run_cli("report", "r1", "r2", cwd=tmp_path, env=terminal_env(columns))
    assert r.returncode == 0, r.stderr
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in r.stdout.splitlines()]
    shown = "\n".join(lines)
    assert all(len(ln) <= columns for ln in lines), shown
    parts = [p for p in re.split(r"\n\s*\n", shown) if "configuration" in p]
    assert len(parts) >= 2, shown  # split: the table is wider than the terminal
    for part in parts:
        rows = [ln for ln in part.splitlines() if ln.startswith("FP16 b1")]
        found = sorted(m.groups() for m in map(ROW.match, rows) if m)
        # each row says its directory and its clock, in every part
        assert found == [("r1", "408 MHz"), ("r1", "624.8 MHz"), ("r2", "408 MHz"),
                         ("r2", "510 MHz")], part


def test_a_warning_names_each_result_by_its_clock_and_directory(tmp_path):
    # img/s/W's uncertainty 5%, 5.5%, 6%, 6.5% (power + 1% throughput): over 1%, one line
    for k, (run, mhz, ips, watts) in enumerate(POINTS):
        doc = result_doc(mhz, ips=ips, watts=watts, precision="fp16", power_pct=4.0 + k / 2)
        (tmp_path / run).mkdir(exist_ok=True)
        (tmp_path / run / f"alexnet-fp16-b1-gpu{int(mhz)}mhz.json").write_text(json.dumps(doc))
    r = run_cli("report", "r1", "r2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    advice = [ln for ln in r.stderr.splitlines() if ln.startswith("uncertainty:")]
    # 408 MHz twice: each says its directory (it read '408 MHz 5.0%, ..., 408 MHz 6.0%')
    assert len(advice) == 1 and advice[0].endswith(
        "[408 MHz (r1) 5.0%, 624.8 MHz (r1) 5.5%, 408 MHz (r2) 6.0%, 510 MHz (r2) 6.5%]"), advice
