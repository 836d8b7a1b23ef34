"""A memory function from data, its dominant frequencies, and imaginary parts chosen from them.

Memory function: the linear filter rho with y_t ≈ Σ_{k=0}^{K} rho(k) x_{t-k}, fitted by ridge
regression of the targets on the lagged inputs (inputs zero before the sequence starts). The
normal equations (XᵀX/N + α·r0·I) rho = Xᵀy/N are solved by conjugate gradients, with X v and
Xᵀ w as FFT convolutions, so the (N × K) design matrix is never formed.

Frequencies are discrete, in radians per step, folded into [0, π] (a real kernel's spectrum is
symmetric, and each S4D mode comes with its conjugate): a mode of a channel with timescale Δ
turns by θ = arg(Ā) per step, Im(A)·Δ under ZOH (Ā = e^{ΔA}) but 2·atan(Im(A)·Δ/2) under the
bilinear map (Ā = (1 + ΔA/2)/(1 - ΔA/2), at Re(A) = 0), whose frequency axis is warped:
`imag_of` and `frequency_of` convert either way.
"""

from __future__ import annotations

import math

import torch

from mutransfer.init.autocorr import as_rows
from mutransfer.ops.fft_conv import fft_conv


def _lagged_apply(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """(X v)_{i,t} = Σ_k v_k x_{i,t-k}: x (n, L), v (K+1,) -> (n, L)."""
    return fft_conv(x, v.expand(x.shape[0], -1))


def _lagged_adjoint(x: torch.Tensor, w: torch.Tensor, lags: int) -> torch.Tensor:
    """(Xᵀ w)_k = Σ_i Σ_t w_{i,t} x_{i,t-k}, k = 0..lags-1."""
    length = x.shape[-1]
    n = 2 * length
    spec = torch.fft.rfft(w, n=n) * torch.fft.rfft(x, n=n).conj()
    return torch.fft.irfft(spec.sum(0), n=n)[:lags]


def conjugate_gradient(matvec, b: torch.Tensor, *, iters: int = 500, tol: float = 1e-8
                       ) -> torch.Tensor:
    """Solve M z = b for a symmetric positive definite operator M."""
    z = torch.zeros_like(b)
    r = b.clone()
    p = r.clone()
    rs = r @ r
    stop = tol * tol * (b @ b)
    for _ in range(iters):
        if rs <= stop:
            break
        mp = matvec(p)
        alpha = rs / (p @ mp)
        z = z + alpha * p
        r = r - alpha * mp
        rs_new = r @ r
        p = r + (rs_new / rs) * p
        rs = rs_new
    return z


def ridge_memory(inputs: torch.Tensor, targets: torch.Tensor, *, max_lag: int | None = None,
                 ridge: float = 1e-3) -> torch.Tensor:
    """rho(0..K) fitted to (inputs, targets), each (n, L); K = max_lag or L - 1.

    `ridge` is relative to the mean square of the inputs, so it does not depend on their scale.
    """
    x, y = as_rows(inputs), as_rows(targets)
    length = x.shape[-1]
    lags = min(length, (max_lag if max_lag is not None else length - 1) + 1)
    rows = x.numel()
    damping = ridge * float((x * x).mean())

    def normal(v: torch.Tensor) -> torch.Tensor:
        return _lagged_adjoint(x, _lagged_apply(x, v), lags) / rows + damping * v

    return conjugate_gradient(normal, _lagged_adjoint(x, y, lags) / rows)


def fold(theta: torch.Tensor) -> torch.Tensor:
    """Frequencies folded into [0, π]: θ and -θ (and θ + 2πk) are one frequency here."""
    return torch.abs(torch.remainder(theta + math.pi, 2 * math.pi) - math.pi)


def spectrum(rho: torch.Tensor, n_fft: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(θ, |FFT(rho)|) on the grid θ_j = 2πj/n_fft in [0, π]; n_fft >= 4·len(rho) by default."""
    n = n_fft or 1 << (4 * rho.numel() - 1).bit_length()
    mag = torch.fft.rfft(rho.to(torch.float64), n=n).abs()
    theta = 2 * math.pi * torch.arange(mag.numel(), dtype=torch.float64) / n
    return theta, mag


def dominant_frequencies(rho: torch.Tensor, count: int, min_separation: float = 0.0,
                         n_fft: int | None = None) -> torch.Tensor:
    """Up to `count` frequencies of |FFT(rho)|, largest first, each at least `min_separation`
    from those already taken (greedy)."""
    theta, mag = spectrum(rho, n_fft)
    chosen: list[float] = []
    for j in torch.argsort(mag, descending=True).tolist():
        if len(chosen) == count:
            break
        t = float(theta[j])
        if all(abs(t - c) >= min_separation for c in chosen):
            chosen.append(t)
    return torch.tensor(chosen, dtype=torch.float64)


DISCRETIZATIONS = ("zoh", "bilinear")
# the bilinear map reaches θ = π only as Im(A) -> ∞: a chosen θ is taken at most this close
# to π (Im(A) = (2/Δ)·tan(θ/2) ≈ 4000/Δ there)
BILINEAR_NYQUIST_MARGIN = 1e-3


def imag_of(theta: torch.Tensor, dt: torch.Tensor, discretization: str = "zoh") -> torch.Tensor:
    """Im(A) whose mode turns by θ ∈ [0, π] per step at Δ (Re(A) = 0; a Re(A) with |Re(A)|·Δ
    small moves the bilinear phase at second order only): ZOH θ/Δ, bilinear (2/Δ)·tan(θ/2)."""
    if discretization == "zoh":
        return theta / dt
    if discretization == "bilinear":
        theta = theta.clamp(max=math.pi - BILINEAR_NYQUIST_MARGIN)
        return 2 / dt * torch.tan(theta / 2)
    raise ValueError(f"unknown discretization {discretization!r}; choose from {DISCRETIZATIONS}")


def frequency_of(im: torch.Tensor, dt: torch.Tensor, discretization: str = "zoh"
                 ) -> torch.Tensor:
    """θ per step, folded into [0, π], of a mode with imaginary part Im(A) at Δ (imag_of's
    inverse, at Re(A) = 0)."""
    if discretization == "zoh":
        return fold(im * dt)
    if discretization == "bilinear":
        return fold(2 * torch.atan(im * dt / 2))
    raise ValueError(f"unknown discretization {discretization!r}; choose from {DISCRETIZATIONS}")


def imag_parts(chosen: torch.Tensor, dt: torch.Tensor, modes: int,
               min_separation: float = 0.0, discretization: str = "zoh") -> torch.Tensor:
    """Im(A) (H, modes): the chosen θ as imag_of(θ, Δ_h) (ZOH: θ/Δ_h), then S4D-Lin (Im = πn,
    n = 0, 1, ...) for the remaining modes, skipping Lin values whose θ (ZOH: πnΔ_h) lies
    closer than `min_separation` to a chosen one (taken anyway, in order, if too few pass; one
    whose θ equals a chosen one only after all others, as it would repeat that mode's
    eigenvalue). `discretization`: the mixer's, which maps Im(A) to θ (before, θ/Δ under
    bilinear too put a chosen 2.50 rad at 1.79)."""
    dt = dt.detach().to(torch.float64)
    chosen = chosen[:modes].to(torch.float64)
    channels, need = dt.numel(), modes - chosen.numel()
    out = torch.empty(channels, modes, dtype=torch.float64)
    out[:, : chosen.numel()] = imag_of(chosen[None, :], dt[:, None], discretization)
    if need == 0:
        return out.float()
    for h in range(channels):
        lin = math.pi * torch.arange(max(8 * modes, 64), dtype=torch.float64)
        if chosen.numel():
            theta = frequency_of(lin, dt[h], discretization)
            gap = (theta[:, None] - chosen[None, :]).abs().min(dim=1).values
            # the chosen frequencies can cover [0, π] (modes · min_separation > π): then Lin
            # values too close are taken, but an exact repeat (θ = 0 from n = 0, after a
            # chosen DC) only last: before, every channel got A = -½ twice
            new = gap > 1e-12
            far = (gap >= min_separation) & new
            lin = torch.cat([lin[far], lin[~far & new], lin[~new]])
        out[h, chosen.numel():] = lin[:need]
    return out.float()
