"""Causal long convolution by FFT: the S4D mixer's kernel product and the init estimators'."""

from __future__ import annotations

import torch


def fft_conv(u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Causal convolution y_t = Σ_{l<=t} k_l u_{t-l} along the last axis (FFT of length 2L)."""
    length = u.shape[-1]
    n = 2 * length
    if k.is_complex() or u.is_complex():
        y = torch.fft.ifft(torch.fft.fft(u, n=n) * torch.fft.fft(k, n=n), n=n)
    else:
        y = torch.fft.irfft(torch.fft.rfft(u, n=n) * torch.fft.rfft(k, n=n), n=n)
    return y[..., :length]
