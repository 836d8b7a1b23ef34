"""`mutransfer.run_trial` in a notebook: the trial trains with
subnormal floats flushed to zero (mutransfer/denormals.py), and the caller's thread computes
with them again afterwards. Before, the caller's process was left flushing: after one trial,
numpy's float32 1e-39 * 1 was 0 in the notebook. Each call runs in a thread of its own, whose
setting the test states first (an earlier test in this process may have flushed the main one)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest
import torch

import mutransfer
from mutransfer.denormals import flushing_here

if not torch.set_flush_denormal(False):  # a platform that cannot flush: nothing to restore
    pytest.skip("this CPU does not flush subnormals", allow_module_level=True)


def after_in_a_thread(call: Callable[[], object]) -> tuple[object, bool, float]:
    """call()'s value in a new thread that keeps subnormals, and then whether that thread
    flushes them and what float32 1e-39 * 1 is there."""
    got: list = []

    def body():
        torch.set_flush_denormal(False)
        value = call()
        got.append((value, flushing_here(), float(np.float32(1e-39) * np.float32(1.0))))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    return got[0]


def test_a_trial_run_from_python_leaves_the_callers_subnormals():
    config = mutransfer.TrialConfig(
        width=16, model={"n_layer": 1, "d_state": 4, "base_width": 16},
        train={"steps": 2, "batch_size": 2, "seq_len": 16, "eval_every": 2, "eval_batches": 1})
    result, flushing, product = after_in_a_thread(lambda: mutransfer.run_trial(config))
    assert result.steps_done == 2
    assert not flushing and product == pytest.approx(1e-39, rel=1e-3)



def test_a_coordinate_check_run_from_python_leaves_the_callers_subnormals():
    settings = mutransfer.CoordSettings(widths=[16, 32], n_layer=1, params=["sp"], steps=1,
                                        seeds=[0], batch_size=2, seq_len=16, d_state=4)
    result, flushing, product = after_in_a_thread(lambda: mutransfer.coord_check(settings))
    assert set(result.coord.width) == {16, 32}
    assert not flushing and product == pytest.approx(1e-39, rel=1e-3)
