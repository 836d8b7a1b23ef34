"""Causal long convolution by FFT: the S4D mixer's kernel product and the init estimators'."""

from __future__ import annotations

import torch


def fft_conv(u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Causal convolution y_t = Σ_{l<=t} k_l u_{t-l} along the last axis (FFT of length 2L).

    k may be shorter than u (zeros after its end) or longer (only its first L taps reach the
    output; past 2L the FFT would wrap them around onto the early outputs). Real inputs below
    float32 (bf16, float16: torch's CPU FFT has no kernels for them) are transformed in float32;
    y comes back in the dtype u and k promote to."""
    length = u.shape[-1]
    n = 2 * length
    k = k[..., :length]
    out = torch.promote_types(u.dtype, k.dtype)
    if k.is_complex() or u.is_complex():
        y = torch.fft.ifft(torch.fft.fft(u, n=n) * torch.fft.fft(k, n=n), n=n)
    else:
        wide = torch.promote_types(out, torch.float32)
        y = torch.fft.irfft(torch.fft.rfft(u.to(wide), n=n) * torch.fft.rfft(k.to(wide), n=n),
                            n=n)
    return y[..., :length].to(out)
