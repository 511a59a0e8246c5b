"""Option values without pydantic: recent typer converts every option's value through a
pydantic TypeAdapter (about 0.09 s of each command's start); jetbench's CLI converts plain
values itself (cli/main.py). Every value must come out as typer's own conversion makes it,
and every bad value must get typer's own message."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import pytest
import typer
from typer.testing import CliRunner

import jetbench.cli.main  # noqa: F401  (installs the plain conversion)

own = getattr(getattr(typer.core, "build_runtime_param", None), "typers_own", None)
pytestmark = pytest.mark.skipif(own is None, reason="this typer converts without pydantic")


def _app(seen: list) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def run(name: str = typer.Option("gpu", "--name"),
            count: int = typer.Option(20, "--count"),
            seed: Optional[int] = typer.Option(None, "--seed"),
            share: float = typer.Option(1, "--share"),
            load: Optional[float] = typer.Option(None, "--load", min=0.0, max=1.0),
            out: Optional[Path] = typer.Option(None, "--out"),
            tree: Path = typer.Option(Path("."), "--tree"),
            tags: List[str] = typer.Option([], "--tag"),
            files: Optional[List[Path]] = typer.Option(None, "--file"),
            flag: Optional[bool] = typer.Option(None, "--flag/--no-flag"),
            quiet: bool = typer.Option(False, "--quiet"),
            where: str = typer.Argument(...)) -> None:
        seen.append([name, count, seed, share, load, out, tree, tags, files, flag, quiet, where])

    return app


CASES = [
    ["w"],
    ["--name", "emc", "--count", "7", "--seed", "-3", "--share", "0.25", "--load", "0.5",
     "--out", "/tmp/o", "--tree", "rel/x", "--tag", "a", "--tag", "b", "--file", "f1",
     "--file", "/f2", "--flag", "--quiet", "w"],
    ["--no-flag", "--share", "1e-3", "--count", "+12", "--seed", "0", "w"],
    ["--share", ".5", "--count", "007", "--name", "", "w"],
    # bad values: typer's own message
    ["--count", "abc", "w"], ["--count", "1.5", "w"], ["--count", "1_000", "w"],
    ["--share", "x", "w"], ["--share", "inf", "w"], ["--seed", " 4", "w"],
    ["--load", "2", "w"], ["--tree", "", "w"], ["--flag", "--count", "", "w"],
]


def _run(build, args):
    seen: list = []
    saved = typer.core.build_runtime_param
    typer.core.build_runtime_param = build
    try:
        res = CliRunner().invoke(_app(seen), args)
    finally:
        typer.core.build_runtime_param = saved
    values = [(type(v).__name__, v) for v in seen[0]] if seen else None
    return res.exit_code, res.output, values


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a) for a in CASES])
def test_a_value_comes_out_as_typers_own_conversion_makes_it(args):
    plain = _run(typer.core.build_runtime_param, args)
    assert plain == _run(own, args)


def test_a_command_that_runs_does_not_import_pydantic(tmp_path):
    import json
    import subprocess
    import sys

    from conftest import REPO, bound_s, make_board

    board = make_board(tmp_path, "tx1")
    probe = ("import sys; sys.argv = ['jetbench', '--root', sys.argv[1], 'info']\n"
             "from jetbench.cli.main import app\n"
             "try:\n    app()\nexcept SystemExit as e:\n    code = e.code\n"
             "import json; print(json.dumps([code, 'pydantic' in sys.modules]))")
    res = subprocess.run([sys.executable, "-c", probe, str(board)], capture_output=True,
                         text=True, timeout=bound_s(60), env={"PYTHONPATH": str(REPO / "agent"),
                                                               "PATH": "/usr/bin:/bin"})
    assert json.loads(res.stdout.strip().splitlines()[-1]) == [0, False], res.stderr[-2000:]
