"""Ctrl-C says what became of the clocks and where the finished results are (issue 13.7)."""

import signal

from helpers.processes import start_measure, wait_for_window
from helpers.workloads import write_tiny

from conftest import make_board


def test_ctrl_c_names_the_clocks_and_the_results(tmp_path):
    write_tiny(tmp_path)
    base = make_board(tmp_path, "tx1")
    proc = start_measure(tmp_path, base)
    wait_for_window(proc, base, tmp_path)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    text = err.decode()
    assert proc.returncode == 130, text
    lines = text.split("interrupted\n", 1)[1].splitlines()
    assert lines[:2] == ["  clocks: restored", "  results: none finished"], text
