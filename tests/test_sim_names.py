"""Board names are never guessed: a name that is not exactly one simulated board is refused
with the list (nothing created); another name of one board is said when used and listed."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from jetbench.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize("name,says", [("orin-nx", "no simulated Orin NX"),
                                       ("xavier", "xavier-agx or xavier-nx"),
                                       ("orin", "orin-nano"), ("tx3", "choose one of")])
def test_a_name_that_is_not_one_board_is_refused_and_creates_nothing(tmp_path, name, says):
    target = tmp_path / "board"
    result = runner.invoke(app, ["sim", "create", "--board", name, str(target)])
    assert result.exit_code == 1
    assert says in result.output and "Traceback" not in result.output
    assert not target.exists()


def test_another_name_of_one_board_is_said_and_listed(tmp_path):
    result = runner.invoke(app, ["sim", "create", "--board", "agx-orin", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert "orin-agx" in result.output and "agx-orin, another name of it" in result.output
    listed = runner.invoke(app, ["sim", "list"]).output
    assert any(line.startswith("orin-agx ") and "(also: agx-orin)" in line
               for line in listed.splitlines()), listed
