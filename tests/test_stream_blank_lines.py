"""Issue 9, item 12: a `stream:` rig that prints a blank line after every reading. Blank lines
are not readings and not faults: every reading arrives, no gap, and `monitor` shows the power."""

from __future__ import annotations

import json

import pytest

from jetbench.hw.fs import Root
from jetbench.hw.meters.base import SourceFault
from jetbench.hw.meters.registry import open_sources
from jetbench.sim.meters import StreamSim

from conftest import run_cli


@pytest.mark.parametrize("transport", ["pty", "tcp"])
@pytest.mark.parametrize("after_line", [b"\r\n", b"\n", b"\n\n\n", b" \r\n"])
def test_blank_lines_are_skipped_not_faults(tmp_path, transport, after_line):
    with StreamSim(2.5, columns="ms,W", interval_s=0.005, after_line=after_line,
                   transport=transport, directory=tmp_path) as sim:
        (src,) = open_sources([sim.spec + "?columns=ms,W&timeout=0.3"], Root("/"))
        src.open()
        readings, faults = [], []
        try:
            while len(readings) < 40:
                try:
                    readings.append(src.read())
                except SourceFault as fault:  # before the fix: one per blank line
                    faults.append(fault)
                    if len(faults) > 5:
                        break
        finally:
            src.close()
    assert faults == []
    assert all(r.power_w == (pytest.approx(2.5),) for r in readings)
    times = [r.t_s for r in readings]
    assert times == sorted(times)


class _BlankRig(StreamSim):
    def line(self, t: float) -> bytes:
        return b"\r\n"


def test_a_rig_sending_only_blank_lines_is_a_stall(tmp_path):
    with _BlankRig(2.5, columns="ms,W", interval_s=0.005, directory=tmp_path) as sim:
        (src,) = open_sources([sim.spec + "?columns=ms,W&timeout=0.2"], Root("/"))
        src.open()
        try:
            with pytest.raises(SourceFault) as err:
                src.read()
        finally:
            src.close()
    assert err.value.kind == "stall"


def test_monitor_shows_power_from_a_rig_with_blank_lines(tmp_path):
    with StreamSim(2.5, columns="ms,W", interval_s=0.01, after_line=b"\r\n", transport="tcp",
                   directory=tmp_path) as sim:
        result = run_cli("monitor", "--meter", sim.spec + "?columns=ms,W&timeout=0.3",
                         "--duration", "1", "--interval", "250ms", "--json")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert len(rows) >= 3
    assert all(row["total"]["power_w"] == pytest.approx(2.5) for row in rows), rows
