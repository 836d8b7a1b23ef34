"""imag_init memory places each chosen frequency θ (radians per step) on a mode that turns by
θ per step under the mixer's own discretization.

Im(A) = θ/Δ holds for ZOH (Ā = e^{ΔA}, arg Ā = Im(A)·Δ), not for the bilinear map
(Ā = (1 + ΔA/2)/(1 - ΔA/2), arg Ā = 2·atan(Im(A)·Δ/2) at Re(A) = 0). With
`s4d.discretization: bilinear`, θ/Δ put the memory's peak at 2.50 rad on modes turning by
1.79 rad, and squeezed the chosen set together (2.09-2.71 became 1.61-1.87). The phases here
are computed from Ā directly, not through the code's frequency conversion.
"""

from __future__ import annotations

import math

import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.init import memory
from mutransfer.models.build import build_model

LENGTH = 128


def phases(mixer) -> torch.Tensor:
    """arg Ā per (channel, mode), Ā from the textbook formulas in float64."""
    a = torch.complex(mixer.A_re, mixer.A_im).detach().to(torch.complex128)
    dt = mixer.dt().detach().double()[:, None]
    if mixer.discretization == "zoh":
        da = torch.exp(dt * a)
    else:
        da = (1 + dt * a / 2) / (1 - dt * a / 2)
    return torch.angle(da).abs()


@pytest.mark.parametrize("discretization", ["zoh", "bilinear"])
def test_the_chosen_frequencies_are_the_modes_phases_per_step(discretization: str) -> None:
    cfg = TrialConfig(
        width=64, model={"arch": "s4d", "n_layer": 2, "d_state": 16, "base_width": 64,
                         "s4d": {"discretization": discretization},
                         "imag_init": {"scheme": "memory", "memory": "task",
                                       "min_separation": 0.2}},
        train={"steps": 1, "batch_size": 2, "seq_len": LENGTH, "eval_every": 1,
               "eval_batches": 1, "device": "cpu"},
        data={"source": "synthetic", "task": "memory", "rho": "osc", "omega": 2.5, "tau": 32})
    source = load_data(cfg.data)
    model = build_model(cfg, source.spec)
    rho = torch.from_numpy(source.spec.memory_kernel(LENGTH))
    modes = model.layers[0].mixer.modes
    chosen = memory.dominant_frequencies(rho, modes, 0.2)
    assert abs(float(chosen[0]) - 2.5) < 0.02  # the memory's peak: a high frequency
    for layer in model.layers:
        got = phases(layer.mixer)[:, : chosen.numel()]
        # Re(A) = -1/2 moves the bilinear phase at second order in Δ/4 only (Δ <= 0.1)
        assert torch.allclose(got, chosen[None, :].expand_as(got), atol=2e-3), (
            got[0], chosen)


def test_lin_fill_keeps_its_distance_in_the_bilinear_phase() -> None:
    """At Δ = 0.5, Lin's n = 1 (Im = π) turns by 2·atan(π/4) = 1.333 rad per step under the
    bilinear map (ZOH: π/2). With 1.333 chosen, that Lin mode would repeat the chosen
    eigenvalue's phase; it must be skipped, as it is under ZOH for θ = π/2."""
    theta = 2 * math.atan(math.pi / 4)
    dt = torch.tensor([0.5], dtype=torch.float64)
    im = memory.imag_parts(torch.tensor([theta], dtype=torch.float64), dt, 3, 0.1,
                           "bilinear").double()
    turned = 2 * torch.atan(im * dt[:, None] / 2)
    assert abs(float(turned[0, 0]) - theta) < 1e-6
    assert ((turned[0, 1:] - theta).abs() >= 0.1).all(), turned
