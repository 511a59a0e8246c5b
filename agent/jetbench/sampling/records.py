"""The packed records the sampler process sends its parent through a pipe: one fixed-size
record per sample or fault, in the order they were taken.

    t_ns    int64    CLOCK_MONOTONIC in nanoseconds (the same clock in every process on the
                     machine, so windows opened by the parent line up exactly)
    source  uint16   index of the source in the sampler's list
    kind    uint16   0: a sample; 1 + i: fault FAULT_KINDS[i] (the values are NaN)
    (pad)   uint32
    values  float64 x width   watts (or cumulative joules), in channel order; NaN = not
                     available; width is the most channels any source has (the rest is NaN)

A record is at most a few hundred bytes, under PIPE_BUF, so writes from several sampling
threads never interleave. The writer side imports only `struct` (the sampler process stays
small); the reader side parses whole blocks with numpy.
"""

from __future__ import annotations

import math
import os
import struct
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from ..hw.meters.base import FAULT_KINDS

if TYPE_CHECKING:
    import numpy as np

SAMPLE = 0
_HEAD = "<qHHI"
_NAN = math.nan


def fault_code(kind: str) -> int:
    return 1 + FAULT_KINDS.index(kind)


def fault_kind(code: int) -> str:
    return FAULT_KINDS[code - 1]


def record_bytes(width: int) -> int:
    return struct.calcsize(_HEAD + "d" * width)


class RecordWriter:
    """A `Sink` (sampling/poll.py) for one source: each sample becomes one record written to the
    pipe at once (one `os.write`, no buffering: the parent may be waiting for the sample just
    after its window's end). The buffer is allocated once."""

    def __init__(self, fd: int, source_index: int, width: int, n_channels: int):
        self._fd = fd
        self._index = source_index
        self._struct = struct.Struct(_HEAD + "d" * width)
        self._buf = bytearray(self._struct.size)
        self._pad = (_NAN,) * (width - n_channels)
        self._nan_row = (_NAN,) * width

    def append(self, t_s: float, values: Sequence[Optional[float]]) -> None:
        if None in values:
            values = [_NAN if v is None else v for v in values]
        self._struct.pack_into(self._buf, 0, round(t_s * 1e9), self._index, SAMPLE, 0,
                               *values, *self._pad)
        os.write(self._fd, self._buf)

    def mark_fault(self, t_s: float, kind: str) -> None:
        self._struct.pack_into(self._buf, 0, round(t_s * 1e9), self._index, fault_code(kind), 0,
                               *self._nan_row)
        os.write(self._fd, self._buf)


def record_dtype(width: int) -> np.dtype:
    import numpy as np

    return np.dtype([("t_ns", "<i8"), ("source", "<u2"), ("kind", "<u2"), ("pad", "<u4"),
                     ("values", "<f8", (width,))])


class RecordReader:
    """Parses the byte stream back into per-source blocks; keeps a partial record for later."""

    def __init__(self, width: int):
        self.dtype = record_dtype(width)
        self._rest = b""

    def feed(self, data: bytes) -> np.ndarray:
        """The complete records in `data` (after what was left over last time)."""
        import numpy as np

        if self._rest:
            data = self._rest + data
        size = self.dtype.itemsize
        n = len(data) // size
        self._rest = data[n * size:]
        return np.frombuffer(data, self.dtype, count=n)

    @property
    def pending_bytes(self) -> int:
        return len(self._rest)


def split_faults(block: np.ndarray) -> List[Tuple[np.ndarray, Optional[str]]]:
    """One source's records in order, as runs: (samples, None) and (one fault record, kind)."""
    import numpy as np

    faults = np.flatnonzero(block["kind"] != SAMPLE)
    if not len(faults):
        return [(block, None)]
    runs: List[Tuple[np.ndarray, Optional[str]]] = []
    start = 0
    for i in faults:
        if i > start:
            runs.append((block[start:i], None))
        runs.append((block[i:i + 1], fault_kind(int(block["kind"][i]))))
        start = i + 1
    if start < len(block):
        runs.append((block[start:], None))
    return runs
