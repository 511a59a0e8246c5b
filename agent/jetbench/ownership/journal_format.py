"""The state journal's format (journal.py): its entries, the kinds of knob they name, and their
checked parsing. A journal is hostile input (root writes it back to the board): validated whole,
schema, types, every path a knob jetbench may write, every value one a knob holds, bounded size;
anything else is JournalInvalid."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from ..errors import HardwareError, JetbenchError
from ..hw import knob_io, nvml, services
from ..hw.fs import MAX_KNOB_BYTES, Root

SCHEMA = "jetbench.journal/1"
# Values the kernel shows but never accepts back: the kernel regenerates them itself.
UNWRITABLE = ("<unsupported>",)
# Bounds no journal jetbench writes comes near (a board has a few hundred knobs at most).
MAX_JOURNAL_BYTES = 1 << 20
MAX_ENTRIES = 4096
MAX_STEP_CHARS = 256
_TOP_KEYS = {"schema", "board", "updated", "note", "entries", "seen"}
_ENTRY_KEYS = {"path", "raw", "step", "kind", "wrote"}
KIND_FILE = "file"
KIND_NVML = "nvml"
KIND_SERVICE = "service"


@dataclass(frozen=True)
class Entry:
    path: str
    raw: str  # the file's exact original content
    step: str
    kind: str = KIND_FILE  # KIND_NVML: an NVML setting; KIND_SERVICE: a systemd service
    wrote: Optional[str] = None  # the value jetbench last wrote (stripped); None: not known

    def doc(self) -> Dict[str, str]:
        doc = {"path": self.path, "raw": self.raw, "step": self.step}
        if self.kind != KIND_FILE:
            doc["kind"] = self.kind
        if self.wrote is not None:
            doc["wrote"] = self.wrote
        return doc


def kind_of(path: str) -> str:
    if nvml.is_key(path):
        return KIND_NVML
    return KIND_SERVICE if services.is_key(path) else KIND_FILE


class JournalInvalid(HardwareError):
    """A journal jetbench did not write (or a damaged one): nothing is restored from it."""

    def __init__(self, path: str, what: str):
        super().__init__(
            f"the state journal {path} is not one jetbench can trust: {what}",
            path=path,
            hint="nothing was written. Check the board's clocks by hand (`jetbench info`; the "
                 "file lists what jetbench believes the originals were), then "
                 "`sudo jetbench restore --discard` moves the journal aside",
        )


def _no_duplicate_keys(pairs: List[Tuple[str, object]]) -> Dict[str, object]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate key {next(k for k in keys if keys.count(k) > 1)!r}")
    return dict(pairs)


def check_entry(root: Root, item: object, where: str,
                 fail: Callable[[str], Exception]) -> Entry:
    """One entry, checked as restore will use it: a knob path jetbench may write, a value a
    knob can hold. `fail(what)` makes the error."""
    if not isinstance(item, dict) or not set(item) <= _ENTRY_KEYS or not {"path", "raw"} <= set(
            item):
        raise fail(f"{where} is not an object with path, raw and step")
    path, raw, step = item["path"], item["raw"], item.get("step", "")
    kind = item.get("kind", KIND_FILE)
    wrote = item.get("wrote")
    if not all(isinstance(v, str) for v in (path, raw, step, kind)):
        raise fail(f"{where}: path, raw, step and kind must be strings")
    if wrote is not None and (not isinstance(wrote, str) or len(wrote) > MAX_KNOB_BYTES):
        raise fail(f"{where}: wrote must be a string of at most {MAX_KNOB_BYTES} characters")
    if kind != kind_of(path):
        raise fail(f"{where}: kind {kind[:20]!r} does not match path {path[:80]!r}")
    if not path.startswith(("/", "nvml:", services.KEY_PREFIX)) or len(
            path) > MAX_KNOB_BYTES or any(
            ord(c) < 0x20 or ord(c) == 0x7F for c in path + step) or len(step) > MAX_STEP_CHARS:
        raise fail(f"{where}: path {path[:80]!r} or step {step[:40]!r} is malformed")
    try:
        knob_io.check_restorable(root, path, raw)
    except JetbenchError as err:
        raise fail(f"{where}: {err}") from None
    return Entry(path, raw, step, kind, wrote)


def parse(root: Root, data: bytes, shown: str) -> List[Entry]:
    """The entries of a journal's bytes, validated whole; JournalInvalid for anything else."""
    return parse_with_seen(root, data, shown)[0]


def parse_with_seen(root: Root, data: bytes, shown: str) -> Tuple[List[Entry], List[Entry]]:
    """(entries, seen) of a journal's bytes, validated whole."""

    def fail(what: str) -> JournalInvalid:
        return JournalInvalid(shown, what)

    if len(data) > MAX_JOURNAL_BYTES:
        raise fail(f"larger than {MAX_JOURNAL_BYTES} bytes")
    try:
        doc = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except RecursionError:
        raise fail("nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise fail(f"not valid JSON ({err})") from None
    if not isinstance(doc, dict):
        raise fail(f"expected a JSON object, found {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        raise fail(f"schema {str(doc.get('schema'))[:40]!r}, expected {SCHEMA!r}")
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise fail(f"unknown key {unknown[0][:40]!r}")
    for key in ("board", "updated", "note"):
        if not isinstance(doc.get(key, ""), str):
            raise fail(f"{key!r} must be a string")
    items = doc.get("entries")
    if not isinstance(items, list):
        raise fail("'entries' must be a list")
    if len(items) > MAX_ENTRIES:
        raise fail(f"more than {MAX_ENTRIES} entries")
    entries = [check_entry(root, item, f"entry {k + 1}", fail) for k, item in enumerate(items)]
    if len({e.path for e in entries}) != len(entries):
        raise fail("a path appears twice")
    seen_items = doc.get("seen", [])
    if not isinstance(seen_items, list) or len(seen_items) > MAX_ENTRIES:
        raise fail(f"'seen' must be a list of at most {MAX_ENTRIES} entries")
    seen = [check_entry(root, item, f"seen {k + 1}", fail) for k, item in enumerate(seen_items)]
    if len({e.path for e in seen}) != len(seen) or any(e.kind != KIND_FILE for e in seen):
        raise fail("'seen' lists a path twice, or a knob that is no file")
    return entries, seen
