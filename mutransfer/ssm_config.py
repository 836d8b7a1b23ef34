"""Config of SSM initialization schemes (Liu & Li, ICLR 2025) and of the S4D mixer.

Every field is a plain value, so any of them can be a sweep axis by its dotted path
(e.g. `model.dt_init.kappa`, `model.imag_init.min_separation`, `model.s4d.init`).
How they are applied: mutransfer/models/data_init.py (init schemes), mutransfer/models/s4d.py
(the S4D mixer). Part of the trial-config schema (mutransfer/config.py), so it lives in the config
layer: reading a config or a sweep plan imports no model code (and no torch).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mutransfer.configbase import StrictModel


class DtInit(StrictModel):
    """The timescale Δ of each SSM channel at init.

    log_uniform: Δ ~ logU[dt_min, dt_max] (the reference init).
    autocorr: Δ* = kappa / sqrt(L · λ_max(R)), R the uncentred autocorrelation matrix of the
      sequences entering the layer's SSM (pooled over its channels), estimated from a sample
      batch at init; each channel's Δ is log-uniform in [Δ*/√spread, Δ*·√spread] (geometric
      mean Δ*; spread 1 gives every channel Δ*).
    estimator: toeplitz assumes stationarity and estimates R as the Toeplitz matrix of the
      sample's autocorrelation (consistent from a few sequences); sample uses R̂ = XᵀX/n with
      the sequences as rows, whose λ_max is biased upwards by about (1 + √(L/n))² when there
      are fewer sequences n than positions L.
    """

    scheme: Literal["log_uniform", "autocorr"] = "log_uniform"
    kappa: float = Field(1.0, gt=0)
    spread: float = Field(10.0, ge=1)
    estimator: Literal["toeplitz", "sample"] = "toeplitz"


class ImagInit(StrictModel):
    """The imaginary parts of a complex diagonal A (S4D only; Mamba's A is real).

    default: those of the S4D init (`model.s4d.init`).
    memory: estimate a memory function rho(k) (ridge: regression of the sample's targets on
      its lagged inputs; task: the synthetic memory task's own rho), take the frequencies of
      |FFT(rho)| greedily from the largest, skipping any closer than `min_separation` to one
      already taken, and fill the remaining modes with S4D-Lin frequencies. Frequencies are
      discrete, in radians per step (θ ∈ [0, π], the phase a mode turns by per step); per
      channel Im(A) = θ/Δ under ZOH, (2/Δ)·tan(θ/2) under the bilinear discretization.
      Liu & Li: spacing ≳ log(N)/L keeps the learning problem well conditioned, a smaller
      spacing fits the memory more closely (approximation vs estimation).
    """

    scheme: Literal["default", "memory"] = "default"
    min_separation: float = Field(0.0, ge=0)  # radians per step
    memory: Literal["ridge", "task"] = "ridge"
    ridge: float = Field(1e-3, gt=0)  # relative to the input's variance
    max_lag: int | None = Field(None, ge=1)  # lags in the regression; None: seq_len - 1


class S4DOptions(StrictModel):
    """The S4D mixer (mutransfer/models/s4d.py).

    ssm_roles: vector treats B and C like every other per-channel parameter (A, Δ, D);
    ssm gives them the roles ssm_B and ssm_C, so that a sweep can set their LR apart
    (param.overrides.ssm_B.lr_mult) and the tables' ssm_B/ssm_C rules apply to them in full.
    """

    init: Literal["lin", "inv", "legs", "real"] = "lin"
    discretization: Literal["zoh", "bilinear"] = "zoh"
    output: Literal["glu", "gated"] = "glu"
    ssm_roles: Literal["vector", "ssm"] = "vector"


class Mamba2Options(StrictModel):
    """The Mamba-2 (SSD) mixer (mutransfer/models/mamba2.py); d_state, expand, d_conv, dt_min,
    dt_max and dt_init_floor are the model's own fields, shared with mamba.

    widen: heads (the reference: head dim fixed at `headdim`, the number of heads grows with
    the width) or headdim (the number of heads fixed at the base width's, base d_inner /
    headdim; the head dim grows). `headdim` is the head dim at the base width in both.
    """

    headdim: int = Field(64, ge=1)
    ngroups: int = Field(1, ge=1)
    widen: Literal["heads", "headdim"] = "heads"
    chunk_size: int = Field(64, ge=1)
    A_init_min: float = Field(1.0, gt=0)
    A_init_max: float = Field(16.0, gt=0)
