"""`jetbench daemon` as a real subprocess, and the board's state without its moving rails."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional

from jetbench.ownership.client import request

from conftest import REPO, bound_s, snapshot

# Rail sensor files follow the simulated power model while the simulated kernel runs: they are
# readings, not state jetbench changes, so byte-for-byte comparisons leave them out.
RAIL_FILES = ("in_power", "in_current", "in_voltage", "curr", "power")

# What a daemon with --tune exports beyond the others: the dashboard's --tune panels may query
# these (test_daemon_energy.py), and a tuning daemon exports them all (test_daemon_tune.py).
TUNE_METRICS = {"jetbench_tune_phase", "jetbench_tune_items_per_joule",
                "jetbench_tune_items_per_second", "jetbench_tune_point_hz",
                "jetbench_tune_energy_saved_joules_total",
                "jetbench_tune_constraint_violations_total", "jetbench_tune_windows_total"}


def board_state(base: Path) -> Dict[str, str]:
    snap = snapshot(base, exclude=("var",))
    return {k: v for k, v in snap.items()
            if not (os.path.basename(k).startswith(RAIL_FILES) and "input" in k)}


class Daemon:
    """A daemon subprocess with a notify socket (abstract namespace, as systemd may use)."""

    def __init__(self, tmp_path: Path, base: Path, *args: str, interval: str = "0.3s",
                 watchdog_usec: Optional[int] = None, name: str = "d", sock: str = ""):
        self.base = base
        self.sock_path = tmp_path / f"{sock or name}.sock"
        self.log_path = tmp_path / f"{name}.log"
        self.notify_name = f"jbtest-{uuid.uuid4().hex}"
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind("\0" + self.notify_name)
        self.notify.settimeout(0.1)
        self.messages: List[str] = []
        self._arrived = threading.Condition()
        self._closed = False
        env = dict(os.environ, NOTIFY_SOCKET="@" + self.notify_name)
        env.pop("WATCHDOG_USEC", None)
        env.pop("WATCHDOG_PID", None)
        if watchdog_usec is not None:
            env["WATCHDOG_USEC"] = str(watchdog_usec)
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jetbench.cli.main", "--root", str(base), "daemon",
             "--socket", str(self.sock_path), "--interval", interval, *args],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
        self._listener = threading.Thread(target=self._listen, daemon=True)
        self._listener.start()

    def _listen(self) -> None:
        """Read datagrams as systemd does, all the time (an unread queue blocks the sender)."""
        while not self._closed:
            try:
                text = self.notify.recv(4096).decode()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._arrived:
                self.messages.append(text)
                self._arrived.notify_all()

    def wait_for(self, key: str, timeout: float = 30.0, after: int = 0) -> str:
        """The first message from index `after` on that has line `key`."""
        end = time.monotonic() + bound_s(timeout)
        seen = after
        with self._arrived:
            while True:
                for text in self.messages[seen:]:
                    if key in text.split("\n"):
                        return text
                seen = len(self.messages)
                if self.proc.poll() is not None and key != "STOPPING=1":
                    raise AssertionError(f"daemon exited {self.proc.returncode}: "
                                         f"{self.output()}")
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {key} within {bound_s(timeout)} s: "
                                         f"{self.messages[-5:]} {self.output()}")
                self._arrived.wait(min(left, 0.2))

    def ready(self) -> str:
        return self.wait_for("READY=1")

    def ask(self, cmd: str, **kw) -> dict:
        return request(self.sock_path, cmd, timeout_s=10, **kw)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        time.sleep(0.15)  # the listener picks up what it sent on the way out
        self.close()
        return code

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._listener.join()
        self.notify.close()
        self.log.close()

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")


def start_sim_app(base: Path, *args: str) -> tuple:
    """`jetbench sim app` on a simulated board, on a free port: (process, its URL)."""
    import re

    from conftest import jetbench_env

    proc = subprocess.Popen([sys.executable, "-m", "jetbench.cli.main", "sim", "app", str(base),
                             "--port", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=REPO, env=jetbench_env())
    line = proc.stdout.readline()
    m = re.search(r"serving (http://\S+)", line)
    assert m, line + (proc.stdout.read() if proc.poll() is not None else "")
    return proc, m.group(1)
