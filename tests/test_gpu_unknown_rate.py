"""A GPU rate of 0 (or an unreadable one) is unknown, never "0 Hz": after R24 jetson_clocks
writes an empty rate (EINVAL) and turns the override on, `info` must not show the GPU at 0 Hz."""

import json

from typer.testing import CliRunner

from jetbench.cli.main import app
from jetbench.hw.board import detect
from jetbench.hw.clocks import gpu
from jetbench.hw.fs import Root

from conftest import make_board

runner = CliRunner()


def test_r24_override_on_at_rate_zero_is_unknown(tmp_path):
    base = make_board(tmp_path, "tx1-r24")
    clock = base / "sys/kernel/debug/clock"
    assert (clock / "override.gbus/rate").read_text().strip() == "0"
    (clock / "override.gbus/state").write_text("1\n")  # what the R24 script leaves
    [reading] = gpu.read(Root(base), detect(Root(base)))
    assert reading.locked is True
    assert reading.min_hz is None and reading.max_hz is None
    result = runner.invoke(app, ["--root", str(base), "info", "--json"])
    assert result.exit_code == 0, result.output
    [entry] = [c for c in json.loads(result.output)["clocks"] if c["domain"] == "gpu"]
    assert entry["min_hz"] is None and entry["max_hz"] is None
    assert 0 not in (entry["min_hz"], entry["max_hz"], entry["cur_hz"])
    text = runner.invoke(app, ["--root", str(base), "info"]).output
    assert "0 Hz" not in text


def test_devfreq_zero_cur_freq_is_unknown(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    board = detect(Root(base))
    (base / board.gpu.control.lstrip("/") / "cur_freq").write_text("0\n")
    [reading] = gpu.read(Root(base), board)
    assert reading.cur_hz is None
    assert reading.max_hz == max(board.gpu.available_hz)


def test_known_hz():
    assert gpu.known_hz(None) is None
    assert gpu.known_hz(0) is None
    assert gpu.known_hz(-1) is None
    assert gpu.known_hz(76_800_000) == 76_800_000
