"""The sampler's cost to a GIL-holding workload (issue 64): `jetbench measure` with
`--meter ina3221?interval=1ms` (and at the sensor's own refresh, the default) against
`--meter none`, as interleaved pairs of fresh CLI runs, and the ratio of their img/s.

Run on an idle machine: .venv/bin/python benchmarks/bench_sampler_cost.py [--pairs 7]
    [--duration 4] [--board orin-nano] [--simulated | --fuse] [--before TREE]
(--before TREE: also the 1 kHz arm with the jetbench of another checkout's agent/ directory,
e.g. a `git worktree` at the commit before a change, interleaved in the same rounds.)
--where N: instead, where the time goes (PROBE below), N interleaved rounds.

The workload is a network whose forward pass is a fixed ~3 ms of pure Python work (it holds
the GIL, as a Python-heavy network at batch 1 does; fixed work, not a fixed time, so that
what the sampler takes from it shows). The board is an Orin Nano tree without the simulator's
marker (no simulated kernel runs beside jetbench: the rails are still files, as a tree copied
off a board), unless --simulated (the file-based simulated kernel runs beside jetbench) or
--fuse (the board served through FUSE by `jetbench sim mount`: every read a request to the
server process, as a kernel answers it; the server's CPU is the host's, not a board's). Each
run is its own `jetbench measure` process; the order inside a pair alternates so that neither
arm always goes first. Printed: each pair's ratio
(sampled / none), their median and spread, and the load average before and after.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "agent"))

from jetbench.sim.create import create_board  # noqa: E402

# A fixed amount of pure-Python work per forward (~3 ms on this machine's cores), not a fixed
# time: a forward that spins until 3 ms have passed takes 3 ms whatever is taken from it, and
# would hide the very cost measured here.
SPIN = """
import torch

class _Spin(torch.nn.Module):
    def forward(self, x):
        n = 0
        for k in range(100000):
            n += k & 7
        return x.mean() + 0.0 * n

def spin():
    return _Spin()
"""


# Where the time goes (issue 64, item 1), run under a given checkout's jetbench: a sampler at
# 1 kHz beside a 3 s pure-Python spin in this process; printed: the child's CPU per read, this
# process's share (its collector), the spin's involuntary context switches per second (a
# thread that preempts it on its own core shows here), and the child threads' scheduling
# policies at the end (0 normal, 1 SCHED_FIFO).
PROBE = """
import glob, os, sys, time, tempfile
from pathlib import Path
from jetbench.sim.create import create_board
from jetbench.hw.fs import Root
from jetbench.hw.board import detect
from jetbench.hw.meters.ina3221 import Ina3221Source
from jetbench.sampling.sampler_process import ProcessSampler

base = Path(tempfile.mkdtemp())
create_board("orin-nano", base / "b")
(base / "b/etc/jetbench/simulated.json").unlink()
root = Root(base / "b")
board = detect(root)
src = Ina3221Source(root, board.rails, board.total_rail)

def child_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def switches():
    for line in open(f"/proc/self/task/{os.getpid()}/status"):
        if line.startswith("nonvoluntary_ctxt_switches"):
            return int(line.split()[1])

sampler = ProcessSampler([src], interval_s=0.001).start() if sys.argv[1] == "1k" else None
time.sleep(0.5)
c0 = child_cpu(sampler.proc.pid) if sampler else 0.0
p0, s0, w0 = time.process_time(), switches(), time.perf_counter()
n, end = 0, time.perf_counter() + 3.0
while time.perf_counter() < end:
    n += 1
w1, s1, p1 = time.perf_counter(), switches(), time.process_time()
policies = []
if sampler:
    c1 = child_cpu(sampler.proc.pid)
    for stat in glob.glob(f"/proc/{sampler.proc.pid}/task/*/stat"):
        policies.append(int(open(stat).read().rsplit(")", 1)[1].split()[38]))
    reads = sampler._slots[0].state.reads
    sampler.stop()
    print(f"child {1e6 * (c1 - c0) / ((w1 - w0) * 1000):.0f} us/read, "
          f"{100 * (c1 - c0) / (w1 - w0):.1f}% of a core; ", end="")
print(f"this process {100 * (p1 - p0) / (w1 - w0):.1f}% of a core; spin "
      f"{n / (w1 - w0) / 1e6:.2f} M loops/s, {(s1 - s0) / (w1 - w0):.0f} involuntary "
      f"switches/s; policies {sorted(policies)}")
