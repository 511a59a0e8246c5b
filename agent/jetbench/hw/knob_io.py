"""Reading and writing a knob by its journal key: a file under the root, an NVML setting
(`nvml:<bus id>/<setting>`, hw/nvml_clocks.py), or a service (`service:<unit>`,
hw/services.py). The planner's steps, the journal and restore go through here, so an NVML
setting or a service has the same journal, rollback and restore as a sysfs file."""

from __future__ import annotations

from typing import Optional

from . import services
from .fs import Root, check_knob_value


def is_nvml(path: str) -> bool:
    from .nvml_clocks import is_key

    return is_key(path)


def readable(path: str) -> bool:
    """False where the current value cannot be read back (an NVML clock lock): such a knob is
    written every time it is planned and reset on restore, never compared."""
    if not is_nvml(path):
        return True
    from .nvml_clocks import POWER_LIMIT, parse_key

    return parse_key(path)[1] == POWER_LIMIT


def read(root: Root, path: str, default: object = ...) -> Optional[str]:
    """The value, stripped (as `Root.read`)."""
    if services.is_key(path):
        return services.read_setting(root, path)
    if is_nvml(path):
        from .nvml_clocks import read_setting

        return read_setting(path)
    if default is ...:
        return root.read(path)
    return root.read(path, default=default)


def read_raw(root: Root, path: str, default: object = ...) -> Optional[str]:
    """The exact content, as the journal keeps it."""
    if services.is_key(path):
        return services.read_setting(root, path) + "\n"
    if is_nvml(path):
        from .nvml_clocks import read_setting

        return read_setting(path) + "\n"
    if default is ...:
        return root.read_raw(path)
    return root.read_raw(path, default=default)


def write(root: Root, path: str, value: str) -> None:
    if services.is_key(path):
        services.write_setting(root, path, value)
        return
    if is_nvml(path):
        from .nvml_clocks import write_setting

        write_setting(path, value)
    else:
        root.write(path, value)


def write_raw(root: Root, path: str, raw: str) -> None:
    if services.is_key(path):
        services.write_setting(root, path, raw)
        return
    if is_nvml(path):
        from .nvml_clocks import write_setting

        write_setting(path, raw)
    else:
        root.write_raw(path, raw)


def check_restorable(root: Root, path: str, raw: str) -> None:
    """A journal entry restore may write: a knob path jetbench may write and a value it can
    hold (UnsafePath / hardware errors otherwise)."""
    if services.is_key(path):
        services.check_value(path, raw)
        return
    if is_nvml(path):
        from .nvml_clocks import check_value

        check_value(path, raw)
        return
    root.check_writable(path)
    check_knob_value(raw, path)
