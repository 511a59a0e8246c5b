"""Reading and writing a knob by its journal key: a file under the root, an NVML setting
(`nvml:<bus id>/<setting>`, hw/nvml.py), or a service (`service:<unit>`, hw/services.py). The
planner's steps, the journal and restore go through here, so an NVML setting or a service has
the same journal, rollback and restore as a sysfs file.

A knob that is not a file belongs to a backend: a module with `is_key`, `read_knob`,
`write_knob`, `check_value` and `readable`. Adding a kind of knob is adding one to BACKENDS.
"""

from __future__ import annotations

from types import ModuleType
from typing import Optional

from . import nvml, services
from .fs import Root, check_knob_value

BACKENDS = (services, nvml)


def backend(path: str) -> Optional[ModuleType]:
    """The backend that owns the key `path`; None for a file under the root."""
    for module in BACKENDS:
        if module.is_key(path):
            return module
    return None


def readable(path: str) -> bool:
    """False where the current value cannot be read back (an NVML clock lock): such a knob is
    written every time it is planned and reset on restore, never compared."""
    owner = backend(path)
    return owner is None or owner.readable(path)


def read(root: Root, path: str, default: object = ...) -> Optional[str]:
    """The value, stripped (as `Root.read`)."""
    owner = backend(path)
    if owner is not None:
        return owner.read_knob(root, path)
    if default is ...:
        return root.read(path)
    return root.read(path, default=default)


def read_raw(root: Root, path: str, default: object = ...) -> Optional[str]:
    """The exact content, as the journal keeps it."""
    owner = backend(path)
    if owner is not None:
        return owner.read_knob(root, path) + "\n"
    if default is ...:
        return root.read_raw(path)
    return root.read_raw(path, default=default)


def write(root: Root, path: str, value: str) -> None:
    owner = backend(path)
    if owner is not None:
        owner.write_knob(root, path, value)
    else:
        root.write(path, value)


def write_raw(root: Root, path: str, raw: str) -> None:
    owner = backend(path)
    if owner is not None:
        owner.write_knob(root, path, raw)
    else:
        root.write_raw(path, raw)


def check_restorable(root: Root, path: str, raw: str) -> None:
    """A journal entry restore may write: a knob path jetbench may write and a value it can
    hold (UnsafePath / hardware errors otherwise)."""
    owner = backend(path)
    if owner is not None:
        owner.check_value(path, raw)
        return
    root.check_writable(path)
    check_knob_value(raw, path)
