"""The state journal: every value jetbench is about to change, recorded before the first write.

It lives under the root (`/var/lib/jetbench/journal.json`), is replaced atomically (write a
temporary file, fsync, rename, fsync the directory), keeps the *first* value seen for each path
(a second `maxperf` never overwrites the original state with pinned values), and is removed only
after a successful restore. A kill -9 at any moment therefore leaves either no change, or
changes that the journal describes.

Root reads it and writes it back to the board, so it is treated as hostile input: reached only
through the checked state-directory descriptor (statedir.py), never through a symlink, replaced
via a temporary created exclusively under a random name, and validated whole on load (`parse`,
journal_format.py: schema, types, every path a knob `Root.check_writable` accepts, every value
one a knob holds, bounded size). Anything else is JournalInvalid: one message, exit 2,
`restore --discard`.

An entry is a file (`path` under the root, `raw` its exact content) or, with `"kind": "nvml"`,
an NVML setting of a discrete GPU (`path` = `nvml:<PCI bus id>/<setting>`, hw/nvml.py):
its power limit in mW, or `default` for a clock lock (NVML cannot read a lock back: restore
resets it), or, with `"kind": "service"`, a systemd service jetbench stopped (`service:<unit>`,
hw/services.py: `nvfancontrol` under `--fan`), `active` to start it again on restore. All are
read and written through hw/knob_io.py.

An entry may also carry `wrote`, the value jetbench last wrote there. Restore compares it with
what it finds: a knob that moved since (jetson_clocks, nvpmodel, jtop) is named in the restore
output before it goes back to its original value, so another tool's change is never undone
silently. `seen` lists board knobs jetbench knows but did not change (every cpuidle state's
`disable`, cores' `online`, governors, the fan, railgating) with their values when the journal
was begun: restore leaves them alone and names those another tool changed since
(`jetson_clocks` disabling WFI or running the fan at 255 while jetbench held the board).
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from ..errors import HardwareError, JetbenchError, WriteRejected
from ..hw import knob_io
from ..hw.board import Board
from ..hw.fs import Root
from .journal_format import (  # noqa: F401  (the journal's names, as callers know them)
    KIND_FILE,
    KIND_NVML,
    KIND_SERVICE,
    MAX_ENTRIES,
    MAX_JOURNAL_BYTES,
    SCHEMA,
    UNWRITABLE,
    Entry,
    JournalInvalid,
    check_entry,
    kind_of,
    parse,
    parse_with_seen,
)
from .statedir import (
    STATE_DIR,
    hint_for,
    remove_stale_temporaries,
    replace_file,
    state_dir_fd,
)

JOURNAL_NAME = "journal.json"
JOURNAL_PATH = f"{STATE_DIR}/{JOURNAL_NAME}"
def journal_file(root: Root) -> Path:
    return root.path(JOURNAL_PATH)


def _cannot_journal(path: str) -> Callable[[str], Exception]:
    return lambda what: HardwareError(f"cannot journal the original value: {what}", path=path)


def _read_journal(root: Root, dir_fd: int) -> Optional[bytes]:
    """The journal's bytes (None: there is none), never through a symlink or from a device."""
    shown = str(journal_file(root))
    try:
        fd = os.open(JOURNAL_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as err:
        if os.path.islink(shown):
            raise JournalInvalid(shown, "it is a symbolic link") from None
        raise HardwareError(f"the state journal is unreadable ({err.strerror})", path=shown,
                            hint=hint_for(err, journal_file(root).parent)) from err
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise JournalInvalid(shown, "it is not a regular file")
        if st.st_nlink != 1:  # jetbench renames a new file into place: never a second name
            raise JournalInvalid(shown, f"it has {st.st_nlink} hard links")
        chunks = []
        size = 0
        while size <= MAX_JOURNAL_BYTES:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def load(root: Root) -> List[Entry]:
    """The journalled entries ([] when there is no journal), validated whole. Creates nothing."""
    return _load(root)[0]


def _load(root: Root) -> Tuple[List[Entry], List[Entry]]:
    with state_dir_fd(root, create=False) as dir_fd:
        if dir_fd is None:
            return [], []
        data = _read_journal(root, dir_fd)
    return ([], []) if data is None else parse_with_seen(root, data, str(journal_file(root)))


def originals(root: Root) -> Dict[str, str]:
    """path -> the raw value the journal saved (what the board held before jetbench): where a
    knob's value is judged as the power mode left it. Empty without a (readable) journal."""
    try:
        return {e.path: e.raw for e in load(root)}
    except JetbenchError:
        return {}


def watched_knobs(root: Root, board: Board) -> List[str]:
    """Board knobs jetbench knows, whether or not a profile writes them: what another tool
    (jetson_clocks, jtop) moves while jetbench holds the board."""
    paths = list(board.cpu.online_files)
    paths += root.glob("/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/disable")
    paths += [f"{p.path}/scaling_{name}" for p in board.cpu.policies
              for name in ("governor", "min_freq", "max_freq")]
    if board.fan is not None:
        paths += [board.fan.pwm] + ([board.fan.manual] if board.fan.manual else [])
    if board.gpu is not None and board.gpu.railgate:
        paths.append(board.gpu.railgate)
    return sorted(dict.fromkeys(paths))


def record(root: Root, items: Iterable[Tuple[str, ...]], board_family: str = "",
           watch: Iterable[str] = ()) -> List[Entry]:
    """Add (path, step) or (path, step, value about to be written) items to the journal,
    reading each file's current content; paths already journalled keep their first value (and
    take the new value to be written). `watch`: knobs to note the value of (`seen`) when they
    are not noted yet. Returns the whole journal."""
    shown = str(journal_file(root))
    with state_dir_fd(root, create=True) as dir_fd:
        assert dir_fd is not None
        data = _read_journal(root, dir_fd)
        entries, seen = ([], []) if data is None else parse_with_seen(root, data, shown)
        if data is not None and not board_family:  # a caller that does not know the board
            board_family = str(json.loads(data.decode("utf-8")).get("board", ""))
        known = {e.path: k for k, e in enumerate(entries)}
        added = False
        seen_paths = {e.path for e in seen}
        for path in watch:
            if path in seen_paths:
                continue
            try:
                root.check_writable(path)  # a knob inside the root, before reading it
                raw = root.read_raw(path)
                seen.append(check_entry(root, {"path": path, "raw": raw}, path,
                                         lambda what: ValueError(what)))
            except (JetbenchError, ValueError):
                continue  # gone, unreadable, or a value no knob holds: nothing to compare
            seen_paths.add(path)
            added = True
        for path, step, *value in items:
            wrote = str(value[0]).strip() if value else None
            if path in known:
                k = known[path]
                if wrote is not None and entries[k].wrote != wrote:
                    entries[k] = replace(entries[k], wrote=wrote)
                    added = True
                continue
            item = {"path": path, "raw": knob_io.read_raw(root, path), "step": step}
            if wrote is not None:
                item["wrote"] = wrote
            if kind_of(path) != KIND_FILE:
                item["kind"] = kind_of(path)
            # A value restore could not write back is refused now, before any change.
            entries.append(check_entry(root, item, path, _cannot_journal(path)))
            known[path] = len(entries) - 1
            added = True
        if added:
            doc = {
                "schema": SCHEMA,
                "board": board_family,
                "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "note": "original values of everything jetbench changed; `jetbench restore` "
                        "writes them back and removes this file",
                "entries": [e.doc() for e in entries],
                "seen": [{"path": e.path, "raw": e.raw} for e in seen],
            }
            try:
                remove_stale_temporaries(dir_fd, JOURNAL_NAME)
                replace_file(dir_fd, JOURNAL_NAME, json.dumps(doc, indent=1) + "\n")
            except OSError as err:
                raise HardwareError(f"cannot write the state journal ({err.strerror})",
                                    path=shown, hint="nothing was changed; "
                                    + hint_for(err, journal_file(root).parent)) from err
    return entries


def discard(root: Root) -> Optional[Path]:
    """Move the journal aside (`journal.json.discarded-<time>`, same directory), whatever it
    holds; the new path, or None when there is no journal. Reads nothing from it."""
    with state_dir_fd(root, create=False) as dir_fd:
        if dir_fd is None:
            return None
        try:
            os.stat(JOURNAL_NAME, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for k in range(1000):
            name = f"{JOURNAL_NAME}.discarded-{stamp}" + (f"-{k}" if k else "")
            try:
                os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                break
        try:
            os.rename(JOURNAL_NAME, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            os.fsync(dir_fd)
        except OSError as err:
            raise HardwareError(f"cannot move the journal aside ({err.strerror})",
                                path=str(journal_file(root)),
                                hint=hint_for(err, journal_file(root).parent)) from err
    return journal_file(root).with_name(name)


def _remove_journal(root: Root) -> None:
    with state_dir_fd(root, create=False) as dir_fd:
        if dir_fd is None:
            return
        try:
            os.unlink(JOURNAL_NAME, dir_fd=dir_fd)
            os.fsync(dir_fd)
        except FileNotFoundError:
            pass


def _remove_stale_temporaries(root: Root) -> None:
    """A kill -9 while the journal was being replaced leaves its temporary file behind."""
    with state_dir_fd(root, create=False) as dir_fd:
        if dir_fd is not None:
            remove_stale_temporaries(dir_fd, JOURNAL_NAME)


@dataclass(frozen=True)
class Moved:
    """A journalled knob something else changed after jetbench wrote it."""

    path: str
    wrote: str  # what jetbench wrote
    now: str  # what restore found
    original: str  # what restore put back (stripped)

    def note(self) -> str:
        return (f"{self.path}: jetbench wrote {self.wrote}, now {self.now}; restored to "
                f"original {self.original}")


@dataclass(frozen=True)
class Changed:
    """A knob jetbench never changed that another tool did while jetbench held the board."""

    path: str
    was: str
    now: str

    def note(self) -> str:
        return f"{self.path}: was {self.was}, now {self.now} (not jetbench's change: left as is)"


@dataclass(frozen=True)
class RestoreResult:
    written: Tuple[str, ...]
    unchanged: int
    had_journal: bool
    moved: Tuple[Moved, ...] = ()  # knobs another tool moved since jetbench wrote them
    changed: Tuple[Changed, ...] = ()  # knobs jetbench never wrote that another tool changed


def changed_since(root: Root, seen: Iterable[Entry], entries: Iterable[Entry]) -> List[Changed]:
    """Watched knobs jetbench did not journal that hold another value than when it began."""
    written = {e.path for e in entries}
    changed = []
    for knob in seen:
        if knob.path in written:
            continue
        try:
            now = root.read(knob.path, default=None)
        except JetbenchError:
            continue  # unreadable now: nothing to say about it
        if now is not None and now != knob.raw.strip():
            changed.append(Changed(knob.path, knob.raw.strip(), now))
    return changed


def moved_since(root: Root, entries: Iterable[Entry]) -> List[Moved]:
    """Journalled knobs holding neither what jetbench wrote nor their original: another tool
    (jetson_clocks, nvpmodel, jtop, a person) moved them, and restore is about to undo that."""
    moved = []
    for entry in entries:
        if entry.wrote is None or not knob_io.readable(entry.path):
            continue
        try:
            now = knob_io.read(root, entry.path, default=None)
        except JetbenchError:
            continue  # restore itself reports a knob it cannot read
        if now is not None and now not in (entry.wrote, entry.raw.strip()):
            moved.append(Moved(entry.path, entry.wrote, now, entry.raw.strip()))
    return moved


def restore(root: Root, passes: Optional[int] = None) -> RestoreResult:
    """Write every journalled value back, newest change first, then remove the journal.

    Reverse order undoes each step in the order the kernel accepts (max before min when going
    down...). A write the kernel refuses is retried after the others (its precondition may
    come later), for as many passes as there are entries.
    """
    _remove_stale_temporaries(root)
    entries, seen = _load(root)
    if not entries:
        had = os.path.lexists(journal_file(root))
        if had:
            _remove_journal(root)  # a valid journal with nothing in it: nothing to keep
        return RestoreResult((), 0, had)
    pending = [e for e in reversed(entries) if e.raw.strip() not in UNWRITABLE]
    moved = moved_since(root, pending)
    changed = changed_since(root, seen, entries)
    written: List[str] = []
    unchanged = len(entries) - len(pending)
    errors: Dict[str, JetbenchError] = {}
    for _ in range(passes or max(len(pending), 1)):
        failed = []
        for entry in pending:
            try:
                # A setting that cannot be read back (an NVML lock) is always written.
                if knob_io.readable(entry.path) and knob_io.read_raw(
                        root, entry.path, default=None) == entry.raw:
                    unchanged += 1
                    continue
                knob_io.write_raw(root, entry.path, entry.raw)
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
    _remove_journal(root)
    return RestoreResult(tuple(written), unchanged, True, tuple(moved), tuple(changed))
