"""Issue 63: `tune --warm-start FILE` is read with a bound and never blocks: a FIFO (no
writer: reading it waited for ever), a device (/dev/zero: read without end) or a huge file is
one usage error at once."""

from __future__ import annotations

import os
import time

import pytest

from jetbench.errors import UsageError
from jetbench.run.tune.warm import read_study


def test_hostile_warm_start_files_are_refused_at_once(tmp_path):
    fifo = tmp_path / "tune.json"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(300 * 1024 * 1024)  # sparse: 300 MiB of NULs to read
    t0 = time.monotonic()
    for path, says in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"),
                       (huge, "larger than")):
        with pytest.raises(UsageError, match=says) as err:
            read_study(path)
        assert err.value.message.startswith("--warm-start ")
    assert time.monotonic() - t0 < 5.0
    good = tmp_path / "good.json"
    good.write_text('{"schema": "jetbench.tune/1", "trials": []}')
    assert read_study(good)["trials"] == []
    bad = tmp_path / "bad.json"
    bad.write_text("[" * 100_000)
    with pytest.raises(UsageError, match="--warm-start"):
        read_study(bad)
