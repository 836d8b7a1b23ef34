"""SIGTERM during a run (a batch system's time limit, `kill`) stops it as Ctrl-C does: the
run's SIGINT handler of the moment gets it (Tune's during a sweep; the end to end case, a
driver process sent SIGTERM, is tests/test_faults.py's interrupted sweep)."""

from __future__ import annotations

import os
import signal

import pytest

from mutransfer.sweep.run.cluster import terminate_as_interrupt


@pytest.fixture
def sigint_handler():
    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)


def test_sigterm_goes_to_the_sigint_handler_in_force_then_the_old_one_is_back(sigint_handler):
    got: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    before = signal.getsignal(signal.SIGTERM)
    with terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
    assert got == [signal.SIGINT]
    assert signal.getsignal(signal.SIGTERM) is before


def test_under_pythons_own_sigint_handler_sigterm_is_a_keyboard_interrupt(sigint_handler):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
