"""mypy over agent/jetbench (configured in pyproject.toml's [tool.mypy]): no error at all in
the six packages that are checked whole, and elsewhere no file with more errors than
tests/mypy_baseline.txt allows it. The baseline may only shrink: a file with fewer errors than
it lists fails too, until the baseline is lowered (`python tests/test_types.py --write`).

Cold, mypy takes about 20 s of CPU (40 s wall beside other work on 2 cores); with its cache
(the repository's ignored .mypy_cache, kept between runs) about 1 s."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List

import pytest

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "tests" / "mypy_baseline.txt"
CHECKED_WHOLE = ("hw", "sampling", "ownership", "run", "report", "daemon")
_ERROR = re.compile(r"^(agent/jetbench/[^:]+\.py):\d+: error: ")


def _mypy_errors() -> Dict[str, int]:
    """Errors per file, from one mypy run over the package (its cache under the repository)."""
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode not in (0, 1):  # 2: mypy itself failed (a bad config, a crash)
        raise AssertionError(f"mypy failed (exit {proc.returncode}):\n{proc.stdout}"
                             f"{proc.stderr}")
    errors = Counter(m.group(1) for m in map(_ERROR.match, proc.stdout.splitlines()) if m)
    assert proc.returncode == 0 or errors, proc.stdout + proc.stderr  # exit 1 with no error
    return dict(errors)


def _baseline() -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for line in BASELINE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            path, count = line.rsplit(" ", 1)
            counts[path] = int(count)
    return counts


def _in_checked_whole(path: str) -> bool:
    return path.split("/")[2] in CHECKED_WHOLE


def test_the_baseline_lists_no_file_of_the_packages_checked_whole():
    assert [p for p in _baseline() if _in_checked_whole(p)] == []


@pytest.mark.long
def test_mypy_finds_no_new_error():
    pytest.importorskip("mypy", reason="mypy is in the dev extra for Python 3.10+ (make setup)")
    errors, allowed = _mypy_errors(), _baseline()
    whole = {p: n for p, n in errors.items() if _in_checked_whole(p)}
    assert whole == {}, ("mypy errors in a package checked whole (run: .venv/bin/python -m "
                         "mypy):\n" + "\n".join(f"  {p}: {n}" for p, n in sorted(whole.items())))
    grew = {p: (n, allowed.get(p, 0)) for p, n in errors.items()
            if not _in_checked_whole(p) and n > allowed.get(p, 0)}
    assert grew == {}, ("more mypy errors than tests/mypy_baseline.txt allows (errors, "
                        f"allowed): {grew}; run .venv/bin/python -m mypy to see them")
    shrank = {p: (errors.get(p, 0), n) for p, n in allowed.items() if errors.get(p, 0) < n}
    assert shrank == {}, ("fewer mypy errors than the baseline lists (errors, listed): "
                          f"{shrank}; lower it: .venv/bin/python tests/test_types.py --write")


def _uncommented_any(source: str) -> List[int]:
    """Lines that use `typing.Any` (a name or `typing.Any`) with no comment saying why: on the
    line itself or on the line above it."""
    lines = source.splitlines()
    used = sorted({node.lineno for node in ast.walk(ast.parse(source))
                   if isinstance(node, ast.Name) and node.id == "Any"
                   or isinstance(node, ast.Attribute) and node.attr == "Any"})
    return [n for n in used if "#" not in lines[n - 1]
            and not (n > 1 and lines[n - 2].lstrip().startswith("#"))]


def test_uncommented_any_is_found():
    source = ("from typing import Any\n\n"
              "def f(x: Any) -> int:\n    return 1\n\n"
              "# onnxruntime has no types\nOrt = Any\n"
              "y: typing.Any = 1  # typer's own type\n")
    assert _uncommented_any(source) == [3]


def test_any_only_where_a_comment_says_why():
    # TESTING.md: Any is for what has no types (an untyped package's objects, typer's and
    # click's own signatures, locals()); each one says so where it is used
    found = {str(path.relative_to(REPO)): lines
             for path in sorted((REPO / "agent" / "jetbench").rglob("*.py"))
             for lines in [_uncommented_any(path.read_text(encoding="utf-8"))] if lines}
    assert found == {}, f"Any without a comment saying why (file: lines): {found}"


def _write_baseline() -> None:
    errors = _mypy_errors()
    lines = [f"{p} {n}" for p, n in sorted(errors.items()) if not _in_checked_whole(p)]
    BASELINE.write_text("# mypy errors allowed per file (tests/test_types.py); may only "
                        "shrink.\n" + "".join(line + "\n" for line in lines))


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    _write_baseline()
