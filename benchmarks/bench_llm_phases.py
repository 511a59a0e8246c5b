"""`daemon --tune --phases` against issue 59's target: a simulated Orin Nano (15 W mode) serving
`sim app --llm` (Llama 3.2 1B fp16, prompts of 1536 tokens, 128 generated, a request every
1/DEMAND s): decode tokens per joule at least 1.3x those at the power mode's max clocks, with
the time to first token's p99 within 10% of its value there.

Two runs of RUN_S seconds, each on a fresh board, each with the daemon holding `maxperf`:
- `max`: the daemon only holds the max clocks (no tuning);
- `phases`: `--tune --phases prefill:vllm:prompt_tokens_total,decode:vllm:generation_tokens_total
  --constraint demand>=0.95 --tune-window WINDOW`.

WARMUP_S should cover the controllers' search (a prefill window of WINDOW fills at a few
requests' prefills: the search takes minutes); the time until every phase holds and the TTFT
p99 over the whole run, probes included, are printed too.

Measured here, not by the daemon (its own per-phase figures are printed beside): the server
runs in this process, and logs each engine step (prefill chunk or decode step, its start and
end); a thread reads the board's total (VDD_IN, as measure reads it) every 10 ms. After
WARMUP_S, a phase's tokens per joule are its tokens over the energy of the time its steps ran
(the trapezoid of the board's power over each step), and the time to first token is each
request's exact one (arrival to the end of its prefill). All of it simulated.

    python benchmarks/bench_llm_phases.py [--run-s 240] [--warmup-s 90] [--window 2s]
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.ownership.client import request
from jetbench.sim.create import create_board
from jetbench.sim.wall import BoardTotal
from jetbench.workload.sim_app import parse_demand, serve_metrics
from jetbench.workload.sim_llm_app import SimLlmApp

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
PHASES = "prefill:vllm:prompt_tokens_total,decode:vllm:generation_tokens_total"


class LoggedApp(SimLlmApp):
    """The server, logging each step as it ends: (kind, start, end, tokens)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps: List[Tuple[str, float, float, int]] = []
        self.arrivals: List[float] = []

    def _finish(self, step) -> None:
        if step.kind == "prefill" and step.request.prompt_left == self.prompt_tokens:
            self.arrivals.append(step.request.arrival)
        tokens = step.tokens if step.kind == "decode" else step.tokens
        self.steps.append((step.kind, step.start, step.end, tokens))
        super()._finish(step)


