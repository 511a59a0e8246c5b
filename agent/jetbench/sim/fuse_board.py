"""A simulated board served through FUSE: `jetbench sim mount --board BOARD DIR`.

The tree is the one `sim/create.py` writes for the board (one description per board), kept in a
private backing directory. Files with a kernel behaviour (`sim/attributes.py`) are served by
their show/store functions: reads are computed when made, writes are judged when made and a
refused one fails with the driver's errno. Every other file under /sys is read-only (EACCES on
opening for writing, as sysfs does); /etc, /var and the rest behave as plain files, so the state
journal and the board lock work as on a board.

The server is single-threaded (one request at a time, as a sysfs attribute's mutex would
serialise them) and runs in its own process: the measured process's GIL cannot starve it.
Ctrl-C or SIGTERM unmounts and stops it.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, TextIO, Tuple

from ..hw.board import SIM_MARKER
from .attributes import HostLoad, KernelModel, Refused, read_initial
from .boards import get
from .create import create_board
from .quirks import check

READ_ONLY_PREFIXES = ("/sys/", "/proc/")
SYSFS_SIZE = 4096  # what stat(2) reports for a sysfs attribute
# How long the kernel may keep a name's lookup and attributes (mode, size) without asking: they
# change only through this mount (which the kernel sees), and a path jetbench resolves costs
# one lstat per component. Absent names are never cached (late-gpu's node appears later).
ATTR_CACHE_S = 1.0


def _fuse():
    """The binding (mfusepy, over libfuse 3), or None with the reason."""
    try:
        import mfusepy
    except (ImportError, OSError) as err:  # OSError: libfuse itself is missing
        return None, f"mfusepy is not usable ({err}); pip install 'jetbench[dev]' and " \
                     "apt-get install fuse3"
    return mfusepy, ""


def unavailable_reason() -> str:
    """Why a FUSE board cannot be served here ('' when it can)."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is absent (no FUSE in this kernel or container)"
    return _fuse()[1]


class BoardFS:
    """The FUSE operations (mfusepy's interface, raw file-info mode)."""

    use_ns = True

    def __init__(self, kernel: KernelModel, backing: Path, log: Optional[TextIO] = None,
                 on_ready=None):
        self.kernel = kernel
        self.backing = backing
        self.log = log
        self.on_ready = on_ready
        self.mounted = False

    def init(self, path: str) -> None:
        self.mounted = True
        if self.on_ready is not None:
            self.on_ready()

    # -- paths -------------------------------------------------------------------------------
    def _host(self, path: str) -> str:
        return str(self.backing / path.lstrip("/"))

    def _attr(self, path: str):
        if self.kernel.hidden(path):
            raise _err(errno.ENOENT)
        return self.kernel.attrs.get(path)

    @staticmethod
    def _read_only(path: str) -> bool:
        return any(path.startswith(p) for p in READ_ONLY_PREFIXES)

    # -- metadata ----------------------------------------------------------------------------
    def getattr(self, path: str, fh: object = None) -> Dict[str, int]:
        attr = self._attr(path)
        st = os.lstat(self._host(path))
        out = {key: getattr(st, key) for key in ("st_mode", "st_nlink", "st_uid", "st_gid",
                                                 "st_size", "st_atime_ns", "st_mtime_ns",
                                                 "st_ctime_ns", "st_ino")}
        for key in ("st_atime", "st_mtime", "st_ctime"):
            out[key] = out.pop(key + "_ns")
        if attr is not None:
            out["st_mode"] = stat.S_IFREG | (0o644 if attr.writable else 0o444)
            out["st_size"] = SYSFS_SIZE
        elif self._read_only(path) and stat.S_ISREG(st.st_mode):
            out["st_mode"] = stat.S_IFREG | 0o444
        return out

    def readdir(self, path: str, fh: object) -> List[str]:
        self._attr(path)
        names = os.listdir(self._host(path))
        base = path.rstrip("/")
        return [".", ".."] + [n for n in names if not self.kernel.hidden(f"{base}/{n}")]

    def readlink(self, path: str) -> str:
        self._attr(path)
        return os.readlink(self._host(path))

    def statfs(self, path: str) -> Dict[str, int]:
        st = os.statvfs(self._host("/"))
        return {key: getattr(st, key) for key in ("f_bavail", "f_bfree", "f_blocks", "f_bsize",
                                                  "f_favail", "f_ffree", "f_files", "f_flag",
                                                  "f_frsize", "f_namemax")}

    # -- files -------------------------------------------------------------------------------
    def open(self, path: str, fi) -> int:
        attr = self._attr(path)
        writing = (fi.flags & os.O_ACCMODE) != os.O_RDONLY
        if attr is not None:
            if writing and not attr.writable:
                raise _err(errno.EACCES)
            fi.direct_io = 1  # every read reaches show(): no page cache
            fi.fh = 0
            return 0
        if writing and self._read_only(path):
            raise _err(errno.EACCES)
        fi.fh = os.open(self._host(path), fi.flags & ~os.O_CREAT)
        return 0

    def create(self, path: str, mode: int, fi) -> int:
        if self._read_only(path):
            raise _err(errno.EACCES)
        fi.fh = os.open(self._host(path), fi.flags | os.O_CREAT, mode)
        return 0

    def read(self, path: str, size: int, offset: int, fi) -> bytes:
        attr = self._attr(path) if path else None
        if attr is not None:
            return (attr.show() + "\n").encode()[offset:offset + size]
        return os.pread(fi.fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fi) -> int:
        attr = self._attr(path) if path else None
        if attr is None:
            return os.pwrite(fi.fh, data, offset)
        text = data.decode(errors="replace")
        try:
            attr.store(text)
        except Refused as err:
            self._log(path, text, errno.errorcode.get(err.errno, str(err.errno)))
            raise
        self._log(path, text, "ok")
        return len(data)

    def _log(self, path: str, text: str, result: str) -> None:
        if self.log is not None:
            self.log.write(f"{path}\t{text.strip()}\t{result}\n")
            self.log.flush()

    def truncate(self, path: str, length: int, fh: object = None) -> int:
        if self._attr(path) is not None:
            return 0  # sysfs ignores O_TRUNC: the store function sees the whole write
        if self._read_only(path):
            raise _err(errno.EACCES)
        os.truncate(self._host(path), length)
        return 0

    def release(self, path: str, fi) -> int:
        if fi.fh:
            os.close(fi.fh)
        return 0

    def flush(self, path: str, fi) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fi) -> int:
        if fi.fh:
            os.fsync(fi.fh)
        return 0

    # -- the writable, non-sysfs part (journal, lock) ---------------------------------------
    def _writable_path(self, path: str) -> str:
        if self._read_only(path):
            raise _err(errno.EACCES)
        return self._host(path)

    def rename(self, old: str, new: str) -> int:
        os.rename(self._writable_path(old), self._writable_path(new))
        return 0

    def unlink(self, path: str) -> int:
        os.unlink(self._writable_path(path))
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._writable_path(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._writable_path(path))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._writable_path(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._writable_path(path), uid, gid)
        return 0

    def utimens(self, path: str, times: Optional[Tuple[int, int]] = None) -> int:
        if self._attr(path) is None and not self._read_only(path):
            if times is None:
                os.utime(self._host(path))
            else:
                os.utime(self._host(path), ns=times)
        return 0


