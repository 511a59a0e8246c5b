"""Shared fixtures: simulated boards in tmp_path, tree snapshots, the CLI."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

REPO = Path(__file__).resolve().parent.parent
SIM_BOARDS = ["tx1-r24", "tx1", "nano", "tx2", "xavier-agx", "xavier-nx", "orin-agx",
              "orin-agx-jp5", "orin-nano", "orin-agx-jp7", "orin-nano-super", "thor"]


def make_board(tmp_path: Path, key: str) -> Path:
    from jetbench.sim.create import create_board

    path = tmp_path / key
    create_board(key, path)
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


def run_cli(*args: str, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    """jetbench in a real subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "jetbench.cli.main", *args],
        capture_output=True, text=True, timeout=timeout, **kwargs,
    )
