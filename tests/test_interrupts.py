"""Ctrl-C handling that does not depend on where the signal lands (interrupts.py)."""

import os
import signal
import time

import pytest

from jetbench.interrupts import InterruptLatch, held_sigint


def _deliver(sig=signal.SIGINT):
    os.kill(os.getpid(), sig)
    time.sleep(0.05)  # the handler runs at the next bytecode boundary of the main thread


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
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_latch_and_held_sigint_together():
    with InterruptLatch() as latch:
        with pytest.raises(KeyboardInterrupt):
            with held_sigint():
                _deliver()
        assert latch.received
