"""Which devices a multi-device run uses, and who this process is in it (pure; no torch).

    --devices 2          two ranks, on cuda:0 and cuda:1 (or two shares of the CPU cores)
    --devices 0,2        two ranks, on cuda:0 and cuda:2

torchrun and the elastic launcher tell each process its place through the environment
(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Tuple

from ..errors import UsageError

_RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class DeviceSpec:
    """`--devices`: a count, or the CUDA indices to use (one rank each)."""

    count: int
    indices: Optional[Tuple[int, ...]] = None  # None: 0..count-1

    def index(self, local_rank: int) -> int:
        return self.indices[local_rank] if self.indices else local_rank


def parse_devices(text: str) -> DeviceSpec:
    """'2' -> two devices; '0,1,2,3' -> those CUDA indices (a list always has a comma)."""
    word = text.strip()
    hint = "--devices N (a count) or --devices 0,1,2,3 (CUDA indices)"
    if "," not in word:
        if not word.isdigit() or int(word) < 1:
            raise UsageError(f"--devices {text!r}: not a device count", hint=hint)
        return DeviceSpec(int(word))
    parts = [p.strip() for p in word.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise UsageError(f"--devices {text!r}: not a list of device indices", hint=hint)
    indices = tuple(int(p) for p in parts)
    if len(set(indices)) != len(indices):
        raise UsageError(f"--devices {text!r}: a device is named twice", hint=hint)
    return DeviceSpec(len(indices), indices)


def check_gpu_count(spec: DeviceSpec, text: str, device: str, cuda_count: int) -> None:
    """Before any rank starts: CUDA ranks need that many GPUs visible here (else each rank dies
    on "invalid device ordinal"). CPU ranks (--device cpu, or auto without CUDA) need none."""
    word = (device or "auto").lower()
    if word == "cpu" or (word == "auto" and cuda_count == 0):
        return
    needed = max(spec.indices) + 1 if spec.indices else spec.count
    if needed > cuda_count:
        shown = "no CUDA GPU" if cuda_count == 0 else \
            f"{cuda_count} CUDA GPU{'s' if cuda_count != 1 else ''}"
        raise UsageError(f"--devices {text}: needs {needed} CUDA GPUs, and {shown} "
                         "is visible here (CUDA_VISIBLE_DEVICES counts)",
                         hint=f"--devices {max(cuda_count, 1)} or fewer, or --device cpu for "
                              "ranks on the CPU")


@dataclass(frozen=True)
class RankEnv:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int

    @property
    def leader(self) -> bool:
        return self.rank == 0


def rank_env(environ: Mapping[str, str] = os.environ) -> Optional[RankEnv]:
    """This process's place in a torchrun/elastic job, or None for a process on its own."""
    if not all(environ.get(k) for k in _RANK_VARS):
        return None
    world = int(environ["WORLD_SIZE"])
    local_world = int(environ.get("LOCAL_WORLD_SIZE") or world)
    if local_world != world:
        raise UsageError(f"this job spans several nodes ({world} ranks, {local_world} on this "
                         "one): jetbench measures one node's devices",
                         hint="run one jetbench per node")
    return RankEnv(int(environ["RANK"]), int(environ["LOCAL_RANK"]), world, local_world)


def rank_device(requested: str, env: RankEnv, spec: Optional[DeviceSpec],
                cuda_available: bool) -> str:
    """The device of this rank: cuda:LOCAL_RANK (or the index --devices names for it), or
    'cpu' (then each rank gets a share of the cores, see cpu_share)."""
    word = (requested or "auto").lower()
    if spec is not None and spec.count != env.world_size:
        raise UsageError(f"--devices asks for {spec.count} device(s) but this job has "
                         f"{env.world_size} rank(s)",
                         hint="give torchrun --nproc-per-node the same count, or drop --devices")
    if word.startswith("cuda:"):
        raise UsageError(f"--device {word} names one GPU; with several ranks each takes its "
                         "own (cuda:LOCAL_RANK)", hint="use --device cuda or --devices 0,2")
    if word == "cpu" or (word == "auto" and not cuda_available):
        if spec is not None and spec.indices is not None:
            raise UsageError("--devices with indices names CUDA devices; none is used here",
                             hint="give a count: --devices 2")
        return "cpu"
    if word not in ("auto", "cuda"):
        raise UsageError(f"unknown device: {requested!r}", hint="use auto, cuda or cpu")
    if not cuda_available:
        raise UsageError(f"--device {word}: no CUDA device is visible to PyTorch")
    index = spec.index(env.local_rank) if spec is not None else env.local_rank
    return f"cuda:{index}"


def cpu_share(cores: Sequence[int], local_rank: int, local_world_size: int) -> List[int]:
    """The cores of one CPU rank: an equal, disjoint slice (at least one core each; with
    more ranks than cores, ranks share cores round robin)."""
    ordered = sorted(cores)
    if local_world_size <= len(ordered):
        size = len(ordered) // local_world_size
        return ordered[local_rank * size:(local_rank + 1) * size]
    return [ordered[local_rank % len(ordered)]]


def describe_devices(devices: Sequence[str]) -> str:
    """'cuda:0,cuda:1' or 'cpu x2' (one rank per entry)."""
    if len(set(devices)) == 1 and len(devices) > 1:
        return f"{devices[0]} x{len(devices)}"
    return ",".join(devices)
