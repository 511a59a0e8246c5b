"""A tiny network written into a test's directory (jb_tinynet), quick measure requests, board
snapshots without the rails the power model keeps changing."""

from pathlib import Path

from jetbench.run.request import MeasureRequest
from jetbench.sim.boards import get as sim_board

from conftest import snapshot

TINY = '''
import torch

def tiny():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(8 * 14 * 14, 10))

class _Greedy(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] >= 4:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return x.mean()

def greedy():
    return _Greedy()

class _Marked(torch.nn.Module):
    """tiny(), leaving `inference.mark` in the working directory once it runs: an event a
    test can wait on instead of guessing how long torch takes to load."""
    def __init__(self):
        super().__init__()
        self.net = tiny()
    def forward(self, x):
        import os
        if not os.path.exists("inference.mark"):
            open("inference.mark", "w").close()
        return self.net(x)

def marked():
    return _Marked()
'''


def write_tiny(directory: Path) -> None:
    (directory / "jb_tinynet.py").write_text(TINY)


def quick(out: Path, **kw) -> MeasureRequest:
    base = dict(models=("jb_tinynet:tiny",), input_shape=(3, 16, 16), iterations=2,
                duration_s=0.3, warmup_s=0.0, device="cpu", out_dir=out)  # production thresholds
    base.update(kw)
    return MeasureRequest(**base)


def board_snapshot(base: Path, key: str):
    """The tree minus the INA3221 rail files the power model keeps changing."""
    rails = tuple(ina.device_dir.lstrip("/") for ina in sim_board(key).inas)
    return {k: v for k, v in snapshot(base, exclude=("var",)).items()
            if not k.startswith(rails)}
