"""Shared fixtures: simulated boards in tmp_path, tree snapshots, the CLI."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest

REPO = Path(__file__).resolve().parent.parent

# The suite starts hundreds of Python processes (every CLI run, daemon, sampler child): with
# PYTHONDONTWRITEBYTECODE set (this machine sets it for every shell), each compiles jetbench's
# ~140 modules from source again (`info` 0.35 s of CPU instead of 0.25 s, a short `measure`
# 0.9 s instead of 0.7 s, measured 2026-11-27), and each xdist worker rewrites every test
# module's asserts again. Bytecode is written for this session and what it starts (in the
# ignored __pycache__ folders, as Python does by default).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
SIM_BOARDS = ["tx1-r24", "tx1", "nano", "tx2", "xavier-agx", "xavier-nx", "orin-agx",
              "orin-agx-jp5", "orin-nano", "orin-agx-jp7", "orin-nano-super", "thor"]


# Every wait in the suite is for an event; its bound only says when to give up, so it is
# generous for a loaded 2-core machine (TESTING.md's stress run: four CPU burners beside the
# suite). JETBENCH_TEST_BOUND_SCALE multiplies every bound, for a slower or busier machine.
BOUND_SCALE = float(os.environ.get("JETBENCH_TEST_BOUND_SCALE") or 1.0)
WAIT_BOUND_S = 60.0  # a daemon's pass, a put-back, a lease ending: each takes well under 1 s


def bound_s(seconds: float = WAIT_BOUND_S) -> float:
    """A failure bound in seconds, scaled for the machine (JETBENCH_TEST_BOUND_SCALE)."""
    return seconds * BOUND_SCALE


def wait_until(predicate: Callable[[], object], timeout: float = WAIT_BOUND_S,
               step: float = 0.05) -> bool:
    """Poll `predicate` until it holds (True) or the scaled bound passes (its last answer)."""
    end = time.monotonic() + bound_s(timeout)
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def make_board(tmp_path: Path, key: str, power_mode: Optional[int] = None) -> Path:
    """A simulated board's tree in tmp_path (KEY, or KEY-MODE started in nvpmodel mode MODE)."""
    from jetbench.sim.create import create_board

    path = tmp_path / (key if power_mode is None else f"{key}-{power_mode}")
    create_board(key, path, power_mode=power_mode)
    return path


def make_generic_host(base: Path) -> Path:
    """A PC's cpufreq, one policy, no device tree: what jetbench calls a generic host."""
    pol = base / "sys/devices/system/cpu/cpufreq/policy0"
    pol.mkdir(parents=True)
    for name, value in {"related_cpus": "0 1", "scaling_available_governors":
                        "performance powersave", "cpuinfo_min_freq": "800000",
                        "cpuinfo_max_freq": "3400000", "scaling_governor": "powersave",
                        "scaling_available_frequencies": "800000 2000000 3400000",
                        "scaling_min_freq": "800000", "scaling_max_freq": "3400000",
                        "scaling_cur_freq": "800000"}.items():
        (pol / name).write_text(value + "\n")
    return base


@pytest.fixture
def tx1(tmp_path: Path) -> Path:
    return make_board(tmp_path, "tx1")


def snapshot(base: Path, exclude: tuple = ()) -> Dict[str, str]:
    """A hash of every file, link and directory under base (links by target, not followed)."""
    out: Dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, base)
            if any(rel.startswith(e) for e in exclude):
                continue
            if os.path.islink(path):
                out[rel] = "link:" + os.readlink(path)
            elif os.path.isdir(path):
                out[rel] = "dir"
            else:
                with open(path, "rb") as f:
                    out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


def diff(before: Dict[str, str], after: Dict[str, str]) -> List[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def sigint_as_on_a_terminal() -> None:
    """preexec_fn for a child that a test will Ctrl-C: the default SIGINT disposition a
    terminal's foreground process has. A test run started in the background by a script (or a
    CI runner) inherits SIGINT *ignored*, and Python then never raises KeyboardInterrupt."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    """jetbench in a real subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "jetbench.cli.main", *args],
        capture_output=True, text=True, timeout=bound_s(timeout), **kwargs,
    )


