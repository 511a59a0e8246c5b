"""Atomic result files: a reader (or a resumed sweep) sees a whole file or none.

Every write goes to a temporary file in the same directory, is fsynced, renamed over the
target, and the directory is fsynced; a kill at any moment leaves at most a stale `.tmp`
file, which readers ignore and the next run into that directory removes.

A new result *claims* its name atomically (`claim_result_path`: O_EXCL placeholders for the
JSON and its CSV, then replaced by atomic writes): two runs into one --out never write the
same name, and neither file is lost. Files get the mode the umask gives a normal file (0644
under 022) and, under sudo, the invoking user's ownership (SUDO_UID/SUDO_GID), so the user can
read and delete them.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    TypedDict,
    Union,
)

from ..bounded import nesting_depth
from ..documents import ResultDoc
from ..errors import UsageError
from .digits import csv_cell, stored
from .schema import check

if TYPE_CHECKING:
    from ..sampling.sampler import SourceTrace

PathLike = Union[str, "os.PathLike[str]"]


STALE_TMP_AGE_S = 60.0  # a temporary this old belongs to no running writer
# What a reader takes from a result file: a result is kilobytes (a many-device run's, a few
# hundred); past these a file is not one of ours, and is refused rather than read.
MAX_RESULT_BYTES = 32 * 1024 * 1024
MAX_JSON_DEPTH = 64  # a result nests 5 deep


def regular_file(path: PathLike) -> bool:
    """A regular file (through a link), not a FIFO, device, socket or folder."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def read_json(path: PathLike, what: str = "result") -> object:
    """A JSON file's document, read with bounds: a regular file only (opened without blocking,
    so a FIFO named *.json never hangs), at most MAX_RESULT_BYTES, nested at most
    MAX_JSON_DEPTH deep. UsageError naming the file otherwise."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as err:
        raise UsageError(f"no such {what} file: {path}") from err
    except OSError as err:
        raise UsageError(f"{path}: unreadable {what} ({err.strerror})") from err
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{path}: not a regular file (a FIFO, a device or a socket)")
        chunks, size = [], 0
        while size <= MAX_RESULT_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_RESULT_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as err:
        raise UsageError(f"{path}: unreadable {what} ({err.strerror})") from err
    finally:
        os.close(fd)
    if size > MAX_RESULT_BYTES:
        raise UsageError(f"{path}: larger than {MAX_RESULT_BYTES >> 20} MiB, not a {what}")
    try:
        doc = json.loads(b"".join(chunks).decode("utf-8"))
    except RecursionError:
        raise UsageError(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels, "
                         f"not a {what}") from None
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise UsageError(f"{path}: unreadable {what} ({str(err)[:200]})") from None
    if nesting_depth(doc, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise UsageError(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels, not a {what}")
    return doc


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def give_to_invoking_user(path: PathLike) -> None:
    """Under sudo, hand a file or directory we created to the user who ran sudo."""
    uid, gid = os.environ.get("SUDO_UID", ""), os.environ.get("SUDO_GID", "")
    if not uid.isdigit():
        return
    try:
        os.chown(path, int(uid), int(gid) if gid.isdigit() else -1)
    except OSError:
        pass  # not root (nothing to hand over) or a filesystem without owners


def _write_tmp(directory: Path, name: str, text: str) -> str:
    """A fsynced temporary beside the target, with a normal file's mode and owner."""
    fd, tmp = tempfile.mkstemp(dir=str(directory), prefix=f".{name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        give_to_invoking_user(tmp)
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _unlink(path: PathLike) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def atomic_write_text(path: PathLike, text: str) -> Path:
    """Write (or replace) `path` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_tmp(path.parent, path.name, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return path


def claim_result(json_path: PathLike, doc: ResultDoc, csv_text: Optional[str]) -> Path:
    """Write a new result (and its trace CSV) under the first free name `stem.json`,
    `stem-2.json`, ... (`claim_result_path`): never over an existing file, even with another
    run writing into the same directory at the same moment. The CSV first, then the JSON (its
    presence marks the point done); `doc["power"]["trace_csv"]` names the CSV written."""
    path = claim_result_path(json_path)
    csv_path = path.with_suffix(".csv")
    try:
        if csv_text is not None:
            (doc.get("power") or {})["trace_csv"] = csv_path.name
            atomic_write_text(csv_path, csv_text)
        else:
            csv_path.unlink()
        write_json(path, doc)
    except BaseException:
        # a full disk, say: no empty placeholder, nor a trace without its result, is left
        # to look like a result (issue 63)
        _unlink(csv_path)
        _unlink(path)
        raise
    return path


def clean_stale_tmp(directory: PathLike, older_than_s: float = STALE_TMP_AGE_S) -> List[Path]:
    """Remove `.*.tmp` files a killed writer left in `directory` (only old ones: a writer
    running now keeps its temporary for well under a second)."""
    import time

    removed: List[Path] = []
    now = time.time()
    try:
        entries = list(Path(directory).glob(".*.tmp"))
    except OSError:
        return removed
    for tmp in entries:
        try:
            if tmp.is_file() and not tmp.is_symlink() and now - tmp.stat().st_mtime > older_than_s:
                tmp.unlink()
                removed.append(tmp)
        except OSError:
            pass
    return removed


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory
    finally:
        os.close(fd)


def _create_exclusive(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def claim_result_path(path: PathLike) -> Path:
    """Reserve `path` (else `stem-2`, `stem-3`...) for a result and its trace CSV: both names
    are created empty with O_EXCL, so runs writing into one directory at once never pick the
    same name and never overwrite an earlier result. The caller replaces the placeholders with
    atomic writes (and removes the CSV one if it has no trace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        candidate = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
        if _create_exclusive(candidate):
            if _create_exclusive(candidate.with_suffix(".csv")):
                return candidate
            os.unlink(candidate)  # our own empty placeholder: the CSV name is taken
        n += 1


def write_json(path: PathLike, doc: object) -> Path:
    return atomic_write_text(path, json.dumps(stored(doc), indent=2, allow_nan=False) + "\n")


def trace_csv_text(traces: Sequence[SourceTrace], t0: float, t_from: float, t_to: float,
                   simulated: bool) -> str:
    """The raw samples of every source between t_from and t_to, one CSV: `t_s` (relative to
    t0) then `source/channel` columns; each source's rows carry only its own cells. A `#`
    comment line says what it is (and SIMULATED when it is)."""
    import numpy as np

    names: List[str] = []
    rows: List[tuple] = []
    offset = 0
    for src in traces:
        t, v = src.trace.slice(t_from, t_to)
        width = len(src.channels)
        names += [f"{src.name}/{c.name}" for c in src.channels]
        rows += [(float(t[i]), offset, v[i]) for i in range(len(t))]
        offset += width
    rows.sort(key=lambda r: r[0])
    head = "# jetbench power trace (W; energy counters in cumulative J)"
    head += "; SIMULATED board: not hardware\n" if simulated else "\n"
    out = [head, ",".join(["t_s", *names]) + "\n"]
    for t, start, values in rows:
        cells = [""] * len(names)
        for k, x in enumerate(np.asarray(values, dtype=float)):
            if not math.isnan(x):
                cells[start + k] = csv_cell(x)
        out.append(f"{t - t0:.6f}," + ",".join(cells) + "\n")
    return "".join(out)


class TraceColumns(TypedDict):
    t_s: List[float]
    channels: Dict[str, List[Optional[float]]]  # "source/channel" -> W (None: no sample)


def read_trace_csv(path: PathLike) -> TraceColumns:
    """{'t_s': [...], 'channels': {name: [values or None]}} from a trace CSV."""
    lines = [ln for ln in Path(path).read_text(encoding="utf-8").splitlines()
             if ln and not ln.startswith("#")]
    if not lines:
        return {"t_s": [], "channels": {}}
    names = lines[0].split(",")[1:]
    t: List[float] = []
    cols: Dict[str, List[Optional[float]]] = {n: [] for n in names}
    for line in lines[1:]:
        cells = line.split(",")
        t.append(float(cells[0]))
        for name, cell in zip(names, cells[1:]):
            cols[name].append(float(cell) if cell else None)
    return {"t_s": t, "channels": cols}


def load_result(path: PathLike) -> ResultDoc:
    path = Path(path)
    doc = check(read_json(path), str(path))
    doc.setdefault("_path", str(path))  # where it came from, for the trace CSV beside it
    return doc


def expand(paths: Iterable[PathLike], skipped: Optional[List[Path]] = None) -> List[Path]:
    """Result files from files and directories (a directory: its *.json, recursively; what
    there is not a regular file, a FIFO or a link to a device, is left out and added to
    `skipped`)."""
    out: List[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            for q in sorted(q for q in p.rglob("*.json") if not q.name.startswith(".")):
                if regular_file(q):
                    out.append(q)
                elif skipped is not None:
                    skipped.append(q)
        elif p.exists():
            out.append(p)
        else:
            raise UsageError(f"no such file or directory: {p}")
    return out


def load_results(paths: Iterable[PathLike], skip_foreign: bool = True,
                 skipped: Optional[List[Path]] = None) -> List[ResultDoc]:
    """Every result under `paths`. In directories, JSON files that are not results (a
    sweep's summary, `jetbench time` output) are skipped, and what is not a regular file is
    added to `skipped`; a file named explicitly must be a result."""
    docs = []
    for p in map(Path, paths):
        if p.is_dir():
            for q in expand([p], skipped):
                try:
                    docs.append(load_result(q))
                except UsageError:
                    if not skip_foreign:
                        raise
        else:
            docs.append(load_result(p))
    return docs


def trace_path(doc: ResultDoc) -> Path:
    """The trace CSV beside a result loaded from disk (may not exist)."""
    name = (doc.get("power") or {}).get("trace_csv") or ""
    return Path(doc.get("_path", ".")).parent / name if name else Path("/nonexistent")


def check_out_dir(path: PathLike, option: str = "--out") -> Path:
    """Before any work: `path` is a directory (made if missing) in which a file can be
    created; else a UsageError naming the user's path. Stale temporaries of a killed run are
    removed."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path}: exists and is not a directory",
                         hint="give a directory (it is created if missing)")
    missing = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=str(path), prefix=".jetbench-probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise UsageError(f"{option} {path}: cannot write there ({err.strerror or err})",
                         hint="choose a directory you can write to") from err
    if missing:
        give_to_invoking_user(path)
    clean_stale_tmp(path)
    return path


@contextlib.contextmanager
def removed_if_left_empty(path: Optional[PathLike]) -> Iterator[None]:
    """A directory this run made (None: none) is removed again when the run fails before
    writing anything into it: a refused request leaves nothing behind."""
    try:
        yield
    except BaseException:
        if path is not None:
            try:
                os.rmdir(path)  # only an empty directory goes
            except OSError:
                pass
        raise


def fallback_dir() -> Path:
    """Where results go when their --out failed at the end: a new directory in the system's
    temporary directory (named in the message that reports the failure)."""
    import time

    path = Path(tempfile.mkdtemp(prefix=time.strftime("jetbench-results-%Y%m%d-%H%M%S-")))
    give_to_invoking_user(path)
    return path
