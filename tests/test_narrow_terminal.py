"""At 80 and 60 columns the `time` table never cuts a number (issue 13.6): rows that do not
fit are printed as one block per row."""

import json
import os
import re

import pytest
from helpers.workloads import write_tiny

from conftest import REPO, run_cli

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.mark.parametrize("columns", [80, 60])
def test_time_table_keeps_every_figure_whole(tmp_path, columns):
    write_tiny(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"), COLUMNS=str(columns),
               FORCE_COLOR="1", TTY_COMPATIBLE="1")
    res = run_cli("time", "--model", "jb_tinynet:tiny", "--input-shape", "3,16,16",
                  "--device", "cpu", "--iterations", "2", "--duration", "0.05", "--warmup", "0",
                  "--batch", "1,128", "--out", str(tmp_path / "o"), cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    text = _ANSI.sub("", res.stdout)
    assert "…" not in text and "..." not in text
    assert max(len(line) for line in text.splitlines()) <= columns
    doc = json.loads((tmp_path / "o" / "time.json").read_text())
    for r in doc["results"]:
        t = r["throughput"]
        ips = re.escape(f"{t['images_per_s']:.1f}")
        assert re.search(rf"(^|\s){ips}(\s|$)", text, re.M)
        assert f"{t['latency_ms']['p99']:.2f}" in text
    assert "jb_tinynet:tiny" in text
