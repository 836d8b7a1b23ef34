"""`denormals_flushed`: subnormal floats flushed to zero for a trial run in the caller's process
(a notebook's `mutransfer.run_trial`, `coord_check`), the calling thread set back afterwards.
`flush_denormals` alone left the caller flushing: after a trial, numpy's float32 1e-39 * 1 was
0 in the notebook. Each test runs in a thread of its own, whose setting it states first (the
setting is per thread, and an earlier test in this process may have flushed the main one)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest
import torch

from mutransfer.denormals import denormals_flushed, flush_denormals, flushing_here

if not torch.set_flush_denormal(False):  # a platform that cannot flush: nothing to restore
    pytest.skip("this CPU does not flush subnormals", allow_module_level=True)


def in_a_thread(body: Callable[[], object]) -> object:
    """body()'s value, computed in a new thread."""
    got: list = []
    thread = threading.Thread(target=lambda: got.append(body()))
    thread.start()
    thread.join()
    return got[0]


def subnormal_product() -> float:
    return float(np.float32(1e-39) * np.float32(1.0))


def test_the_block_flushes_subnormals_to_zero():
    def body():
        torch.set_flush_denormal(False)
        with denormals_flushed() as allowed:
            return allowed, flushing_here(), subnormal_product()

    assert in_a_thread(body) == (True, True, 0.0)


def test_the_calling_thread_keeps_its_subnormals_after_the_block():
    def body():
        torch.set_flush_denormal(False)
        with denormals_flushed():
            pass
        return flushing_here(), subnormal_product()

    flushing, product = in_a_thread(body)
    assert not flushing and product == pytest.approx(1e-39, rel=1e-3)


def test_the_calling_thread_is_set_back_when_the_block_raises():
    def body():
        torch.set_flush_denormal(False)
        with pytest.raises(RuntimeError), denormals_flushed():
            raise RuntimeError("the trial failed")
        return flushing_here()

    assert in_a_thread(body) is False


def test_a_thread_that_flushed_before_the_block_still_flushes_after_it():
    def body():
        flush_denormals()
        with denormals_flushed():
            pass
        return flushing_here()

    assert in_a_thread(body) is True
