"""An interrupt at every boundary of a measurement (docs/measure.md, "Interrupts"): Ctrl-C,
SIGTERM and the daemon taking its board back, before the window, inside it, after it but
before the result is written, and while it is written. Each lands exactly there through
measure's test-only hook point (tests/interrupt_at.py), never after a guessed sleep. Always
exit 130 and the clocks put back; no result, or a whole one (marked `interrupted` when the
interrupt came after its window); never a half-written file.

The workload is a --cmd (tests/fake_commands/fake_work.py): no torch to load, about 1 s a run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.workloads import board_snapshot

from jetbench.report.io import load_result
from jetbench.report.schema import INTERRUPT_CAUSES

from conftest import REPO, diff, make_board, sigint_as_on_a_terminal

HELPER = Path(__file__).parent / "interrupt_at.py"
WORK = f"{sys.executable} {Path(__file__).parent / 'fake_commands' / 'fake_work.py'} 0.3"
CMD = ["--cmd", WORK, "--throughput-from", "items:1", "--duration", "0.2s"]
JOURNAL = "var/lib/jetbench/journal.json"

# Where each boundary is: phase names measure passes its hook, and "json-write" (inside the
# result's write). What a point interrupted there leaves.
NO_RESULT = ["pinned", "window-opening", "window-open", "window-closed"]  # before/in the window
MARKED = "figures"  # window closed, workload done, result not written yet: whole, marked
WHOLE = "json-write"  # while its result is written: whole (serialised before the interrupt)


def interrupted_run(tmp_path: Path, base: Path, at: str, *args: str,
                    timeout: float = 120) -> subprocess.CompletedProcess:
    """jetbench ARGS with an interrupt at `at` (PHASE[#N]:CAUSE), as on a terminal (SIGINT
    raises), with no stdin."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"), INTERRUPT_AT=at)
    return subprocess.run([sys.executable, str(HELPER), "--root", str(base), *args],
                          cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=sigint_as_on_a_terminal)


def assert_interrupted_and_put_back(r: subprocess.CompletedProcess, base: Path, before) -> None:
    assert r.returncode == 130, r.stderr
    assert "interrupt_at:" in r.stderr, r.stderr  # the hook did fire: the boundary was reached
    assert "Traceback" not in r.stderr and "INVALID" not in r.stderr, r.stderr
    assert "\ninterrupted\n  clocks: restored\n" in r.stderr, r.stderr
    assert not (base / JOURNAL).exists()
    assert diff(before, board_snapshot(base, "tx1")) == []


def entries(out: Path):
    """Every name in --out, hidden ones (temporaries, placeholders) included."""
    return sorted(p.name for p in out.iterdir()) if out.exists() else []


def whole_result(out: Path) -> dict:
    names = entries(out)
    assert len(names) == 2 and names[0].endswith(".csv") and names[1].endswith(".json"), names
    doc = load_result(out / names[1])  # a whole, valid jetbench.result/1 document
    assert doc["status"] == "ok" and doc["validity"]["valid"] is True, doc["validity"]
    assert doc["throughput"]["images_per_s"] > 0 and doc["power"]["total"]["mean_w"] > 0
    assert doc["power"]["trace_csv"] == names[0]
    assert (out / names[0]).read_text().count("\n") > 2  # the trace, not a placeholder
    return doc


SIGNALS = [pytest.param("SIGINT", id="ctrl-c"), pytest.param("SIGTERM", id="sigterm")]


@pytest.mark.parametrize("cause", SIGNALS)
@pytest.mark.parametrize("phase", NO_RESULT)
def test_an_interrupt_before_the_window_closes_leaves_no_result(tmp_path, phase, cause):
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    out = tmp_path / "out"
    r = interrupted_run(tmp_path, base, f"{phase}:{cause}", "measure", "--freq", "690MHz",
                        *CMD, "--out", str(out))
    assert_interrupted_and_put_back(r, base, before)
    assert "results: none finished" in r.stderr
    assert entries(out) == []  # no result, no placeholder, no temporary


@pytest.mark.parametrize("cause", SIGNALS)
def test_an_interrupt_after_the_window_finishes_the_result_marked_interrupted(tmp_path, cause):
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    out = tmp_path / "out"
    r = interrupted_run(tmp_path, base, f"{MARKED}:{cause}", "measure", "--freq", "690MHz",
                        *CMD, "--out", str(out))
    assert_interrupted_and_put_back(r, base, before)
    assert f"results: 1 finished, in {out}; the same command with --resume measures the " \
        "rest" in r.stderr
    assert whole_result(out)["interrupted"] == cause


@pytest.mark.parametrize("cause", SIGNALS)
def test_an_interrupt_while_the_result_is_written_leaves_it_whole(tmp_path, cause):
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    out = tmp_path / "out"
    r = interrupted_run(tmp_path, base, f"{WHOLE}:{cause}", "measure", "--freq", "690MHz",
                        *CMD, "--out", str(out), "--json")
    assert_interrupted_and_put_back(r, base, before)
    assert r.stdout == ""  # no report for an interrupted run, only the notes
    assert "interrupted" not in whole_result(out)  # finished before the interrupt came


