"""Issue 39: the README's tour runs as written.

The code block under "A 10-minute tour" is read from README.md, its lines (a trailing `\\`
joins the next one, `#` starts a comment) run one after another in one bash, in a fresh
folder under tmp_path, the simulated board's path (`/tmp/orin`) moved there; each line must
exit 0. Only two things are substituted, both outside what a line asks jetbench to do: the
board's folder, and `. .venv/bin/activate` (this suite's interpreter's folder on PATH, which
is what activating does)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from conftest import REPO, bound_s

TOUR_HEADING = "## A 10-minute tour"
BOARD_IN_README = "/tmp/orin"


def tour_lines(readme: str) -> List[str]:
    """The tour's commands, one logical line each (continuations joined, comments dropped)."""
    section = readme.split(TOUR_HEADING, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "the tour has no ```sh block"
    lines: List[str] = []
    pending = ""
    for raw in block.group(1).splitlines():
        # a comment starts at " #" outside quotes; the tour's quotes hold no '#'
        text = re.sub(r"\s+#.*$", "", raw).rstrip()
        if text.endswith("\\"):
            pending += text[:-1].rstrip() + " "
            continue
        text = (pending + text.strip()).strip()
        pending = ""
        if text:
            lines.append(text)
    assert not pending, "the tour's last line ends in a continuation"
    return lines


def test_tour_lines_are_read_as_a_reader_would():
    # The parser itself, on a block written here: a continuation, a comment, a blank line.
    readme = (TOUR_HEADING + ", x\n\n```sh\na one   # first\n\nb two \\\n    three\n"
              "c 'x>=1' && d\n```\n")
    assert tour_lines(readme) == ["a one", "b two three", "c 'x>=1' && d"]


@pytest.mark.long
def test_the_readme_tour_runs_as_written(tmp_path):
    lines = tour_lines((REPO / "README.md").read_text())
    # the tour is the one the README shows: a board, measure, sweep, tune, apply, report
    assert lines[0] == ". .venv/bin/activate"
    assert any(line.startswith("jetbench tune ") for line in lines)
    assert any(line.startswith("jetbench apply resnet18-tuned") for line in lines)
    bindir = Path(sys.executable).parent
    script = ["set -u"]
    for n, line in enumerate(lines):
        if line == ". .venv/bin/activate":
            line = f'export PATH="{bindir}:$PATH"'
            if not (bindir / "jetbench").exists():  # a venv without the console script
                line += f'; jetbench() {{ "{sys.executable}" -m jetbench.cli.main "$@"; }}'
        line = line.replace(BOARD_IN_README, str(tmp_path / "orin"))
        script.append(f"echo '>>> {n}' >&2; {line}\n"
                      f"rc=$?; echo \">>> {n} rc=$rc\" >&2; [ $rc -eq 0 ] || exit 1")
    env = dict(os.environ, COLUMNS="80")
    env.pop("JETBENCH_ROOT", None)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=bound_s(600))
    codes = re.findall(r"^>>> (\d+) rc=(\d+)$", proc.stderr, re.M)
    failed = [(lines[int(n)], rc) for n, rc in codes if rc != "0"]
    assert not failed, f"{failed}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert [int(n) for n, _ in codes] == list(range(len(lines))), proc.stderr[-3000:]
    # what the tour promises it leaves: results, a tuned profile, plots, the board restored
    assert list((work / "r1").glob("*.json")) and list((work / "r2").glob("*.json"))
    assert (work / "r3" / "tune.json").is_file()
    assert (tmp_path / "orin/etc/jetbench/profiles/resnet18-tuned.toml").is_file()
    assert list((work / "plots").glob("*.png"))
