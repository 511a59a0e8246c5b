"""The state journal on a plain tree (no simulated kernel): what is recorded, what restore
writes and counts, and what it keeps when a write fails."""

import json

import pytest

from jetbench.errors import HardwareError, WriteRejected
from jetbench.hw.fs import Root
from jetbench.ownership import journal

GOV = "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor"
SPEED = "/sys/devices/system/cpu/cpufreq/policy0/scaling_setspeed"
MIN = "/sys/devices/system/cpu/cpufreq/policy0/scaling_min_freq"


@pytest.fixture
def root(tmp_path):
    d = tmp_path / "sys/devices/system/cpu/cpufreq/policy0"
    d.mkdir(parents=True)
    (d / "scaling_governor").write_text("schedutil\n")
    (d / "scaling_setspeed").write_text("<unsupported>\n")
    (d / "scaling_min_freq").write_text("102000\n")
    return Root(tmp_path)


def test_record_keeps_the_first_value_and_the_exact_text(root, tmp_path):
    entries = journal.record(root, [(GOV, "cpu"), (MIN, "cpu")], board_family="tx1")
    assert [(e.path, e.raw, e.step) for e in entries] == [
        (GOV, "schedutil\n", "cpu"), (MIN, "102000\n", "cpu")]
    root.write(GOV, "performance")
    entries = journal.record(root, [(GOV, "again"), (SPEED, "cpu")])
    assert [(e.path, e.raw) for e in entries] == [
        (GOV, "schedutil\n"), (MIN, "102000\n"), (SPEED, "<unsupported>\n")]
    doc = json.loads((tmp_path / "var/lib/jetbench/journal.json").read_text())
    assert doc["schema"] == "jetbench.journal/1" and len(doc["entries"]) == 3
    assert journal.load(root) == entries


def test_restore_writes_back_counts_and_removes_the_journal(root, tmp_path):
    journal.record(root, [(GOV, "cpu"), (SPEED, "cpu"), (MIN, "cpu")])
    root.write(GOV, "userspace")
    root.write(SPEED, "1000")
    # MIN unchanged; SPEED's original "<unsupported>" is never written back (the kernel
    # regenerates it).
    result = journal.restore(root)
    assert result.written == (GOV,)
    assert result.unchanged == 2 and result.had_journal
    assert (tmp_path / GOV.lstrip("/")).read_text() == "schedutil\n"
    assert (tmp_path / SPEED.lstrip("/")).read_text() == "1000\n"
    assert not (tmp_path / "var/lib/jetbench/journal.json").exists()


def test_restore_without_a_journal(root):
    result = journal.restore(root)
    assert result == journal.RestoreResult((), 0, False)


def test_restore_removes_stale_temporaries(root, tmp_path):
    journal.record(root, [(GOV, "cpu")])
    stale = tmp_path / "var/lib/jetbench/.journal.json.4242.tmp"
    stale.write_text("half")
    journal.restore(root)
    assert not stale.exists()


def test_a_failing_write_keeps_the_journal_and_names_the_path(root, tmp_path):
    journal.record(root, [(MIN, "cpu"), (GOV, "cpu")])
    root.write(GOV, "performance")
    root.write(MIN, "204000")
    host = tmp_path / MIN.lstrip("/")
    host.unlink()
    host.mkdir()  # the file became a directory: every write fails
    with pytest.raises(WriteRejected) as info:
        journal.restore(root)
    assert info.value.path == MIN and "1 value(s)" in str(info.value)
    assert (tmp_path / GOV.lstrip("/")).read_text() == "schedutil\n"  # the others are done
    assert journal.load(root)[0].path == MIN  # kept


def test_unreadable_or_foreign_journal_is_an_error(root, tmp_path):
    path = tmp_path / "var/lib/jetbench/journal.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(HardwareError, match="unreadable"):
        journal.load(root)
    path.write_text(json.dumps({"schema": "other/9", "entries": []}))
    with pytest.raises(HardwareError, match="schema"):
        journal.load(root)
