"""The state journal: every value jetbench is about to change, recorded before the first write.

It lives under the root (`/var/lib/jetbench/journal.json`), is replaced atomically (write a
temporary file, fsync, rename, fsync the directory), keeps the *first* value seen for each path
(a second `maxperf` never overwrites the original state with pinned values), and is removed only
after a successful restore. A kill -9 at any moment therefore leaves either no change, or
changes that the journal describes.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from ..errors import HardwareError, JetbenchError, WriteRejected
from ..hw.fs import Root

JOURNAL_PATH = "/var/lib/jetbench/journal.json"
SCHEMA = "jetbench.journal/1"
# Values the kernel shows but never accepts back: the kernel regenerates them itself.
UNWRITABLE = ("<unsupported>",)


@dataclass(frozen=True)
class Entry:
    path: str
    raw: str  # the file's exact original content
    step: str


def journal_file(root: Root) -> Path:
    return root.path(JOURNAL_PATH)


def load(root: Root) -> List[Entry]:
    path = journal_file(root)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as err:
        raise HardwareError(f"the state journal is unreadable ({err})", path=str(path),
                            hint="inspect it by hand; it lists the original clock values") from err
    if doc.get("schema") != SCHEMA:
        raise HardwareError(f"unknown journal schema {doc.get('schema')!r}", path=str(path))
    return [Entry(e["path"], e["raw"], e.get("step", "")) for e in doc["entries"]]


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def record(root: Root, items: Iterable[Tuple[str, str]], board_family: str = "") -> List[Entry]:
    """Add (path, step) items to the journal, reading each file's current content; paths
    already journalled keep their first value. Returns the whole journal."""
    entries = load(root)
    known = {e.path for e in entries}
    added = False
    for path, step in items:
        if path in known:
            continue
        entries.append(Entry(path, root.read_raw(path), step))
        known.add(path)
        added = True
    if added:
        doc = {
            "schema": SCHEMA,
            "board": board_family,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "note": "original values of everything jetbench changed; `jetbench restore` "
                    "writes them back and removes this file",
            "entries": [e.__dict__ for e in entries],
        }
        try:
            _atomic_write(journal_file(root), json.dumps(doc, indent=1) + "\n")
        except OSError as err:
            raise HardwareError(f"cannot write the state journal ({err.strerror})",
                                path=str(journal_file(root)),
                                hint="nothing was changed; run with sudo") from err
    return entries


def _remove_stale_temporaries(root: Root) -> None:
    """A kill -9 while the journal was being replaced leaves its temporary file behind."""
    path = journal_file(root)
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            tmp.unlink()
        except OSError:
            pass


@dataclass(frozen=True)
class RestoreResult:
    written: Tuple[str, ...]
    unchanged: int
    had_journal: bool


def restore(root: Root, passes: Optional[int] = None) -> RestoreResult:
    """Write every journalled value back, newest change first, then remove the journal.

    Reverse order undoes each step in the order the kernel accepts (max before min when going
    down...). A write the kernel refuses is retried after the others (its precondition may
    come later), for as many passes as there are entries.
    """
    _remove_stale_temporaries(root)
    entries = load(root)
    if not entries:
        return RestoreResult((), 0, journal_file(root).exists())
    pending = [e for e in reversed(entries) if e.raw.strip() not in UNWRITABLE]
    written: List[str] = []
    unchanged = len(entries) - len(pending)
    errors: Dict[str, JetbenchError] = {}
    for _ in range(passes or max(len(pending), 1)):
        failed = []
        for entry in pending:
            try:
                if root.read_raw(entry.path, default=None) == entry.raw:
                    unchanged += 1
                    continue
                root.write_raw(entry.path, entry.raw)
                written.append(entry.path)
            except JetbenchError as err:
                errors[entry.path] = err
                failed.append(entry)
        if not failed or len(failed) == len(pending):
            pending = failed
            break
        pending = failed
    if pending:
        first = errors[pending[0].path]
        raise WriteRejected(
            f"could not restore {len(pending)} value(s); the journal is kept: {first}",
            path=pending[0].path,
            hint=first.hint or "fix the cause and run `jetbench restore` again",
        )
    try:
        journal_file(root).unlink()
    except FileNotFoundError:
        pass
    return RestoreResult(tuple(written), unchanged, True)
