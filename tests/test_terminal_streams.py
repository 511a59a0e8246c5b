"""Issue 61: every line jetbench writes wraps at words at the width of the terminal it goes
to, and uses that width: tune's own lines (their figures with +- as measure prints them, one
name per figure), click's own parse errors, the daemon's log on a terminal (never in the
journal or a file: a log line is one line there), and errors when stdout is a pipe but stderr
a terminal (`jetbench tune ... | tee log`)."""

from __future__ import annotations

import fcntl
import io
import logging
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios

import pytest

from conftest import REPO, bound_s, make_board, on_terminal


def _lines(tmp_path, columns, *args, rc=0):
    code, lines = on_terminal(*args, columns=columns, cwd=tmp_path)
    shown = "\n".join(lines)
    assert code == rc, f"exit {code}\n{shown}"
    assert not [ln for ln in lines if len(ln) > columns], shown
    return lines


@pytest.mark.long
def test_tunes_lines_say_each_figure_with_its_uncertainty_by_measures_names_at_100_columns(
        tmp_path):
    pytest.importorskip("optuna")
    make_board(tmp_path, "orin-nano")  # its INA3221's shunts are known: power has a +-
    lines = _lines(tmp_path, 100, "--root", "orin-nano", "tune", "--model", "sim:resnet18",
                   "--precision", "fp16", "--batch", "1", "--knobs", "gpu", "--budget", "2",
                   "--seed", "1", "--duration", "0.3s", "--iterations", "3", "--warmup",
                   "0.2s", "--no-plot", "--out", "t")
    text = "\n".join(lines)
    flat = " ".join(text.split())
    # (a trial not the best so far is followed by the table's title, "jetbench tune: ...")
    trials = re.findall(r"trial \d/2: .*? -> (.*?)(?: jetbench tune:| tune:|; the best| \[|$)",
                        flat)
    assert len(trials) == 2, text
    for figures in trials:
        # '93.3 +- 0.2 img/s, 7.88 +- 0.35 W, 11.8 +- 0.6 img/s/W': no '9.4 W' alone
        assert re.fullmatch(r"[\d.]+ \+- [\d.]+ img/s, [\d.]+ \+- [\d.]+ W, "
                            r"[\d.]+ \+- [\d.]+ img/s/W", figures), figures
    # the table's cells as the progress says them, and the figure named as measure names it
    assert re.search(r"│ [\d.]+ \+- [\d.]+ +│ [\d.]+ \+- [\d.]+ +│", text), text
    assert "img/J" not in text and "img/s/W" in text, text
    # prose uses the 100 columns there are (a trial's line runs past 80 before it wraps)
    assert any(len(ln) > 80 for ln in lines if not ln.startswith(("┏", "┃", "┡", "│", "└"))), \
        text


@pytest.mark.parametrize("columns", (80, 100))
def test_clicks_own_parse_errors_wrap_at_words(tmp_path, columns):
    bad = "lots-and-lots-of-trials-please-as-many-as-the-board-can-take"
    lines = _lines(tmp_path, columns, "tune", "--budget", bad, rc=1)
    flat = " ".join(" ".join(lines).split())
    # click's message whole, only its line breaks moved (it ran to 104 characters)
    assert "Error: Invalid value for '--budget':" in flat, lines
    assert "Traceback" not in flat


def test_clicks_parse_error_piped_is_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "jetbench", "tune", "--budget", "x" * 120],
                         capture_output=True, text=True, timeout=bound_s(60), cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(REPO / "agent"), COLUMNS="80"))
    assert run.returncode == 1
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and len(errors[0]) > 80, run.stderr


def test_an_error_wraps_at_stderrs_terminal_when_stdout_is_a_pipe(tmp_path):
    """`jetbench ... | tee log`: stdout a pipe, stderr the terminal (100 columns). The hint
    (88 characters) fits on one line there; the width was asked of stdout (80, the
    fallback) and the hint broke in two."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "jetbench", "--root", str(tmp_path / "none"),
                             "info"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave, cwd=tmp_path,
                            env=dict(env, PYTHONPATH=str(REPO / "agent")))
    os.close(slave)
    data = b""
    try:
        while select.select([master], [], [], bound_s(60))[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child has closed the pty
                break
            if not chunk:
                break
            data += chunk
        assert proc.wait(timeout=bound_s(60)) == 1
    finally:
        os.close(master)
        proc.stdout.close()  # type: ignore[union-attr]
    lines = data.decode().replace("\r\n", "\n").splitlines()
    hint = [ln for ln in lines if ln.startswith("  hint: ")]
    assert hint == ["  hint: a board root has sys/ under it: `jetbench sim create --board tx1 "
                    "DIR` makes one"], lines
    assert all(len(ln) <= 100 for ln in lines), lines


class _Terminal(io.StringIO):
    """A stream that says it is a terminal (its width from COLUMNS)."""

    def isatty(self) -> bool:
        return True


LONG = ("held point 921.6 MHz / 1.6 GHz re-checked after the restart: 341.8 items/s against "
        "the floor of 300 items/s, 35.5 items/J, kept (the windows behind it restored)")


@pytest.fixture
def jetbench_logger():
    """The package's logger as it was (setup_logging replaces its handlers)."""
    logger = logging.getLogger("jetbench")
    kept = (logger.handlers[:], logger.level, logger.propagate)
    yield logger
    logger.handlers[:], logger.level, logger.propagate = kept[0], kept[1], kept[2]


def test_the_daemons_log_wraps_on_a_terminal_only(monkeypatch, jetbench_logger):
    from jetbench.daemon.logs import setup_logging

    monkeypatch.setenv("COLUMNS", "80")
    record = logging.LogRecord("jetbench.daemon", logging.INFO, __file__, 1, LONG, None, None)
    # on a terminal: at words, within 80 columns, every word kept
    monkeypatch.setattr(sys, "stderr", _Terminal())
    setup_logging({})
    handler = jetbench_logger.handlers[0]
    shown = handler.format(record).split("\n")
    assert len(shown) > 1 and all(len(ln) <= 80 for ln in shown), shown
    assert " ".join(" ".join(shown).split()).endswith(LONG), shown
    # to a file or a pipe: one line
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    setup_logging({})
    handler = jetbench_logger.handlers[0]
    assert "\n" not in handler.format(record) and handler.format(record).endswith(LONG)
    # to the journal (JOURNAL_STREAM), even from a terminal: one line, its priority first
    monkeypatch.setattr(sys, "stderr", _Terminal())
    setup_logging({"JOURNAL_STREAM": "8:1234"})
    handler = jetbench_logger.handlers[0]
    assert handler.format(record) == f"<6>{LONG}"
