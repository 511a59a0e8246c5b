"""jetbench's processes seen from outside: a measure started and waited for on events, a
process stopped by SIGSTOP."""

from __future__ import annotations

import subprocess
import sys
import time

from conftest import jetbench_env, sigint_as_on_a_terminal

FAST = ["--model", "jb_tinynet:tiny", "--input-shape", "3,16,16", "--iterations", "2",
        "--warmup", "0", "--device", "cpu"]


def start_measure(tmp_path, base, *extra):
    return subprocess.Popen(
        [sys.executable, "-m", "jetbench.cli.main", "--root", str(base), "measure", *FAST,
         "--model", "jb_tinynet:marked", "--freq", "690MHz", "--duration", "60",
         "--out", str(tmp_path / "out"), *extra],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=jetbench_env(),
        preexec_fn=sigint_as_on_a_terminal)


def wait_for_pin(proc, base, timeout=120):
    """Until the clocks are pinned (the journal exists)."""
    journal = base / "var/lib/jetbench/journal.json"
    deadline = time.monotonic() + timeout
    while not journal.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "measure never pinned the clocks"
        time.sleep(0.02)


def wait_for_window(proc, base, tmp_path, timeout=120):
    """Until the clocks are pinned and the network runs (jb_tinynet:marked leaves a file at
    its first inference): an event, not a guess at how long loading torch takes."""
    wait_for_pin(proc, base, timeout)
    deadline = time.monotonic() + timeout
    while not (tmp_path / "inference.mark").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the network never ran"
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()


def is_stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"