"""


def probe(agent: Path, arm: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(agent))
    proc = subprocess.run([sys.executable, "-c", PROBE, arm], capture_output=True, text=True,
                          env=env, timeout=120)
    return (proc.stdout or proc.stderr).strip().splitlines()[-1]


def where_the_time_goes(rounds: int) -> None:
    trees = [("now", REPO / "agent")]
    if "--before" in sys.argv:
        trees.append(("before", Path(_arg("--before", ""))))
    print(f"## Where the time goes: {rounds} interleaved rounds of a 3 s spin")
    for k in range(rounds):
        print(f"round {k + 1}: none: {probe(REPO / 'agent', 'none')}", flush=True)
        for name, agent in trees:
            print(f"round {k + 1}: 1 kHz, {name}: {probe(agent, '1k')}", flush=True)


def _arg(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def run_once(tree: Path, meter: str, duration_s: float, out: Path, work: Path,
             agent: Path = REPO / "agent") -> Tuple[float, str]:
    """img/s, and for a sampled run its total channel's coverage and samples per second."""
    # one hash seed for every run: a process's speed also depends on its random layout
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(agent), str(work)]),
               JETBENCH_ROOT=str(tree), PYTHONHASHSEED="0")
    cmd = [sys.executable, "-m", "jetbench.cli.main", "measure", "--model", "jb_spin:spin",
           "--input-shape", "3,8,8", "--device", "cpu", "--iterations", "2",
           "--duration", f"{duration_s}s", "--warmup", "0.5s", "--meter", meter,
           "--out", str(out), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"measure failed ({proc.returncode}): {proc.stderr[-2000:]}")
    doc = json.loads(proc.stdout)
    result = (doc["results"] if isinstance(doc, dict) and "results" in doc else doc)[0]
    power = result.get("power") or {}
    channels = [c for c in power.get("channels") or [] if c.get("name") == "VDD_IN"]
    window_s = (power.get("window") or {}).get("duration_s")
    seen = ""
    if channels and window_s:
        seen = (f" (VDD_IN coverage {channels[0]['coverage']:.1%}, "
                f"{channels[0]['samples'] / window_s:.0f} samples/s)")
    return float(result["throughput"]["images_per_s"]), seen


def main() -> None:
    if "--where" in sys.argv:
        where_the_time_goes(int(_arg("--where", "3")))
        return
    pairs = int(_arg("--pairs", "7"))
    duration_s = float(_arg("--duration", "4"))
    key = _arg("--board", "orin-nano")
    # (meter, label, the agent/ tree that runs it)
    arms = [("ina3221?interval=1ms", "1 kHz", REPO / "agent"),
            ("ina3221", "sensor's refresh", REPO / "agent")]
    if "--before" in sys.argv:
        arms.append(("ina3221?interval=1ms", "1 kHz, before", Path(_arg("--before", ""))))
    kernel = " (simulated kernel)" if "--simulated" in sys.argv else ""
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f} at start; {pairs} interleaved pairs of {duration_s:g} s "
          f"windows per arm, board {key}{kernel}")
    with tempfile.TemporaryDirectory(prefix="jetbench-bench-") as base:
        work = Path(base)
        (work / "jb_spin.py").write_text(SPIN)
        tree = work / key
        server = None
        if "--fuse" in sys.argv:
            tree.mkdir()
            server = subprocess.Popen(
                [sys.executable, "-m", "jetbench.cli.main", "sim", "mount", "--board", key,
                 str(tree)], env=dict(os.environ, PYTHONPATH=str(REPO / "agent")))
            deadline = time.monotonic() + 60
            while not (tree / "proc").exists() and time.monotonic() < deadline:
                time.sleep(0.2)
        else:
            create_board(key, tree)
            if "--simulated" not in sys.argv:
                (tree / "etc/jetbench/simulated.json").unlink()
        ratios = {label: [] for _, label, _ in arms}
        for k in range(pairs):
            for meter, label, agent in arms:
                order = [("none", "none", REPO / "agent"), (meter, label, agent)]
                if k % 2:
                    order.reverse()
                got, seen = {}, {}
                for m, name, tree_agent in order:
                    got[name], seen[name] = run_once(tree, m, duration_s,
                                                     work / f"out-{k}-{name}", work, tree_agent)
                ratios[label].append(got[label] / got["none"])
                print(f"pair {k + 1} {label}: none {got['none']:.1f} img/s, sampled "
                      f"{got[label]:.1f} img/s{seen[label]}, ratio {ratios[label][-1]:.3f}",
                      flush=True)
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        print()
        print("| arm | ratios (sampled / none), in order | median | min .. max |")
        print("|---|---|---|---|")
        for label, values in ratios.items():
            print(f"| {label} | {', '.join(f'{r:.3f}' for r in values)} | "
                  f"{statistics.median(values):.3f} | {min(values):.3f} .. {max(values):.3f} |")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
