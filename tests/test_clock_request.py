"""Issue 56: a clock request is parsed once (before anything opens the board, the number kept
as typed) and resolved once by the pin's own rules; every output names the clock that runs.

Expected clocks come from the simulated boards' tables (docs/hardware.md), by hand:
- Nano in mode 1 (5 W): nvpmodel caps the GPU at 640 MHz, no table entry; the entries around
  it are 614.4 and 691.2 MHz, so devfreq runs 614.4 MHz (the highest entry not above max).
- Xavier NX in mode 4: the GPU cap is 800 MHz; the entries around it 675.75 and 828.75 MHz, so
  675.75 MHz runs. 600 MHz lies between 522.75 and 624.75 MHz: 624.75 is 24.75 MHz away, 522.75
  is 77.25 MHz away, so the nearest entry is 624.75 MHz, above the request.
"""

from __future__ import annotations

import json

import pytest

from jetbench.hw.fs import Root
from jetbench.ownership.lock import BoardLock

from conftest import cli, make_board

# no power meter: these tests are about clocks, and a loaded host can leave a 0.2 s power
# window under its coverage bound (exit 3), which is not what they test
QUICK = ("--iterations", "2", "--duration", "0.2s", "--warmup", "0s", "--meter", "none")


def test_a_capped_max_is_one_clock_in_the_file_the_table_the_json_and_report(tmp_path):
    base, out = make_board(tmp_path, "nano", 1), tmp_path / "out"
    r = cli(base, "measure", "--model", "sim:alexnet", "--freq", "max", *QUICK,
            "--out", str(out))
    assert r.exit_code == 0, r.output
    [path] = out.glob("*.json")
    assert path.name == "sim_alexnet-fp32-b1-gpu614mhz.json"  # not gpu922mhz
    doc = json.loads(path.read_text())
    assert doc["settings"]["requested"]["gpu_hz"] == "max"
    assert doc["settings"]["resolved"]["gpu_hz"] == 614_400_000
    assert "640 MHz" in doc["settings"]["resolved_why"]["gpu_hz"]
    assert "--freq max -> 614.4 MHz" in r.output
    report = cli(base, "report", str(path))
    assert report.exit_code == 0, report.output
    assert "614.4 MHz" in report.output
    assert "921.6" not in report.output and "640 MHz" not in report.output


def test_every_line_of_a_capped_run_names_the_clock_that_runs(tmp_path):
    """The progress line's label is the planned point's: on the Xavier NX in mode 4 it was
    1.1 GHz (the table's top, past the cap) while 675.8 MHz ran."""
    from jetbench.run.measure import measure
    from jetbench.run.request import MeasureRequest

    base, out = make_board(tmp_path, "xavier-nx", 4), tmp_path / "out"
    labels = []
    report = measure(Root(base), MeasureRequest(
        models=("sim:alexnet",), gpu_freqs=("max",), iterations=2, duration_s=0.2,
        warmup_s=0.0, out_dir=out), progress=lambda _d, _t, label, _p, _f: labels.append(label))
    assert labels and all(label.endswith("@ 675.8 MHz") for label in labels), set(labels)
    [doc] = report.results
    assert doc["settings"]["resolved"]["gpu_hz"] == 675_750_000
    assert [c["mean_hz"] for c in doc["clocks"]["observed"] if c["domain"] == "gpu"] \
        == [675_750_000]
    assert [p.name for p in report.paths] == ["sim_alexnet-fp32-b1-gpu676mhz.json"]


def test_the_number_asked_is_kept_exactly_and_a_moved_request_says_why(tmp_path):
    base, out = make_board(tmp_path, "xavier-nx", 4), tmp_path / "out"
    r = cli(base, "measure", "--model", "sim:alexnet", "--freq", "624.75MHz", *QUICK,
            "--out", str(out / "a"))
    assert r.exit_code == 0, r.output
    [doc] = [json.loads(p.read_text()) for p in (out / "a").glob("*.json")]
    assert doc["settings"]["requested"]["gpu_hz"] == 624_750_000  # not 624.8 MHz
    assert doc["settings"]["resolved"]["gpu_hz"] == 624_750_000
    assert doc["settings"]["resolved_why"] == {}

    r = cli(base, "measure", "--model", "sim:alexnet", "--freq", "600MHz", *QUICK,
            "--out", str(out / "b"))
    assert r.exit_code == 0, r.output
    [doc] = [json.loads(p.read_text()) for p in (out / "b").glob("*.json")]
    assert (doc["settings"]["requested"]["gpu_hz"], doc["settings"]["resolved"]["gpu_hz"]) \
        == (600_000_000, 624_750_000)
    assert "--freq 600 MHz -> 624.8 MHz: the nearest table entry (522.8 MHz is below)" \
        in r.output


def test_two_requests_that_run_one_clock_are_measured_once_and_said(tmp_path):
    base, out = make_board(tmp_path, "xavier-nx", 4), tmp_path / "out"
    r = cli(base, "measure", "--model", "sim:alexnet", "--freq", "600MHz,624.75MHz", *QUICK,
            "--out", str(out))
    assert r.exit_code == 0, r.output
    assert [p.name for p in out.glob("*.json")] == ["sim_alexnet-fp32-b1-gpu625mhz.json"]
    assert "--freq 624.75 MHz runs 624.8 MHz, as --freq 600 MHz does: measured once" \
        in " ".join(r.output.split())


@pytest.mark.parametrize("args,option,meant", [
    (("measure", "--freq", "69O"), "--freq", "690MHz"),
    (("measure", "--cpu-freq", "fast"), "--cpu-freq", None),
    (("measure", "--emc-freq", "1.6 gigs"), "--emc-freq", "1.6GHz"),
    (("sweep", "--freq", "300MHz..9x0MHz"), "--freq", None),
])
def test_a_typo_is_a_usage_error_at_once_even_while_the_board_is_held(tmp_path, args, option,
                                                                        meant):
    base = make_board(tmp_path, "tx1", None)
    with BoardLock(Root(str(base)), "measure"):  # another command holds the board
        r = cli(base, *args, "--model", "sim:alexnet", "--out", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output
    assert f"{option}: not a frequency" in r.output and "busy" not in r.output
    if meant:
        assert f"did you mean {meant}?" in r.output
    assert not (tmp_path / "out").exists()
