"""Every simulated board's rails and module total, read through the INA3221 source; the
simulated power follows the clocks written into the tree and the process's real CPU load."""

import json
import time

import pytest
from typer.testing import CliRunner

from jetbench.cli.main import app
from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.hw.meters.ina3221 import Ina3221Source
from jetbench.sim.file_kernel import FileKernel

from conftest import SIM_BOARDS, bound_s, make_board

runner = CliRunner()


def _read(base, activity=0.5):
    FileKernel(base, activity=lambda: activity).sync()
    board = detect(Root(base))
    source = Ina3221Source(Root(base), board.rails, board.total_rail)
    source.open()
    try:
        reading = source.read()
    finally:
        source.close()
    values = {c.name: w for c, w in zip(source.channels(), reading.power_w)}
    return board, source, values


@pytest.mark.parametrize("key", SIM_BOARDS)
def test_rails_and_total_from_the_simulated_tree(tmp_path, key):
    board, source, values = _read(make_board(tmp_path, key))
    assert set(values) == {r.name for r in board.rails}
    assert all(w is not None and w > 0 for w in values.values())
    total = source.total()
    if board.total_rail:
        assert total.kind == "channel" and total.channels == (board.total_rail,)
        # The module input feeds every rail: it is larger than any of them, never summed.
        assert all(values[board.total_rail] > w for n, w in values.items()
                   if n != board.total_rail)
    else:  # AGX Xavier / AGX Orin: the sum of the connected channels, named as a sum
        assert total.kind == "sum" and set(total.channels) == set(values)
        assert "NC" not in total.channels


def test_gpu_rail_follows_the_gpu_clock(tmp_path):
    base = make_board(tmp_path, "tx1")
    _board, _src, idle = _read(base, activity=1.0)
    assert runner.invoke(app, ["--root", str(base), "apply", "tx1-690mhz"]).exit_code == 0
    _board, _src, at_690 = _read(base, activity=1.0)
    assert runner.invoke(app, ["--root", str(base), "maxperf"]).exit_code == 0
    _board, _src, at_max = _read(base, activity=1.0)
    assert idle["VDD_GPU"] < at_690["VDD_GPU"] < at_max["VDD_GPU"]
    # GPU rail = static 0.30 W + 6 W * (f/fmax) * (V(f)/Vmax)^2 at full activity (README's
    # model), by hand: TX1 table 76.8 .. 998.4 MHz, 691.2 MHz is 2/3 of the way, so V = 0.8 +
    # 0.3 * 2/3 = 1.0 V; 0.30 + 6 * (691.2 / 998.4) * (1.0 / 1.1)^2 = 3.73293 W (mW rounding).
    assert at_690["VDD_GPU"] == pytest.approx(3.73293, abs=0.002)


def test_rails_follow_real_cpu_load(tmp_path):
    base = make_board(tmp_path, "nano")
    board = detect(Root(base))
    source = Ina3221Source(Root(base), board.rails, board.total_rail)
    source.open()

    def cpu_watts():
        values = dict(zip([c.name for c in source.channels()], source.read().power_w))
        return values["POM_5V_CPU"]

    def passes_made(kernel, count, busy):
        # Wait on the kernel's passes, not on time: a busy loop holds the GIL and a loaded
        # machine delays the thread, so a fixed sleep may see no pass at all.
        target = kernel.passes + count
        deadline = time.monotonic() + bound_s(60)
        while kernel.passes < target:
            assert time.monotonic() < deadline, "the simulated kernel made no pass"
            if busy:
                sum(i * i for i in range(2000))  # this process's real CPU load
            else:
                time.sleep(0.005)

    with FileKernel(base, interval_s=0.02) as kernel:
        passes_made(kernel, 3, busy=False)  # passes that saw only idle time
        idle = cpu_watts()
        passes_made(kernel, 3, busy=True)  # the last two saw only busy time
        busy = cpu_watts()
    source.close()
    assert busy > idle


def test_monitor_once_json_and_csv(tmp_path):
    base = make_board(tmp_path, "xavier-nx")
    result = runner.invoke(app, ["--root", str(base), "monitor", "--once", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["simulated"] is True
    assert [c["name"] for c in doc["channels"]] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
    assert doc["channels"][0]["point"] == "module_input"
    assert doc["total"]["name"] == "VDD_IN"
    assert doc["total"]["power_w"] == doc["channels"][0]["power_w"] > 0
    assert {c["domain"] for c in doc["clocks"]} == {"cpu", "gpu", "emc"}

    csv = tmp_path / "m.csv"
    result = runner.invoke(app, ["--root", str(base), "monitor", "--duration", "0.6s",
                                 "--interval", "100ms", "--csv", str(csv), "--json"])
    assert result.exit_code == 0, result.output
    lines = csv.read_text().splitlines()
    # The header is the first line (CSV readers take the first line as it); every row says
    # that it was measured on a simulated board.
    assert lines[0] == "t_s,VDD_IN_w,VDD_CPU_GPU_CV_w,VDD_SOC_w,total_w,simulated"
    rows = [line.split(",") for line in lines[1:]]
    assert len(rows) >= 3 and all(len(r) == 6 and r[5] == "yes" for r in rows)
    assert [float(r[0]) for r in rows] == sorted(float(r[0]) for r in rows)


def test_monitor_with_external_meter_and_info_lists_sources(tmp_path):
    from jetbench.sim.meters import sim_for

    base = make_board(tmp_path, "tx1")
    with sim_for("scpi", 7.25, transport="tcp") as meter:
        result = runner.invoke(app, ["--root", str(base), "monitor", "--once", "--json",
                                     "--meter", "auto", "--meter", meter.spec])
        assert result.exit_code == 0, result.output
        doc = json.loads(result.output)
        external = [c for c in doc["channels"] if c["point"] == "external"]
        assert external and external[0]["power_w"] == pytest.approx(7.25)
        info = runner.invoke(app, ["--root", str(base), "info", "--json", "--meter", "auto",
                                   "--meter", meter.spec])
    sources = json.loads(info.output)["sources"]
    assert [s["name"].split(":")[0] for s in sources] == ["ina3221", "scpi"]


def test_monitor_rejects_bad_meter(tmp_path):
    base = make_board(tmp_path, "tx1")
    result = runner.invoke(app, ["--root", str(base), "monitor", "--once", "--meter", "bogus:x"])
    assert result.exit_code == 1