def _err(code: int) -> OSError:
    return OSError(code, os.strerror(code))


def prepare(board_key: str, backing: Path, quirks: Sequence[str] = (),
            power_mode: Optional[int] = None) -> None:
    """The board's tree, as `sim create` writes it (in `power_mode`, its caps as nvpmodel
    leaves them), with its quirks listed in the marker."""
    create_board(board_key, backing, power_mode=power_mode)
    marker = backing / SIM_MARKER.lstrip("/")
    doc = json.loads(marker.read_text())
    doc["kernel"] = "fuse"  # no file-based simulated kernel may run beside this server
    if quirks:
        doc["quirks"] = list(quirks)
    marker.write_text(json.dumps(doc, indent=1) + "\n")


def serve(board_key: str, mountpoint: Path, quirks: Sequence[str] = (),
          load: Optional[float] = None, write_log: Optional[Path] = None,
          on_ready=None, power_mode: Optional[int] = None) -> None:
    """Mount the board at `mountpoint` and serve it until SIGINT/SIGTERM (then unmount)."""
    fuse, reason = _fuse()
    if fuse is None:
        raise RuntimeError(reason)

    names = check(quirks)
    backing = Path(tempfile.mkdtemp(prefix=f"jetbench-fuse-{board_key}-"))
    log = open(write_log, "a", encoding="utf-8") if write_log else None
    try:
        prepare(board_key, backing, names, power_mode)
        kernel = KernelModel(get(board_key), read_initial(backing), names, HostLoad(load),
                                 clock=time.monotonic)
        fs = BoardFS(kernel, backing, log, on_ready)
        try:
            fuse.FUSE(fs, str(mountpoint), foreground=True, nothreads=True, raw_fi=True,
                      attr_timeout=ATTR_CACHE_S, entry_timeout=ATTR_CACHE_S, negative_timeout=0,
                      fsname=f"jetbench-sim-{board_key}")
        except RuntimeError:
            # libfuse >= 3.x reports a loop ended by SIGINT/SIGTERM as an error code: a
            # normal stop once the board was mounted, a failure before.
            if not fs.mounted:
                raise
    finally:
        if log is not None:
            log.close()
        shutil.rmtree(backing, ignore_errors=True)
