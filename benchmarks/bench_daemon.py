"""Daemon benchmarks: resident memory (budget: < 60 MB, no torch), idle CPU (budget: < 1% of a
core), CPU per check, and control-socket round trips.
Run: .venv/bin/python benchmarks/bench_daemon.py [--idle 30] [--board orin-agx]

The daemon runs as a real subprocess (`jetbench daemon`) on a simulated board in a temporary
directory, holding `maxperf`, with the Prometheus endpoint on loopback. Two set-ups:
- "daemon only": `--no-sim-kernel`, the simulated kernel runs in its own process
  (`jetbench sim run`), so the figures are the daemon's own, as on a board;
- "sim in-process": the default on a simulated board, the simulated kernel's thread (a pass
  every 20 ms) inside the daemon: what `jetbench daemon` costs on a demo tree, not on a board.
CPU is read from /proc/PID/stat (utime + stime), memory from /proc/PID/status (VmRSS, VmHWM).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))

from jetbench.ownership.client import request  # noqa: E402
from jetbench.sim.create import create_board  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def memory_mb(pid: int) -> Dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024
    return out


def heavy_libraries(pid: int) -> List[str]:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return sorted({lib for lib in ("torch", "numpy", "matplotlib", "rich") if f"/{lib}/" in maps})


class Run:
    def __init__(self, base: Path, sock: Path, interval: str, sim_in_process: bool):
        self.sim: Optional[subprocess.Popen] = None
        args = [sys.executable, "-m", "jetbench.cli.main", "--root", str(base), "daemon",
                "--profile", "maxperf", "--socket", str(sock), "--interval", interval,
                "--metrics", "127.0.0.1:0"]
        if not sim_in_process:
            args.append("--no-sim-kernel")
            self.sim = subprocess.Popen([sys.executable, "-m", "jetbench.cli.main", "sim", "run",
                                         str(base)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=env)
        self.sock = sock
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                if request(sock, "status", timeout_s=5)["ok"]:
                    return
            except Exception:
                time.sleep(0.1)
        raise RuntimeError("the daemon did not come up")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        if self.sim is not None:
            self.sim.send_signal(signal.SIGINT)
            self.sim.wait(timeout=30)
        return code


def measure(board: str, idle_s: float, sim_in_process: bool, work: Path) -> Dict[str, object]:
    base = work / f"{board}-{int(sim_in_process)}"
    create_board(board, base)
    sock = work / f"{board}-{int(sim_in_process)}.sock"
    run = Run(base, sock, "5s", sim_in_process)
    pid = run.proc.pid
    try:
        status = request(sock, "status")
        port = status["metrics"].rsplit(":", 1)[1]
        # Exercise everything once (imports of prometheus-client, the HTTP server...).
        for _ in range(3):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
            request(sock, "readings")
        time.sleep(1.0)
        # Idle: nobody talks to it; it reads the clocks back every 5 s (the default).
        c0, t0 = cpu_s(pid), time.monotonic()
        time.sleep(idle_s)
        idle = (cpu_s(pid) - c0) / (time.monotonic() - t0)
        mem = memory_mb(pid)
        rtts = []
        for _ in range(200):
            t = time.perf_counter()
            request(sock, "status")
            rtts.append((time.perf_counter() - t) * 1e3)
        scrape = []
        for _ in range(50):
            t = time.perf_counter()
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
            scrape.append((time.perf_counter() - t) * 1e3)
        after = memory_mb(pid)
        libs = heavy_libraries(pid)
    finally:
        code = run.stop()
    return {"idle_cpu_pct": idle * 100, "rss_mb": mem["VmRSS"], "rss_after_load_mb":
            after["VmRSS"], "peak_mb": after["VmHWM"], "anon_mb": after.get("RssAnon"),
            "status_ms_p50": statistics.median(rtts), "status_ms_p99":
            sorted(rtts)[int(len(rtts) * 0.99) - 1], "scrape_ms_p50": statistics.median(scrape),
            "libs": libs, "exit": code}


def cpu_per_check(board: str, work: Path, seconds: float = 10.0) -> float:
    """Process CPU per check, daemon only, at a 50 ms interval (checks dominate the CPU)."""
    base = work / f"{board}-fast"
    create_board(board, base)
    sock = work / f"{board}-fast.sock"
    run = Run(base, sock, "50ms", sim_in_process=False)
    try:
        time.sleep(1.0)
        n0, c0 = request(sock, "status")["counters"]["checks"], cpu_s(run.proc.pid)
        time.sleep(seconds)
        n1, c1 = request(sock, "status")["counters"]["checks"], cpu_s(run.proc.pid)
    finally:
        run.stop()
    return (c1 - c0) / (n1 - n0) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--board", default="orin-agx")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle measured")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jbd") as tmp:
        work = Path(tmp)
        print(f"board {args.board}, idle window {args.idle:g} s, interval 5 s, "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        for label, in_process in (("daemon only", False), ("sim in-process", True)):
            r = measure(args.board, args.idle, in_process, work)
            print(f"{label:15} idle CPU {r['idle_cpu_pct']:.3f}% of a core | RSS {r['rss_mb']:.1f}"
                  f" MB (after 200 status + 53 scrapes {r['rss_after_load_mb']:.1f} MB, peak "
                  f"{r['peak_mb']:.1f} MB, anon {r['anon_mb']:.1f} MB) | status p50 "
                  f"{r['status_ms_p50']:.2f} ms p99 {r['status_ms_p99']:.2f} ms | scrape p50 "
                  f"{r['scrape_ms_p50']:.2f} ms | heavy libs loaded: {r['libs'] or 'none'} | "
                  f"exit {r['exit']}")
        print(f"CPU per check (read back, plan, thermal, rails): "
              f"{cpu_per_check(args.board, work):.2f} ms")


if __name__ == "__main__":
    main()
