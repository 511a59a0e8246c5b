"""An error and its hint fit the terminal: wrapped at words on a tty (a path never split),
one line each when piped (what scripts and logs grep)."""

import io

from jetbench.cli import main
from jetbench.errors import UsageError

PATH = "/tmp/some/rather/long/directory/name/that/must/stay/whole/results.json"
ERR = UsageError(f"cannot write the result {PATH}: the disk is full and nothing was kept "
                 "of the window's samples either", hint="free some space, or give --out on "
                 "another disk; `jetbench report` reads what was written before")


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_every_line_fits(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = _Tty()
    monkeypatch.setattr(main.sys, "stderr", out)
    main._report(ERR)
    lines = out.getvalue().splitlines()
    assert len(lines) > 2 and all(len(line) <= 80 for line in lines), lines
    assert any(PATH in line for line in lines)  # whole, on one line
    assert lines[0].startswith("jetbench: error: ")
    hint = [k for k, line in enumerate(lines) if line.startswith("  hint: ")]
    assert len(hint) == 1 and all(line.startswith("        ") for line in lines[hint[0] + 1:])


def test_piped_it_is_one_line_each(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(main.sys, "stderr", out)
    main._report(ERR)
    assert out.getvalue() == f"jetbench: error: {ERR}\n  hint: {ERR.hint}\n"