@pytest.mark.parametrize("cause", ["SIGINT", "SIGTERM"])
def test_an_interrupt_while_the_table_prints_is_still_130(tmp_path, cause):
    """Everything done and written, the CLI printing the table: 130 (not killed by SIGTERM's
    default action), the result whole and unmarked."""
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    out = tmp_path / "out"
    r = interrupted_run(tmp_path, base, f"table:{cause}", "measure", "--freq", "690MHz",
                        *CMD, "--out", str(out))
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert "interrupt_at:" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (base / JOURNAL).exists()
    assert diff(before, board_snapshot(base, "tx1")) == []
    assert "interrupted" not in whole_result(out)


def test_a_sweep_interrupted_at_its_second_point_keeps_the_first(tmp_path):
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    out = tmp_path / "out"
    r = interrupted_run(tmp_path, base, "window-open#2:SIGTERM", "sweep",
                        "--freq", "614MHz,691MHz", *CMD, "--out", str(out), "--no-plot")
    assert_interrupted_and_put_back(r, base, before)
    assert f"results: 1 finished, in {out}; the same command with --resume measures the " \
        "rest" in r.stderr
    doc = whole_result(out)
    assert doc["settings"]["applied"]["gpu_hz"] == 614_400_000 and "interrupted" not in doc


def test_a_second_interrupt_does_not_cut_the_put_back_short(tmp_path):
    """Ctrl-C, then SIGTERM while the clocks are being put back: held until they are."""
    base = make_board(tmp_path, "tx1")
    before = board_snapshot(base, "tx1")
    code = ("import signal, jetbench.run.measure as m\n"
            "real = m.put_back\n"
            "def put_back(*a):\n"
            "    signal.raise_signal(signal.SIGTERM)\n"
            "    return real(*a)\n"
            "m.put_back = put_back\n"
            f"exec(open({str(HELPER)!r}).read())\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"), INTERRUPT_AT="window-open:SIGINT")
    r = subprocess.run([sys.executable, "-c", code, "--root", str(base), "measure", "--freq",
                        "690MHz", *CMD, "--out", str(tmp_path / "out")], cwd=tmp_path, env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                       preexec_fn=sigint_as_on_a_terminal)
    assert_interrupted_and_put_back(r, base, before)


def test_the_interrupt_table_is_in_the_docs():
    section = (REPO / "docs" / "measure.md").read_text().split("### Interrupts", 1)[1]
    section = section.split("\n### ")[0]
    assert "`interrupted`" in section and "130" in section
    for cause in INTERRUPT_CAUSES:
        assert f'"{cause}"' in section, cause
    for boundary in ("before the window", "inside the window", "after the window",
                     "while the result is written", "daemon"):
        assert boundary in section, boundary



# -- the daemon taking its board back (systemctl stop during a lease) ----------------------------
@pytest.fixture
def daemons(started):
    """Start a daemon holding nano-614mhz; conftest's `started` kills it whatever happens."""
    from helpers.daemons import Daemon

    def start(tmp_path: Path, base: Path) -> "Daemon":
        d = Daemon(tmp_path, base, "--profile", "nano-614mhz", interval="0.1s")
        started.append(d)
        d.ready()
        return d

    return start


@pytest.mark.parametrize("phase,leaves", [("pinned", "none"), ("window-open", "none"),
                                          (MARKED, "marked"), (WHOLE, "whole")])
def test_the_daemon_taking_its_board_back_at_each_boundary(tmp_path, daemons, phase, leaves):
    """`systemctl stop jetbench` while measure borrows the board, at each boundary: measure is
    interrupted (130) and puts its clocks back, then the daemon restores the board and exits."""
    from helpers.daemons import board_state

    base = make_board(tmp_path, "nano")
    before = board_state(base)
    d = daemons(tmp_path, base)
    out = tmp_path / "out"
    r = interrupted_run(tmp_path, base, f"{phase}:revoke:{d.proc.pid}", "measure", "--freq",
                        "400MHz", *CMD, "--out", str(out))
    assert r.returncode == 130, r.stderr
    assert "daemon is stopping" in r.stderr and "Traceback" not in r.stderr, r.stderr
    # its own writes undone, the daemon's pin under them left for the daemon to restore
    assert "\ninterrupted\n  clocks: put back to the earlier jetbench state" in r.stderr, r.stderr
    assert d.proc.wait(timeout=60) == 0, d.log_path.read_text()  # it stops of its own accord
    d.close()
    log = d.log_path.read_text()
    assert "taking the board back" in log and "Traceback" not in log, log
    assert "still holds its lease" not in log, log  # measure had put its clocks back first
    if leaves == "none":
        assert entries(out) == []
    else:
        doc = whole_result(out)
        assert doc["settings"]["applied"]["gpu_hz"] == 384_000_000  # what measure pinned
        assert doc.get("interrupted") == ("lease revoked" if leaves == "marked" else None)
    assert not (base / JOURNAL).exists()
    assert diff(before, board_state(base)) == []
