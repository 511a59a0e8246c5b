"""Issue 61, 3: the progress line says its times in words (`2 s elapsed, ~10 s left`: it read
`0:00:02 left 0:00:10`, elapsed then remaining), and a command's output streamed under the bar
goes through the bar's proxy onto lines of its own (it was glued to the bar)."""

from __future__ import annotations

import io
import sys

from jetbench.units import duration_text, times_text


def test_times_in_words():
    assert times_text(2.2, 9.6) == "2 s elapsed, ~10 s left"
    assert times_text(65, None) == "1 min 5 s elapsed"
    assert duration_text(3720) == "1 h 2 min" and duration_text(120) == "2 min"


def test_a_commands_output_under_a_progress_bar_goes_through_its_proxy(monkeypatch):
    """rich's live display replaces sys.stdout with a proxy whose attribute lookups reach
    the real file (its `buffer` too): bytes written there bypassed the proxy."""
    from jetbench.workload.command.run import _Sink
    from jetbench.workload.command.spec import CommandSpec

    class Proxy(io.StringIO):
        rich_proxied_file = io.TextIOWrapper(io.BytesIO())

        @property
        def buffer(self):  # as rich's FileProxy forwards it
            return self.rich_proxied_file.buffer

    proxy = Proxy()
    monkeypatch.setattr(sys, "stdout", proxy)
    sink = _Sink(CommandSpec(argv=("x",), throughput_from=None))  # type: ignore[arg-type]
    sink.write("stdout", b"processed 680582 blocks\n")
    assert proxy.getvalue() == "processed 680582 blocks\n"
    assert Proxy.rich_proxied_file.buffer.getvalue() == b""


def test_status_takes_its_socket_from_jetbench_socket(tmp_path):
    """Issue 61, 6: JETBENCH_SOCKET names the control socket for `status` and `daemon`."""
    import os
    import subprocess

    from conftest import REPO

    where = tmp_path / "nowhere.sock"
    res = subprocess.run([sys.executable, "-m", "jetbench.cli.main", "status"],
                         capture_output=True, text=True, cwd=REPO, timeout=60,
                         env=dict(os.environ, JETBENCH_SOCKET=str(where)))
    assert res.returncode != 0 and str(where) in res.stderr, res.stderr


def test_sim_app_says_what_it_served_at_exit(tmp_path):
    """Issue 61, 5: `sim app` was silent while it ran and at exit."""
    import subprocess

    from jetbench.sim.create import create_board

    from conftest import REPO

    create_board("tx1", tmp_path / "tx1")
    res = subprocess.run([sys.executable, "-m", "jetbench.cli.main", "sim", "app",
                          str(tmp_path / "tx1"), "--port", "0", "--duration", "1"],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert res.returncode == 0, res.stderr
    last = res.stdout.strip().splitlines()[-1]
    assert last.startswith("sim app: served ") and "dropped" in last and "SIMULATED" in last
