"""The --workload-python child runs under JetPack 4's Python 3.6: vermin confirms that every file
it loads parses and runs there (and would say so of newer syntax). Needs no torch."""

import subprocess
import sys
from pathlib import Path

from jetbench.workload.child import runner as child_runner

from conftest import REPO

PACKAGE = REPO / "agent" / "jetbench"


def child_files() -> list:
    """Everything the child imports from the package: the package's and workload's __init__,
    the runner, its PORTABLE_MODULES and the network definitions."""
    files = [PACKAGE / "__init__.py", PACKAGE / "workload" / "__init__.py",
             Path(child_runner.__file__)]
    files += [REPO / "agent" / (name.replace(".", "/") + ".py")
              for name in child_runner.PORTABLE_MODULES]
    files += sorted((PACKAGE / "workload" / "models").glob("*.py"))
    return files


def vermin(*paths: Path) -> subprocess.CompletedProcess:
    run = "import sys, vermin; sys.argv[0] = 'vermin'; sys.exit(vermin.main())"
    return subprocess.run([sys.executable, "-c", run, "-t=3.6-", "--no-tips",
                           "--violations", "--eval-annotations", *map(str, paths)],
                          capture_output=True, text=True, timeout=120)


def test_vermin_confirms_the_child_is_python_3_6():
    files = child_files()
    assert all(f.exists() for f in files) and len(files) >= 11
    proc = vermin(*files)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_vermin_would_catch_newer_syntax(tmp_path):
    newer = tmp_path / "newer.py"
    newer.write_text("from __future__ import annotations\n\n\ndef f(x: list[int]) -> int:\n"
                     "    if (n := len(x)) > 1:\n        return n\n    return 0\n")
    proc = vermin(newer)
    assert proc.returncode != 0 and "3.8" in proc.stdout
