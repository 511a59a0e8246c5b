"""The board lock in-process (each BoardLock opens its own file description, so flock treats
them as separate owners): holder records, --wait, removal on release, and the removed-file race.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time

import pytest

from jetbench.hw.fs import Root
from jetbench.ownership.lock import LOCK_PATH, BoardBusy, BoardLock, peek

from conftest import make_board


@pytest.fixture
def root(tmp_path) -> Root:
    return Root(make_board(tmp_path, "tx1"))


def test_a_second_writer_is_refused_with_the_holder_and_the_fix(root):
    with BoardLock(root, "maxperf --fan"):
        with pytest.raises(BoardBusy) as err:
            BoardLock(root, "apply nano-614mhz").acquire()
        assert err.value.exit_code == 2
        assert err.value.holder.pid == os.getpid()
        assert err.value.holder.command == "maxperf --fan"
        assert f"in use by pid {os.getpid()} (jetbench maxperf --fan, since " in str(err.value)
        assert "--wait" in err.value.hint
        assert peek(root).command == "maxperf --fan"
    assert peek(root) is None
    assert not root.path(LOCK_PATH).exists()  # removed on release: the tree is as before


def test_a_daemon_holder_names_its_socket_and_the_service(root):
    with BoardLock(root, "daemon", socket="/run/jetbench/jetbench.sock"):
        holder = peek(root)
        assert holder.is_daemon and holder.socket == "/run/jetbench/jetbench.sock"
        with pytest.raises(BoardBusy) as err:
            BoardLock(root, "restore").acquire()
        assert "systemctl stop jetbench" in err.value.hint


def test_wait_gives_up_after_its_timeout_or_gets_the_board_when_freed(root):
    first = BoardLock(root, "maxperf").acquire()
    t0 = time.monotonic()
    with pytest.raises(BoardBusy):
        BoardLock(root, "apply x", wait_s=0.4).acquire()
    assert time.monotonic() - t0 >= 0.4
    threading.Timer(0.3, first.release).start()
    waiting = BoardLock(root, "apply x", wait_s=10).acquire()
    assert waiting.held and peek(root).command == "apply x"
    waiting.release()


def test_a_lock_on_a_removed_file_is_not_taken_for_the_board(root):
    """A waiter that opened the file just before its holder removed it would lock a file
    nobody else sees: BoardLock checks the file is still the one at the path."""
    first = BoardLock(root, "maxperf").acquire()
    stale_fd = os.open(first.path, os.O_RDWR)
    first.release()  # unlinks, then unlocks
    fcntl.flock(stale_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: nobody sees this inode
    fcntl.flock(stale_fd, fcntl.LOCK_UN)
    second = BoardLock(root, "apply x").acquire()  # a new file at the path
    late = BoardLock(root, "restore")
    opened = []

    def open_stale_first() -> int:
        if not opened:
            opened.append(stale_fd)
            return stale_fd
        return BoardLock._open(late)

    late._open = open_stale_first  # type: ignore[method-assign]
    holder = late.try_acquire()
    assert holder is not None and holder.command == "apply x"
    assert not late.held
    second.release()


def test_a_file_left_by_a_killed_holder_is_reused_and_peek_creates_nothing(tmp_path):
    root = Root(make_board(tmp_path, "nano"))
    assert peek(root) is None
    assert not root.path(LOCK_PATH).exists()
    root.path(LOCK_PATH).write_text(json.dumps({"pid": 999999, "command": "maxperf",
                                                "since": "then"}) + "\n")
    assert peek(root) is None  # unlocked: nobody holds the board
    with BoardLock(root, "restore"):
        assert peek(root).pid == os.getpid()


def test_the_lock_file_stays_open_to_the_group_whatever_the_creators_umask(root):
    old = os.umask(0o077)
    try:
        lock = BoardLock(root, "apply x").acquire()
    finally:
        os.umask(old)
    try:
        assert os.stat(lock.path).st_mode & 0o777 == 0o664
    finally:
        lock.release()


def test_a_lock_passed_on_is_never_removed_and_its_holder_keeps_the_board(root):
    """Issue 21: the daemon passes its locked descriptor to a borrower, then exits. Had it
    removed the file, the next writer would create a new one, lock it and write under the
    borrower. The file stays, names the borrower, and the board is refused until it closes."""
    from jetbench.ownership.lock import Holder

    daemon = BoardLock(root, "daemon").acquire()
    borrowed = os.dup(daemon.fileno())  # what SCM_RIGHTS gives the borrower: the same open file
    try:
        daemon.release(handed_to=Holder(4242, "measure (lent the board)", "then"))
        assert root.path(LOCK_PATH).exists()
        with pytest.raises(BoardBusy) as err:
            BoardLock(root, "maxperf").acquire()
        assert err.value.holder.pid == 4242 and "measure" in str(err.value)
    finally:
        os.close(borrowed)  # the borrower ends: the kernel drops the lock
    with BoardLock(root, "maxperf"):
        assert peek(root).command == "maxperf"
    assert not root.path(LOCK_PATH).exists()  # a sole holder removes it
