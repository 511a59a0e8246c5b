"""Issue 35, item 9: Ctrl-C while the CLI's modules load is `interrupted`, exit 130, no
traceback. The interrupt is raised exactly there: a finder that raises KeyboardInterrupt when
typer is imported (no signal after a guessed delay)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

CHILD = """
import sys
sys.path.insert(0, sys.argv[1])

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "typer":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["jetbench", "info"]
import runpy
runpy.run_module("jetbench", run_name="__main__")
"""


def test_ctrl_c_while_the_cli_loads_is_exit_130_without_a_traceback():
    done = subprocess.run([sys.executable, "-c", CHILD, str(REPO / "agent")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert "interrupted" in done.stderr and "Traceback" not in done.stderr, done.stderr
