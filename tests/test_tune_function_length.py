"""Issue 56, part 6: the tuner is read in small pieces. No function or method in
agent/jetbench/run/tune/ is over MAX_LINES lines (a 300-line function with eleven closures
sharing one-element lists was one), and no module there is over MAX_MODULE_LINES (split where
the meaning splits, never by joining lines)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import List

TUNE = Path(__file__).resolve().parents[1] / "agent" / "jetbench" / "run" / "tune"
MAX_LINES = 80
MAX_MODULE_LINES = 500


def long_functions(path: Path, most: int = MAX_LINES) -> List[str]:
    """'module.py:NAME (N lines)' for each function or method over `most` lines."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > most:
                out.append(f"{path.name}:{node.name} ({lines} lines)")
    return out


def test_the_checker_finds_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    pass\n")
    assert long_functions(tmp_path / "long.py") == [f"long.py:long ({MAX_LINES + 1} lines)"]


def test_no_function_in_the_tuner_is_over_80_lines():
    modules = sorted(TUNE.glob("*.py"))
    assert modules
    assert [f for path in modules for f in long_functions(path)] == []


def test_no_tuner_module_is_over_500_lines():
    sizes = {path.name: len(path.read_text().splitlines()) for path in TUNE.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n >= MAX_MODULE_LINES} == {}
