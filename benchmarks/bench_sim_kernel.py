"""The file-based simulated kernel's pass (sim/file_kernel.py), now judged by sim/attributes.py's
model, against the kernel before (aea69d1, its own acceptance checks), side by side in one
process: interleaved repeats of 200 passes per board, median and spread. Run from the repo."""

import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jetbench.sim.create import create_board
from jetbench.sim.file_kernel import FileKernel

BEFORE = "aea69d1"


def _old_kernel():
    src = subprocess.run(["git", "show", f"{BEFORE}:agent/jetbench/sim/file_kernel.py"],
                         capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "kernel_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("jetbench.sim.kernel_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.FileKernel


def _pass_ms(kernel_cls, base, n=200):
    k = kernel_cls(base)
    k.sync()
    t = time.perf_counter()
    for _ in range(n):
        k.sync()
    return (time.perf_counter() - t) / n * 1e3


def main():
    old_cls = _old_kernel()
    print("board        before (ms/pass)   now (ms/pass)   now/before (median, min..max)")
    for board in ("tx1", "nano", "orin-agx-jp7", "thor"):
        base = Path(tempfile.mkdtemp()) / board
        create_board(board, base)
        old, new = [], []
        for _ in range(5):  # interleaved repeats
            old.append(_pass_ms(old_cls, base))
            new.append(_pass_ms(FileKernel, base))
        ratios = [b / a for a, b in zip(old, new)]
        print(f"{board:12} {statistics.median(old):8.3f}          {statistics.median(new):8.3f}"
              f"        {statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f})")


if __name__ == "__main__":
    main()
