"""`jetbench models` is one table, a line per network, inside the terminal (issue 25.4)."""

import json
import os
import re

import pytest

from conftest import REPO, run_cli

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _models(columns: int) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"), COLUMNS=str(columns),
               FORCE_COLOR="1", TTY_COMPATIBLE="1")
    res = run_cli("models", env=env)
    assert res.returncode == 0, res.stderr
    return _ANSI.sub("", res.stdout)


def _listing() -> list:
    res = run_cli("models", "--json", env=dict(os.environ, PYTHONPATH=str(REPO / "agent")))
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["models"]


@pytest.mark.parametrize("columns", [80, 60])
def test_one_line_per_network_within_the_width(columns):
    text = _models(columns)
    lines = [line for line in text.splitlines() if line.strip()]
    # after the table, one sentence (wrapped to the width): each also runs as sim:NAME
    note = next(k for k, line in enumerate(lines) if line.startswith("each also runs as sim:"))
    lines, after = lines[:note], lines[note:]
    assert all(len(line) <= columns for line in after) and "sim:resnet50" in " ".join(after)
    rows = _listing()
    assert max(len(line) for line in lines) <= columns
    assert lines[0].split() == ["model", "input", "params", "GMACs", "description"]
    assert len(lines) == 1 + len(rows)  # a header and one line per network, nothing wrapped
    for line, row in zip(lines[1:], rows):
        fields = line.split()
        # name, input, params (millions) and GMACs whole, on the network's own line
        assert fields[:4] == [row["name"], "x".join(map(str, row["input_shape"])),
                              f"{row['params'] / 1e6:.2f}M", f"{row['gmacs_per_image']:.3f}"]
        assert row["description"].startswith(" ".join(fields[4:]).rstrip("…"))


def test_every_description_is_whole_at_80_columns():
    text = _models(80)
    assert "…" not in text
    for row in _listing():
        assert row["description"] in text
