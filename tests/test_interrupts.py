"""Ctrl-C handling that does not depend on where the signal lands (interrupts.py).

Each test sets up the dispositions it tests (those of a terminal's foreground process): a test
run started in the background inherits SIGINT ignored, which the product rightly keeps."""

import signal
import threading

import pytest

from jetbench import interrupts
from jetbench.interrupts import Hold, InterruptLatch, checkpoint, held_sigint, pending


@pytest.fixture(autouse=True)
def terminal_dispositions():
    """SIGINT raising KeyboardInterrupt and SIGTERM at its default, as on a terminal; the
    runner's own dispositions are put back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.fixture
def sigint_ignored():
    """As in `nohup make test` or `make test &`: SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _deliver(sig=signal.SIGINT):
    signal.raise_signal(sig)  # the Python handler has run when this returns


def test_held_sigint_delivers_after_the_block():
    reached_end = False
    with pytest.raises(KeyboardInterrupt):
        with held_sigint():
            _deliver()
            reached_end = True  # not interrupted inside: the import would carry on
    assert reached_end


def test_held_sigint_without_a_signal_does_nothing():
    with held_sigint():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_latch_raises_again_an_interrupt_a_library_swallowed(sig):
    with InterruptLatch() as latch:
        latch.check()  # nothing received: no exception
        try:
            _deliver(sig)
        except KeyboardInterrupt:
            pass  # a finaliser or a broad except in some library
        with pytest.raises(KeyboardInterrupt):
            latch.check()
        with pytest.raises(KeyboardInterrupt):
            checkpoint()  # measure's phase boundaries: the same check
    assert latch.cause == signal.Signals(sig).name
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_latch_and_held_sigint_together():
    with InterruptLatch() as latch:
        with pytest.raises(KeyboardInterrupt):
            with held_sigint():
                _deliver()
        assert latch.received


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_hold_records_the_interrupt_and_raises_it_at_its_end(sig):
    finished = False
    with InterruptLatch():
        with pytest.raises(KeyboardInterrupt):
            with Hold():
                _deliver(sig)
                _deliver(signal.SIGINT)  # a second Ctrl-C is held too
                assert pending() == signal.Signals(sig).name  # the first cause is kept
                checkpoint()  # no raise while held
                finished = True
    assert finished


def test_a_hold_lets_an_exception_on_its_way_pass_unchanged():
    with InterruptLatch():
        with pytest.raises(OSError):
            with Hold():
                _deliver()
                raise OSError("a failed write")


def test_a_hold_without_a_latch_enters_one_and_leaves_the_dispositions_as_they_were():
    """A library caller (no CLI latch): the hold still holds, then raises."""
    with pytest.raises(KeyboardInterrupt):
        with Hold():
            _deliver(signal.SIGTERM)  # not the end of the process: held, then raised
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert interrupts._active is None


def test_the_latch_keeps_an_inherited_ignored_sigint(sigint_ignored):
    with InterruptLatch() as latch:
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        _deliver(signal.SIGINT)  # ignored, as the user asked by starting it so
        latch.check()
    assert not latch.received


def test_the_daemon_taking_the_board_back_interrupts_even_with_sigint_ignored(sigint_ignored):
    """The lease's watcher thread interrupts the main thread through SIGTERM's handler:
    `_thread.interrupt_main()` does nothing when SIGINT is ignored, and a measurement in a
    background job would then run on with the board taken from under it (exit 3)."""
    with InterruptLatch() as latch:
        with pytest.raises(KeyboardInterrupt):
            with Hold():
                watcher = threading.Thread(target=interrupts.interrupt_main,
                                           args=("lease revoked",))
                watcher.start()
                watcher.join()
        assert latch.cause == "lease revoked"


def test_interrupt_main_interrupts_a_blocked_main_thread():
    """A signal at the main thread ends a blocking wait there at once."""
    blocker = threading.Event()
    with InterruptLatch():
        with pytest.raises(KeyboardInterrupt):
            threading.Thread(target=interrupts.interrupt_main, args=("lease revoked",)).start()
            blocker.wait(60)  # a failure bound: the interrupt ends it