class PowerTrace:
    """The board's total every 10 ms, in a thread; energy over any span."""

    def __init__(self, base: Path):
        self.board = BoardTotal(base)
        self.t: List[float] = []
        self.w: List[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.board.open()
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            try:
                watts = self.board.read_w()
            except OSError:
                continue
            if watts is not None:
                self.t.append(time.monotonic())
                self.w.append(watts)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.board.close()

    def joules(self, t0: float, t1: float) -> Optional[float]:
        """The energy over [t0, t1] (the power held at each reading until the next)."""
        i = bisect.bisect_right(self.t, t0) - 1
        if i < 0 or t1 > self.t[-1]:
            return None
        total, t = 0.0, t0
        while t < t1:
            nxt = self.t[i + 1] if i + 1 < len(self.t) else t1
            end = min(nxt, t1)
            total += self.w[i] * (end - t)
            t, i = end, i + 1
        return total


def run(mode: str, run_s: float, warmup_s: float, window: str, demand: str) -> Dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix=f"jb-llm-{mode}-"))
    base = tmp / "board"
    create_board("orin-nano", base)
    root = Root(str(base))
    app = LoggedApp(root, detect(root), "llama-3.2-1b", "fp16", parse_demand(demand))
    server = serve_metrics(app.registry, 0)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    sock = tmp / "d.sock"
    args = [sys.executable, "-m", "jetbench", "--root", str(base), "daemon", "--socket",
            str(sock), "--profile", "maxperf", "--interval", "1s"]
    if mode == "phases":
        args += ["--tune", "--throughput-from", f"prometheus:{url}#vllm:generation_tokens_total",
                 "--phases", PHASES, "--constraint", "demand>=0.95", "--tune-window", window]
    log = open(tmp / "daemon.log", "w")
    app.start()  # the counters answer before the daemon checks them
    daemon = subprocess.Popen(args, env=ENV, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        if sock.exists():
            try:
                if request(sock, "status", timeout_s=5).get("ok", True) is not False:
                    break
            except Exception:
                pass
        time.sleep(0.1)
    power = PowerTrace(base)
    power.start()
    t0 = time.monotonic()
    held_at: Optional[float] = None  # when every phase's controller first held a point
    while time.monotonic() < t0 + run_s:
        time.sleep(2.0)
        phases = (request(sock, "status", timeout_s=10).get("tune") or {}).get(
            "workload_phases") or {}
        if held_at is None and phases and all(p.get("state") == "holding"
                                              for p in phases.values()):
            held_at = time.monotonic() - t0
    status = request(sock, "status", timeout_s=10)
    cpu = _cpu_s(daemon.pid)
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=60)
    app.stop()
    power.stop()
    server.shutdown()
    since = t0 + warmup_s
    out: Dict[str, object] = {"mode": mode, "daemon_cpu_s": cpu, "all_held_at_s": held_at}
    for kind in ("prefill", "decode"):
        tokens = joules = seconds = 0.0
        for k, start, end, n in app.steps:
            if k != kind or start < since:
                continue
            j = power.joules(start, end)
            if j is None:
                continue
            tokens += n if kind == "decode" else n
            joules += j
            seconds += end - start
        out[f"{kind}_tokens_per_j"] = tokens / joules if joules else None
        out[f"{kind}_tokens_per_s"] = tokens / seconds if seconds else None
        out[f"{kind}_s"] = seconds
    every = sorted(app.ttfts_s)
    out["ttft_p99_whole_run_s"] = every[min(len(every) - 1, int(0.99 * len(every)))] \
        if every else None
    ttfts = [ttft for arrival, ttft in zip(app.arrivals, app.ttfts_s) if arrival >= since]
    ttfts.sort()
    out["requests"] = len(ttfts)
    out["ttft_p50_s"] = statistics.median(ttfts) if ttfts else None
    out["ttft_p99_s"] = ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))] if ttfts else None
    everything = power.joules(since, t0 + run_s - 0.1)
    generated = sum(n for k, s, e, n in app.steps if k == "decode" and s >= since)
    out["all_generated_tokens_per_j"] = generated / everything if everything else None
    tune = status.get("tune") or {}
    out["daemon_phases"] = {n: {"point_hz": p.get("point_hz"), "items_per_j": p.get("items_per_j"),
                                "state": p.get("state")}
                            for n, p in (tune.get("workload_phases") or {}).items()}
    log.close()
    return out


def _cpu_s(pid: int) -> Optional[float]:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run-s", type=float, default=240.0)
    parser.add_argument("--warmup-s", type=float, default=90.0)
    parser.add_argument("--window", default="2s")
    parser.add_argument("--demand", default="0.125")
    args = parser.parse_args()
    results = [run(mode, args.run_s, args.warmup_s, args.window, args.demand)
               for mode in ("max", "phases")]
    print(json.dumps(results, indent=1))
    base, tuned = results
    ratio = tuned["decode_tokens_per_j"] / base["decode_tokens_per_j"]  # type: ignore[operator]
    ttft = tuned["ttft_p99_s"] / base["ttft_p99_s"]  # type: ignore[operator]
    print(f"decode tokens/J: {base['decode_tokens_per_j']:.3f} at max, "
          f"{tuned['decode_tokens_per_j']:.3f} tuned per phase: {ratio:.2f}x (target >= 1.3x)")
    print(f"TTFT p99: {base['ttft_p99_s']:.3f} s at max, {tuned['ttft_p99_s']:.3f} s tuned: "
          f"{100 * (ttft - 1):+.1f}% (target within 10%)")


if __name__ == "__main__":
    main()
