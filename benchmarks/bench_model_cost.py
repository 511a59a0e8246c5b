"""What counting a network's multiply-accumulates costs a process (workload/macs.py), the way
each measure and time of a torch network pays it once: the first count in a fresh interpreter,
torch already imported, the CPU time of the count alone.

- a small network (tests/helpers' tiny conv net, 16x16) counted on a CPU copy (as now) against
  on a meta copy (as before: CPU_PASS_MACS=0), whose first operator imports torch._dynamo;
- ResNet-18 at 3x32x32 (counted on meta either way): the meta copy made of empty tensors (as
  now) against a deep copy of the weights moved to meta (as before).

Each case in its own subprocess, the cases interleaved, ROUNDS rounds; median and range.

    python benchmarks/bench_model_cost.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from typing import Dict, List

CASES = {
    "tiny, CPU copy (now)": ("tiny", None, False),
    "tiny, meta copy (before)": ("tiny", 0, False),
    "resnet18 3x32x32, empty meta tensors (now)": ("resnet18", None, False),
    "resnet18 3x32x32, weights deep-copied (before)": ("resnet18", None, True),
}

CHILD = r"""
import copy, sys, time
import torch
import jetbench.workload.macs as macs
from jetbench.workload.registry import get_spec
name, threshold, deep = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if threshold != "None":
    macs.CPU_PASS_MACS = int(threshold)
if deep:
    macs._copy_to = lambda model, device: copy.deepcopy(model).to(device)
if name == "tiny":
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(8 * 14 * 14, 10))
    shape = (3, 16, 16)
else:
    net, shape = get_spec("resnet18").build(0), (3, 32, 32)
if name == "resnet18":  # meta's first call paid beforehand: the copy alone is compared
    macs.model_cost(torch.nn.Sequential(torch.nn.ReLU()), (1, 1))
t = time.process_time()
cost = macs.model_cost(net, shape)
print(time.process_time() - t, cost.macs_per_image)
"""


def run(name: str, threshold, deep: bool) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, name, str(threshold), "1" if deep else "0"],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0])


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    seconds: Dict[str, List[float]] = {case: [] for case in CASES}
    for _ in range(args.rounds):
        for case, spec in CASES.items():
            seconds[case].append(run(*spec))
    print(f"{'count (CPU s, first in a process)':50} {'median':>8} {'min..max':>16}")
    for case, values in seconds.items():
        print(f"{case:50} {statistics.median(values):8.3f} "
              f"{min(values):7.3f}..{max(values):.3f}")
    for a, b in ((0, 1), (2, 3)):
        now, before = list(CASES)[a], list(CASES)[b]
        ratio = statistics.median(seconds[before]) / statistics.median(seconds[now])
        print(f"{before.split(',')[0]}: {ratio:.0f}x less CPU now")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
