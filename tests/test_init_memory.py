"""imag_init memory: a memory function from data, its dominant frequencies taken greedily with a
minimum separation, and S4D-Lin frequencies for the remaining modes."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.data.config import DataConfig
from mutransfer.data.synthetic import memory_kernel
from mutransfer.errors import UserError
from mutransfer.init import memory
from mutransfer.models.build import build_model
from mutransfer.train import run_trial


@pytest.mark.parametrize("rho", ["exp", "poly", "osc"])
def test_ridge_regression_recovers_the_task_s_memory_function(rho: str) -> None:
    data = DataConfig(source="synthetic", task="memory", rho=rho, tau=8.0, horizon=40)
    x, y = next(load_data(data).batches("train", 16, 256, seed=0))
    est = memory.ridge_memory(x[..., 0], y[..., 0], max_lag=60, ridge=1e-4)
    true = torch.zeros(61, dtype=torch.float64)
    true[:41] = torch.from_numpy(memory_kernel(data, 256))
    assert (est - true).norm() / true.norm() < 0.005


def test_dominant_frequency_of_an_oscillating_memory() -> None:
    k = torch.arange(512, dtype=torch.float64)
    rho = torch.exp(-k / 100) * torch.cos(0.7 * k)
    theta = memory.dominant_frequencies(rho, 1)
    assert theta[0] == pytest.approx(0.7, abs=2 * math.pi / 2048)


def test_greedy_choice_keeps_the_minimum_separation() -> None:
    k = torch.arange(256, dtype=torch.float64)
    rho = (k + 1) ** -1.0  # a low-pass memory: the largest bins crowd around 0
    crowded = memory.dominant_frequencies(rho, 6)
    assert crowded.max() < 0.05
    spaced = memory.dominant_frequencies(rho, 6, min_separation=0.2)
    assert len(spaced) == 6 and spaced[0] == 0
    gaps = (spaced[:, None] - spaced[None, :]).abs() + 10 * torch.eye(6)
    assert gaps.min() >= 0.2 - 1e-12
    # greedy: each pick is the largest bin that keeps its distance to the picks before it
    theta, mag = memory.spectrum(rho)
    for i in range(1, 6):
        allowed = ((theta[:, None] - spaced[None, :i]).abs() >= 0.2).all(dim=1)
        assert mag[theta == spaced[i]] == mag[allowed].max()


def test_remaining_modes_take_lin_frequencies_away_from_the_chosen() -> None:
    dt = torch.tensor([0.1, 0.01])
    chosen = torch.tensor([0.3])  # θ = 0.3 rad/step
    im = memory.imag_parts(chosen, dt, modes=4, min_separation=0.05)
    assert torch.allclose(im[:, 0], torch.tensor([3.0, 30.0]))  # θ/Δ
    # channel 0: Lin θ = πnΔ = 0, 0.314 (too close to 0.3: skipped), 0.628, 0.942
    assert torch.allclose(im[0, 1:], math.pi * torch.tensor([0.0, 2.0, 3.0]))
    # channel 1: Lin θ = 0.0314 n, none within 0.05 of 0.3 among n = 0, 1, 2
    assert torch.allclose(im[1, 1:], math.pi * torch.tensor([0.0, 1.0, 2.0]))


def _cfg(memory_source: str, **data) -> TrialConfig:
    return TrialConfig(
        width=16, model={"arch": "s4d", "n_layer": 1, "d_state": 8, "base_width": 16,
                         "imag_init": {"scheme": "memory", "memory": memory_source,
                                       "min_separation": 0.1}},
        data={"source": "synthetic", "task": "memory", **data},
        train={"seq_len": 256})


@pytest.mark.parametrize("memory_source", ["ridge", "task"])
def test_s4d_gets_the_task_s_frequency(memory_source: str) -> None:
    cfg = _cfg(memory_source, rho="osc", tau=64.0, omega=0.9)
    source = load_data(cfg.data)
    batch = next(source.batches("train", 16, 256, seed=0))
    model = build_model(cfg, source.spec, sample=batch)
    mixer = model.layers[0].mixer
    theta = (mixer.A_im * mixer.dt()[:, None]).detach()
    assert torch.allclose(theta[:, 0], torch.full((16,), 0.9), atol=0.01)
    assert (theta[:, 1:] - 0.9).abs().min() >= 0.1 - 1e-4


def test_misuse_is_a_user_error() -> None:
    cfg = _cfg("ridge")
    spec = load_data(cfg.data).spec
    with pytest.raises(UserError, match="targets"):
        build_model(cfg, spec, sample=torch.randn(2, 64, 1))
    mamba = cfg.model_copy(update={"model": cfg.model.model_copy(update={"arch": "mamba"})})
    with pytest.raises(UserError, match="complex A"):
        build_model(mamba, spec, sample=(torch.randn(2, 64, 1), torch.randn(2, 64, 1)))
    with pytest.raises(ValueError, match="synthetic, task memory"):  # refused as a config
        TrialConfig(model=cfg.model, data={"source": "synthetic", "task": "copy"}, width=16)
    # the build's own checks, for a config put together without validation
    plain = cfg.model.model_copy(update={"imag_init": type(cfg.model.imag_init)()})
    tokens = TrialConfig(model=plain, width=16, data={"source": "synthetic", "task": "copy"}
                         ).model_copy(update={"model": cfg.model})
    with pytest.raises(UserError, match="synthetic, task memory"):
        build_model(tokens.model_copy(update={"model": _cfg("task").model}),
                    load_data(tokens.data).spec)
    copy = load_data(tokens.data)
    with pytest.raises(UserError, match="scalar real"):
        build_model(tokens, copy.spec, sample=next(copy.batches("train", 2, 64, seed=0)))


def _theta(mixer) -> torch.Tensor:
    """The discrete frequencies θ = Im(A)·Δ of an S4D mixer, (channels, modes)."""
    return (mixer.A_im * mixer.dt()[:, None]).detach()


def test_memory_task_takes_its_kernel_from_the_data_spec_it_is_handed() -> None:
    # The model reads the task's memory function from the spec the data source hands over,
    # not from the data config: a task whose kernel oscillates at 0.5 rad/step gets 0.5.
    cfg = _cfg("task", rho="osc", tau=64.0, omega=0.9)

    def kernel(length: int) -> np.ndarray:
        k = np.arange(length)
        return np.exp(-k / 64.0) * np.cos(0.5 * k)

    spec = dataclasses.replace(load_data(cfg.data).spec, memory_kernel=kernel)
    theta = _theta(build_model(cfg, spec).layers[0].mixer)
    assert torch.allclose(theta[:, 0], torch.full((16,), 0.5), atol=0.01)


class _FirstState:
    """A Checkpointer that keeps the first loop state offered (the model after step 1)."""

    def __init__(self) -> None:
        self.state: dict | None = None

    def load(self) -> None:
        return None

    def save(self, state: dict) -> bool:
        if self.state is None:
            self.state = {"model": {k: v.clone() for k, v in state["model"].items()}}
        return True


def test_run_trial_builds_the_model_with_the_task_s_own_kernel() -> None:
    # The user's path: run_trial loads the data, hands its spec to build_model, and the S4D
    # model starts on the task's frequency (one step at a negligible LR leaves it there).
    cfg = _cfg("task", rho="osc", tau=64.0, omega=0.9)
    cfg = TrialConfig.model_validate({**cfg.model_dump(), "train": {
        "seq_len": 256, "steps": 2, "eval_every": 1, "batch_size": 2, "eval_batches": 1,
        "lr": 1e-9}})
    saved = _FirstState()
    run_trial(cfg, checkpoint=saved)
    weights = saved.state["model"]
    theta = weights["layers.0.mixer.A_im"] * weights["layers.0.mixer.log_dt"].exp()[:, None]
    assert torch.allclose(theta[:, 0], torch.full((16,), 0.9), atol=0.01)
    assert (theta[:, 1:] - 0.9).abs().min() >= 0.1 - 1e-3
