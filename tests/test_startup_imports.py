"""Start-up budget (issue 36): no command pays for the heavy libraries before it needs them.

`--help` of every command, and the commands that only read or plan (info, profiles, models,
sim list, a dry run, an error for bad input), in one process: none of them may import torch,
numpy, optuna, matplotlib, onnxruntime or scipy (each costs 0.1 to 2 s of start-up, more on a
Jetson's slow storage). The workload, the tuner and the plots import them where they run.
"""

import json
import subprocess
import sys

from conftest import REPO, bound_s, make_board

HEAVY = ("torch", "numpy", "optuna", "matplotlib", "onnxruntime", "scipy", "pandas")

_PROBE = """
import json, sys
from typer.testing import CliRunner
from jetbench.cli.main import app
heavy, root = json.loads(sys.argv[1]), sys.argv[2]
commands = [[]] + [c.split() for c in sys.argv[3:]]
seen = {}
for args in commands:
    for call in ([*args, "--help"],) + ((["--root", root, *args],) if args and
                                          args[0] != "!" else ()):
        call = [a for a in call if a != "!"]
        CliRunner().invoke(app, call)
        loaded = [m for m in heavy if m in sys.modules]
        if loaded:
            seen[" ".join(call)] = loaded
            break
    if seen:
        break
print(json.dumps(seen))
"""

# `!` marks a command whose --help alone is run (running it would measure, tune, or serve)
COMMANDS = ["info", "profiles", "profiles show tx1-690mhz", "models", "sim list",
            "maxperf --dry-run", "apply tx1-690mhz --dry-run", "restore --dry-run",
            "! demo", "! monitor", "! time", "! measure", "! sweep", "! tune", "! report",
            "! daemon", "! status", "! install-service", "! sim create", "! restore",
            "measure --model alexnnet", "time --batch 0 --model alexnet", "report nothing/"]


def test_no_command_imports_a_heavy_library_before_it_needs_one(tmp_path):
    board = make_board(tmp_path, "tx1")
    res = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(HEAVY), str(board),
                          *COMMANDS], capture_output=True, text=True, timeout=bound_s(120),
                         cwd=tmp_path, env={"PYTHONPATH": str(REPO / "agent"),
                                            "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    # the first command that pulled one in, and which
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {}, res.stdout


_HELP_PROBE = """
import json, sys
from jetbench.cli.main import COMMANDS, app
for args in [[]] + [[name] for name, *_ in COMMANDS] + [["sim", "create"], ["profiles", "show"]]:
    try:
        app([*args, "--help"])
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)))
"""


def test_help_is_drawn_without_rich_or_a_second_click():
    # typer's rich help module imports markdown-it and pygments at its top: more than half of
    # --help's time (benchmarks/RESULTS.md, start-up); jetbench draws help itself (help_screen)
    # pydantic: typer 0.29 converts option values through it (cli/main.py converts plain
    # values without it; --help converts none)
    slow = ["rich", "typer.rich_utils", "markdown_it", "pygments", "click", "pydantic", *HEAVY]
    res = subprocess.run([sys.executable, "-c", _HELP_PROBE, json.dumps(slow)],
                         capture_output=True, text=True, timeout=bound_s(60),
                         env={"PYTHONPATH": str(REPO / "agent"), "PATH": "/usr/bin:/bin",
                              "COLUMNS": "80"})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == [], res.stdout[-2000:]
