"""Writing a profile: its text from tables (a TOML writer, then read back through
parse_profile) and the file under SYSTEM_PROFILES, written as the journal is (no link
followed, a temporary file created exclusively, then renamed over it). `tune
--save-profile` writes this way."""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Union

from ..errors import HardwareError, ProfileError
from .profile import SYSTEM_PROFILES, parse_profile


def comment_text(text: str, limit: int = 200) -> str:
    """Text fit for one `# ...` line: what cannot print (a newline above all) becomes '?'."""
    return "".join(c if c.isprintable() else "?" for c in str(text)[:limit])


def pinned_clocks_table(description: str, family: str, cpu_hz: Optional[int] = None,
                        gpu_hz: Optional[int] = None,
                        emc_hz: Optional[int] = None) -> Dict[str, object]:
    """A profile's tables pinning these clocks on boards of `family`: the sections `apply`
    reads, each clock with what pinning it needs (cores online, GPU railgating off)."""
    table: Dict[str, object] = {"description": description, "match": {"family": [family]}}
    if cpu_hz is not None:
        table["cpu"] = {"freq": str(cpu_hz), "online": True}
    if gpu_hz is not None:
        table["gpu"] = {"freq": str(gpu_hz), "railgate": False}
    if emc_hz is not None:
        table["emc"] = {"freq": str(emc_hz)}
    return table


def profile_toml(doc: Mapping[str, object], comments: Sequence[str] = ()) -> str:
    """A profile's text from its tables, written by a TOML writer (never by formatting
    strings, so no value can close its string and open a table of its own), then read back
    through parse_profile: what is written is exactly a profile jetbench accepts."""
    import tomli_w

    text = "".join(f"# {comment_text(c)}\n" for c in comments) + tomli_w.dumps(doc)
    parsed = parse_profile(text, "written")
    if parsed.writes:
        raise ProfileError("a generated profile would carry [[write]] entries: refused")
    return text


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def write_profile_file(root_base: Union[str, os.PathLike], name: str, text: str) -> Path:
    """Write SYSTEM_PROFILES/NAME.toml under the root as the journal is written: each folder
    opened without following a link (made 0755 where missing), a temporary file created
    exclusively beside the profile (O_EXCL | O_NOFOLLOW), then renamed over it. A profile
    that is a link, or anything but a regular file, is refused: its target is never written."""
    path = Path(root_base) / SYSTEM_PROFILES.lstrip("/") / f"{name}.toml"
    final = f"{name}.toml"
    fd = _walk_profile_dir(Path(root_base))
    try:
        try:
            st: Optional[os.stat_result] = os.stat(final, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise HardwareError("the profile's path is a symbolic link or not a regular file: "
                                "refused (nothing written)", path=str(path),
                                hint=f"remove it first: sudo rm {path}")
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                          | os.O_CLOEXEC, 0o644, dir_fd=fd)
            try:
                os.write(out, text.encode("utf-8"))
                os.fsync(out)
            finally:
                os.close(out)
            os.rename(tmp, final, src_dir_fd=fd, dst_dir_fd=fd)
            os.fsync(fd)
        except OSError as err:
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
            raise HardwareError(f"cannot write the profile ({err.strerror})", path=str(path),
                                hint="run with sudo") from err
    finally:
        os.close(fd)
    return path


def _walk_profile_dir(base: Path) -> int:
    """A descriptor of SYSTEM_PROFILES under `base`, walked one folder at a time without
    following links; missing folders are made."""
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise HardwareError(f"cannot open the root ({err.strerror})", path=str(base)) from err
    current = base
    try:
        for part in Path(SYSTEM_PROFILES.lstrip("/")).parts:
            current = current / part
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            except OSError as err:
                raise HardwareError(f"cannot create the profile folder ({err.strerror})",
                                    path=str(current), hint="run with sudo") from err
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as err:
                why = ("a symbolic link or not a folder: refused" if err.errno in
                       (errno.ELOOP, errno.ENOTDIR) else err.strerror)
                raise HardwareError(f"cannot open the profile folder ({why})",
                                    path=str(current)) from err
            os.close(fd)
            fd = child
        result, fd = fd, -1
        return result
    finally:
        if fd >= 0:
            os.close(fd)
