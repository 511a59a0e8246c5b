"""jetbench's cache directory: what is built once and reused across runs (ONNX Runtime's
TensorRT engines and timing caches), never inside a timed window.

`$JETBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/jetbench`, else `~/.cache/jetbench`; created
private (0700): an engine is code the GPU runs.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Mapping, Optional


def cache_root(environ: Optional[Mapping[str, str]] = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("JETBENCH_CACHE_DIR"):
        return Path(env["JETBENCH_CACHE_DIR"])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else \
        Path(env.get("HOME") or Path.home()) / ".cache"
    return base / "jetbench"


def cache_dir(name: str, environ: Optional[Mapping[str, str]] = None) -> Path:
    """`cache_root()/name`, each of the two created 0700 where missing (mkdir's `mode` covers
    only the last component: the root is made on its own; `~/.cache` keeps the usual mode).
    Existing directories are left as their owner set them."""
    root = cache_root(environ)
    root.parent.mkdir(parents=True, exist_ok=True)
    root.mkdir(mode=0o700, exist_ok=True)
    path = root / name
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def write_cached(path: Path, produce: Callable[[str], None]) -> Path:
    """`produce(tmp)` writes a temporary file beside `path`, which then replaces `path` in one
    rename: a run killed half-way leaves no half-written file for the next run to trust."""
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        produce(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