@pytest.fixture
def tiny(tmp_path, monkeypatch) -> str:
    """The tiny network (helpers/workloads.py) written here and importable: its --model."""
    from helpers.workloads import write_tiny

    write_tiny(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "jb_tinynet:tiny"


def cli(root: Path, *args: str):
    """jetbench in this process (typer's CliRunner) with --root: the result has exit_code and
    output."""
    from typer.testing import CliRunner

    from jetbench.cli.main import app

    return CliRunner().invoke(app, ["--root", str(root), *args])


def jetbench_env(**extra: str) -> Dict[str, str]:
    """The environment a jetbench subprocess gets: this checkout's package first."""
    return dict(os.environ, PYTHONPATH=str(REPO / "agent"), **extra)


def terminal_env(columns: int) -> Dict[str, str]:
    """jetbench's output as rich renders it on a terminal `columns` wide."""
    return jetbench_env(COLUMNS=str(columns), TTY_COMPATIBLE="1", FORCE_COLOR="1")


# -- a real terminal: a pty of a given width, its bytes rendered by a terminal emulator ----------
SCREEN_COLUMNS = 400  # wider than any terminal a test asks for: what passes the width shows


def on_terminal(*args: str, columns: int, cwd: Path, timeout: float = 300,
                env: Optional[Dict[str, str]] = None) -> Tuple[int, List[str]]:
    """jetbench on a pty `columns` wide (its window size set as a terminal sets it; no COLUMNS),
    rendered by pyte on a screen wider than that: a live redraw counts once, as a user sees
    it, and a line the program wrote wider than its terminal stays visible as such instead of
    being wrapped. Returns the exit code and the screen's lines (trailing blanks dropped)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    import pyte

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    base = env if env is not None else os.environ
    child_env = dict(base, TERM="xterm-256color", PYTHONPATH=os.pathsep.join(
        [str(REPO / "agent")] + ([env["PYTHONPATH"]] if env and env.get("PYTHONPATH") else [])))
    for name in ("COLUMNS", "LINES", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR"):
        child_env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "jetbench.cli.main", *args], stdin=slave,
                            stdout=slave, stderr=slave, cwd=cwd, env=child_env,
                            start_new_session=True)
    os.close(slave)
    data = bytearray()
    deadline = time.monotonic() + bound_s(timeout)
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None and not select.select([master], [], [], 0)[0]:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the pty has closed it
                break
            if not chunk:
                break
            data += chunk
        else:
            proc.kill()
            raise AssertionError(f"jetbench {' '.join(args)}: no end within {timeout} s:\n"
                                 + data.decode(errors="replace")[-2000:])
        rc = proc.wait(timeout=bound_s(30))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    screen = pyte.Screen(SCREEN_COLUMNS, max(200, data.count(b"\n") + 50))
    pyte.ByteStream(screen).feed(bytes(data))
    lines = [ln.rstrip() for ln in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    return rc, lines


# -- FUSE-served boards (tests marked `kernel`) --------------------------------------------------
class FuseBoard:
    """A simulated board served by `jetbench sim mount` in its own process."""

    def __init__(self, root: Path, log: Path, proc: subprocess.Popen):
        self.root = root
        self.log_path = log
        self.proc = proc

    def p(self, board_path: str) -> Path:
        return self.root / board_path.lstrip("/")

    def read(self, board_path: str) -> str:
        return self.p(board_path).read_text().strip()

    def write(self, board_path: str, value: object) -> None:
        """`echo VALUE > FILE`: raises the kernel's OSError when the store refuses it."""
        fd = os.open(self.p(board_path), os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, f"{value}\n".encode())
        finally:
            os.close(fd)

    def writes(self) -> List[tuple]:
        """(board path, value, 'ok' or errno name) for every write to a knob, in order."""
        lines = self.log_path.read_text().splitlines() if self.log_path.exists() else []
        return [tuple(line.split("\t")) for line in lines]

    def clear_log(self) -> None:
        self.log_path.write_text("")

    def jetbench(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return run_cli("--root", str(self.root), *args, **kwargs)


def fuse_unavailable() -> str:
    """Why FUSE-served boards cannot run here ("" when they can)."""
    import shutil

    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is absent: no FUSE here"
    if shutil.which("fusermount3") is None:
        return "fusermount3 not installed: apt-get install fuse3 (make test does it as root)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as err:
        return (f"mfusepy/libfuse3 not installed ({err}): pip install -e '.[dev]', "
                "apt-get install fuse3")
    return ""


def _unmount(mountpoint: Path) -> None:
    """Unmount if mounted, by whichever tool this machine has; never raises."""
    for cmd in (["fusermount3", "-u", "-z"], ["umount", "-l"]):
        if not os.path.ismount(mountpoint):
            return
        try:
            subprocess.run([*cmd, str(mountpoint)], capture_output=True)
        except OSError:
            continue


def _wait_mounted(mountpoint: Path, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + bound_s(timeout_s)
    marker = mountpoint / "etc/jetbench/simulated.json"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise RuntimeError(f"jetbench sim mount exited {proc.returncode}: {out}")
        if os.path.ismount(mountpoint) and marker.exists():
            return
        time.sleep(0.02)
    raise RuntimeError(f"the FUSE board did not mount within {bound_s(timeout_s)} s")


@contextlib.contextmanager
def fuse_board(base: Path, key: str, quirks: tuple = (), load: float = 0.0,
               timeout_s: float = 30.0, power_mode: Optional[int] = None) -> Iterator[FuseBoard]:
    """Mount simulated board `key` (in nvpmodel mode `power_mode`, if given) under `base`;
    always unmounted afterwards."""
    reason = fuse_unavailable()
    if reason:
        pytest.skip(reason)
    mountpoint = base / f"fuse-{key}"
    mountpoint.mkdir(parents=True)
    log = base / f"fuse-{key}.writes"
    args = [sys.executable, "-m", "jetbench.cli.main", "sim", "mount", "--board", key,
            "--load", str(load), "--write-log", str(log), str(mountpoint)]
    for name in quirks:
        args += ["--quirk", name]
    if power_mode is not None:
        args += ["--power-mode", str(power_mode)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_mounted(mountpoint, proc, timeout_s)
        yield FuseBoard(mountpoint, log, proc)
    finally:
        if proc.poll() is None:
            proc.terminate()  # SIGTERM: the server unmounts
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _unmount(mountpoint)


@pytest.fixture
def fuse_orin_nano(tmp_path: Path) -> Iterator[FuseBoard]:
    with fuse_board(tmp_path, "orin-nano") as board:
        yield board


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Say at the end of the run how many tests that need a system program were skipped and
    why: a green run that skipped them proves less than it seems."""
    for marker, what in (("kernel", "kernel tests (FUSE-served boards)"),
                         ("postgresql", "PostgreSQL tests (a shared tune study)"),
                         ("ort_gpu", "onnxruntime-gpu tests (the real wheel)")):
        skipped = [r for r in terminalreporter.stats.get("skipped", [])
                   if marker in getattr(r, "keywords", {})]
        if not skipped:
            continue
        reasons = sorted({str(r.longrepr[2]) if isinstance(r.longrepr, tuple)
                          else str(r.longrepr) for r in skipped})
        terminalreporter.write_line(f"{len(skipped)} {what} were skipped: {'; '.join(reasons)}")


@pytest.fixture
def started():
    """Daemons (test_daemon_service.Daemon) a test started, killed whatever happens to it."""
    daemons: List = []
    yield daemons
    for d in daemons:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
        d.close()


_FROZEN_MODULES = [0]  # len(sys.modules) when the heap was last frozen


def _freeze_heap() -> None:
    gc.collect()
    gc.freeze()
    _FROZEN_MODULES[0] = len(sys.modules)


def pytest_collection_finish(session) -> None:
    """What collection imported (torch, onnxruntime, optuna, every test module: about 170,000
    objects) is frozen out of the garbage collector's sight (Python's gc.freeze): a full
    collection in a worker scanned it all, 0.17 s each, and the code under test runs one after
    each network it times (workload/timing, run/timing.py), besides the automatic ones: a
    tenth of the workers' CPU. What tests make after this is collected as before."""
    _freeze_heap()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    """Frozen again after a test that imported modules (a runtime's, an exporter's: imported
    where first used, 100,000 objects more): once per worker each, not after every test."""
    if len(sys.modules) > _FROZEN_MODULES[0] + 20:
        _freeze_heap()


def pytest_collection_modifyitems(config, items) -> None:
    """The tests marked `long` (a minute or so, mostly waiting on windows and daemons) spread
    over the first half of the run, one every few dozen tests: begun early, so the workers end
    together, and not all at once, so the other workers keep the two cores busy while they
    wait. (All first, the three workers waited together for the first two minutes with a
    core idle; and pytest-xdist's default hand-out of consecutive chunks gave every long test
    to one worker, which ran on alone for 100 s at the end: the Makefile sends one test at a
    time, --maxschedchunk 1.)"""
    long = [item for item in items if item.get_closest_marker("long") is not None]
    rest = [item for item in items if item.get_closest_marker("long") is None]
    step = max(1, len(rest) // (2 * max(1, len(long))))
    ordered = []
    for k, item in enumerate(long):
        ordered += [item, *rest[k * step:(k + 1) * step]]
    items[:] = ordered + rest[len(long) * step:]
