"""Synthetic tasks: targets checked against the task's formula computed directly."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mutransfer.data import IGNORE_INDEX, DataConfig, load_data
from mutransfer.data.synthetic import memory_kernel
from mutransfer.errors import UserError
from tests.conftest import same, take


def memory(**kw):
    return load_data(DataConfig(source="synthetic", task="memory", **kw))


def copy(**kw):
    return load_data(DataConfig(source="synthetic", task="copy", **kw))


def rho_direct(kind: str, k: int, tau=16.0, power=1.0, omega=0.4) -> float:
    if kind == "exp":
        return math.exp(-k / tau)
    if kind == "poly":
        return (k + 1) ** -power
    return math.exp(-k / tau) * math.cos(omega * k)


def targets_direct(x: np.ndarray, rho: list[float]) -> np.ndarray:
    """y_t = sum_{k=0}^{K} rho(k) x_{t-k}, x = 0 before the start: the formula, looped."""
    y = np.zeros_like(x)
    for b in range(x.shape[0]):
        for t in range(x.shape[1]):
            y[b, t] = sum(rho[k] * x[b, t - k] for k in range(len(rho)) if t - k >= 0)
    return y


@pytest.mark.parametrize("kind,params", [
    ("exp", {"tau": 5.0}),
    ("poly", {"power": 0.7}),
    ("osc", {"tau": 9.0, "omega": 1.1}),
])
@pytest.mark.parametrize("normalize", [True, False])
def test_memory_targets_follow_the_formula(kind, params, normalize):
    horizon = 11
    src = memory(rho=kind, horizon=horizon, normalize=normalize, **params)
    rho = [rho_direct(kind, k, **params) for k in range(horizon + 1)]
    if normalize:
        scale = math.sqrt(sum(r * r for r in rho))
        rho = [r / scale for r in rho]
    x, y = next(src.batches("train", 3, 40, seed=2))
    assert x.shape == y.shape == (3, 40, 1) and x.dtype == y.dtype == torch.float32
    want = targets_direct(x[..., 0].double().numpy(), rho)
    np.testing.assert_allclose(y[..., 0].numpy(), want, rtol=1e-5, atol=1e-5)


def test_memory_defaults_span_the_whole_sequence_with_unit_variance_targets():
    src = memory(rho="poly")
    assert src.spec.kind == "real" and src.spec.input_dim == src.spec.output_dim == 1
    assert src.spec.loss == "mse" and src.spec.vocab_size is None
    rho = memory_kernel(DataConfig(source="synthetic", rho="poly"), 64)
    assert len(rho) == 64 and math.isclose(float(np.sum(rho**2)), 1.0)
    x, y = next(src.batches("train", 512, 64, seed=0))
    assert abs(float(x.var()) - 1.0) < 0.05
    assert abs(float(y[:, -1].var()) - 1.0) < 0.2  # the last step sees the whole kernel


def test_memory_train_and_eval_are_different_streams_and_resume():
    src = memory()
    train = take(src.batches("train", 2, 16, seed=0), 6)
    held = take(src.batches("eval", 2, 16, seed=0), 6)
    assert not any(torch.equal(a[0], b[0]) for a, b in zip(train, held))
    again = take(src.batches("train", 2, 16, seed=0, start=4), 2)
    assert same(train[4:], again)


def test_copy_layout_and_targets_only_on_the_answer():
    src = copy(n_symbols=5, copy_len=4, lag=3)
    assert src.spec.kind == "tokens" and src.spec.vocab_size == src.spec.output_dim == 7
    assert src.spec.loss == "ce"
    x, y = next(src.batches("train", 6, 20, seed=1))
    assert x.shape == y.shape == (6, 20) and x.dtype == y.dtype == torch.int64
    blank, delim = 5, 6
    symbols = x[:, :4]
    assert bool((symbols < 5).all())
    assert bool((x[:, 4:7] == blank).all())  # the lag
    assert bool((x[:, 7] == delim).all())  # the delimiter after copy_len + lag
    assert bool((x[:, 8:] == blank).all())  # no teacher forcing
    assert torch.equal(y[:, 7:11], symbols)  # the answer, from the delimiter on
    scored = y != IGNORE_INDEX
    assert int(scored.sum()) == 6 * 4 and bool(scored[:, 7:11].all())


def test_copy_default_lag_fills_the_sequence_and_short_sequences_fail():
    x, y = next(copy(copy_len=3).batches("eval", 2, 12, seed=0))
    assert torch.equal(y[:, -3:], x[:, :3]) and bool((y[:, :-3] == IGNORE_INDEX).all())
    with pytest.raises(UserError, match="seq_len >= 2 \\* copy_len \\+ lag = 13"):
        copy(copy_len=5, lag=3).batches("train", 2, 12, seed=0)


def test_copy_resumes_and_depends_on_the_seed():
    src = copy()
    full = take(src.batches("train", 4, 32, seed=7), 5)
    assert torch.equal(full[3][0], next(src.batches("train", 4, 32, seed=7, start=3))[0])
    assert not torch.equal(full[0][0], next(src.batches("train", 4, 32, seed=8))[0])
