"""The `triton` scan backend: an autograd.Function over the kernels of `triton_kernels`.

Same inputs and options as `selective_scan_reference`. The Δ bias and softplus, the D skip
and the SiLU(z) gate are fused into the kernels; state and accumulation are float32, inputs
float32 or bf16, outputs in u's dtype. Memory: forward saves its inputs and one float32
state per chunk, (batch, ceil(L / chunk), n, dim); backward recomputes the states inside each
chunk from that checkpoint (as the CUDA kernel of state-spaces/mamba does) instead of storing
all (batch, dim, n, L) of them.

Reductions across channels: dB and dC by float32 atomic adds (one per program per element,
after summing the program's channels in registers); dA, dD and dΔbias by writing one partial
per (batch, channel) and summing over batch here.

triton is imported lazily: this module imports without it, and calling the backend without it
(or on CPU tensors without TRITON_INTERPRET=1) raises a UserError.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

import torch
from torch.autograd.function import once_differentiable

from mutransfer.errors import UserError


@dataclass(frozen=True)
class ScanConfig:
    """Launch parameters. `chunk` is also the checkpoint interval; all sizes powers of two.

    Defaults from a static look at sm_90a code (triton 3.9 + ptxas, bf16, not yet timed on a
    GPU): the forward tile of 32 x 64 over 8 warps uses 118 registers, the backward tile over
    16 warps 128, neither spills; `benchmarks/scan.py --sweep` times the alternatives.
    """

    chunk: int = 64
    fwd_block_d: int = 32
    bwd_block_d: int = 32
    fwd_warps: int = 8
    bwd_warps: int = 16
    # flip + forward scan instead of `associative_scan(reverse=True)` in the backward
    reverse_by_flip: bool = False

    def __post_init__(self) -> None:
        for name in ("chunk", "fwd_block_d", "bwd_block_d", "fwd_warps", "bwd_warps"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"ScanConfig.{name} must be a power of two, got {value}")


DEFAULT_CONFIG = ScanConfig()


def load_kernels() -> ModuleType:
    """The kernels module, or a UserError naming the fix when triton is missing."""
    try:
        return importlib.import_module("mutransfer.ops.triton_kernels")
    except ImportError as exc:
        raise UserError(
            f"scan backend 'triton' needs the triton package ({exc}); install "
            "'mutransfer[triton]' or use scan backend 'chunked'") from exc


def kernels_interpreted(kernels: ModuleType) -> bool:
    """True when the kernels were built by the Triton interpreter (TRITON_INTERPRET=1)."""
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(kernels.scan_fwd_kernel, InterpretedFunction)


def check_device(device: torch.device, interpreted: bool) -> None:
    """Compiled kernels run on CUDA only; the interpreter runs anywhere."""
    if device.type != "cuda" and not interpreted:
        raise UserError(
            f"scan backend 'triton' needs CUDA tensors (got {device.type}); set "
            "TRITON_INTERPRET=1 before triton is imported to run it on the CPU, slowly")


def check_shapes(u, delta, A, B, C, D, z, delta_bias) -> None:
    """Shapes as in selective_scan_ref (real A, B and C varying with batch and time)."""
    if u.dim() != 3 or delta.shape != u.shape:
        raise ValueError(f"u and delta must be (batch, dim, L) alike, got {tuple(u.shape)} "
                         f"and {tuple(delta.shape)}")
    batch, dim, L = u.shape
    if A.dim() != 2 or A.shape[0] != dim or A.is_complex():
        raise ValueError(f"A must be real (dim, n) with dim={dim}, got {tuple(A.shape)}")
    n = A.shape[1]
    for name, t in (("B", B), ("C", C)):
        if tuple(t.shape) != (batch, n, L):
            raise ValueError(f"{name} must be (batch, n, L) = {(batch, n, L)}, "
                             f"got {tuple(t.shape)}")
    for name, t in (("D", D), ("delta_bias", delta_bias)):
        if t is not None and tuple(t.shape) != (dim,):
            raise ValueError(f"{name} must be (dim,) = ({dim},), got {tuple(t.shape)}")
    if z is not None and z.shape != u.shape:
        raise ValueError(f"z must be shaped like u {tuple(u.shape)}, got {tuple(z.shape)}")


def n_chunks(L: int, config: ScanConfig) -> int:
    return -(-L // config.chunk)


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _grid(batch: int, dim: int, block_d: int) -> tuple[int, int]:
    return (batch, -(-dim // block_d))


def _forward(kernels, u, delta, A, B, C, D, z, delta_bias, softplus, config):
    """Returns out (u's dtype) and the chunk checkpoints (batch, n_chunks, n, dim) float32."""
    batch, dim, L = u.shape
    n = A.shape[1]
    chunks = n_chunks(L, config)
    out = torch.empty_like(u)
    ckpt = torch.empty(batch, chunks, n, dim, device=u.device, dtype=torch.float32)
    kernels.scan_fwd_kernel[_grid(batch, dim, config.fwd_block_d)](
        u, delta, A, B, C, D if D is not None else u, z if z is not None else u,
        delta_bias if delta_bias is not None else u, out, ckpt, dim, L, n, chunks,
        HAS_D=D is not None, HAS_Z=z is not None, HAS_BIAS=delta_bias is not None,
        SOFTPLUS=softplus, BLOCK_D=config.fwd_block_d, CHUNK=config.chunk,
        num_warps=config.fwd_warps)
    return out, ckpt


def _backward(kernels, saved, dout, softplus, config):
    """All gradients, each in its input's dtype (None for absent D, z, delta_bias)."""
    u, delta, A, B, C, D, z, delta_bias, ckpt = saved
    batch, dim, L = u.shape
    n = A.shape[1]
    f32 = dict(device=u.device, dtype=torch.float32)
    du, ddelta = torch.empty_like(u), torch.empty_like(delta)
    dz = torch.empty_like(z) if z is not None else None
    dB, dC = torch.zeros(batch, n, L, **f32), torch.zeros(batch, n, L, **f32)
    dA_part = torch.empty(batch, dim, n, **f32)
    carry = torch.empty(batch, 2, n, dim, **f32)  # the adjoint's chunk-to-chunk scratch
    dD_part, dbias_part = torch.empty(batch, dim, **f32), torch.empty(batch, dim, **f32)
    kernels.scan_bwd_kernel[_grid(batch, dim, config.bwd_block_d)](
        u, delta, A, B, C, D if D is not None else u, z if z is not None else u,
        delta_bias if delta_bias is not None else u, ckpt, carry, dout,
        du, ddelta, dz if dz is not None else du, dB, dC, dA_part, dD_part, dbias_part,
        dim, L, n, ckpt.shape[1],
        HAS_D=D is not None, HAS_Z=z is not None, HAS_BIAS=delta_bias is not None,
        SOFTPLUS=softplus, BLOCK_D=config.bwd_block_d, CHUNK=config.chunk,
        N_PAD=_pow2(n), BY_FLIP=config.reverse_by_flip, num_warps=config.bwd_warps)
    dD = dD_part.sum(0).to(D.dtype) if D is not None else None
    dbias = dbias_part.sum(0).to(delta_bias.dtype) if delta_bias is not None else None
    return (du, ddelta, dA_part.sum(0).to(A.dtype), dB.to(B.dtype), dC.to(C.dtype),
            dD, dz, dbias)


class SelectiveScanFn(torch.autograd.Function):
    """Triton forward and backward; saves inputs and per-chunk states only."""

    @staticmethod
    def forward(ctx, u, delta, A, B, C, D, z, delta_bias, softplus: bool, config: ScanConfig):
        kernels = load_kernels()
        check_device(u.device, kernels_interpreted(kernels))
        u, delta, A, B, C = (t.contiguous() for t in (u, delta, A, B, C))
        D, z, delta_bias = (t.contiguous() if t is not None else None
                            for t in (D, z, delta_bias))
        out, ckpt = _forward(kernels, u, delta, A, B, C, D, z, delta_bias, softplus, config)
        ctx.save_for_backward(u, delta, A, B, C, D, z, delta_bias, ckpt)
        ctx.softplus, ctx.config = softplus, config
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        grads = _backward(load_kernels(), ctx.saved_tensors, dout.contiguous(), ctx.softplus,
                          ctx.config)
        return (*grads, None, None)


def _states(u, delta, A, B, C, delta_bias, delta_softplus):
    """All states (batch, dim, n, L) float32, from the reference loop (inspection only)."""
    from mutransfer.ops.common import ScanInputs
    from mutransfer.ops.reference import scan_reference

    with torch.no_grad():
        inp = ScanInputs.prepare(u, delta, A, B, C, delta_bias, delta_softplus)
        return scan_reference(inp, return_states=True)[1]


def selective_scan_triton(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                          delta_softplus=False, return_states=False,
                          config: ScanConfig | None = None):
    """Selective scan with Triton kernels; `return_states` adds states from the reference."""
    check_shapes(u, delta, A, B, C, D, z, delta_bias)
    out = SelectiveScanFn.apply(u, delta, A, B, C, D, z, delta_bias, bool(delta_softplus),
                                config or DEFAULT_CONFIG)
    if return_states:
        return out, _states(u, delta, A, B, C, delta_bias, delta_softplus)
    return out
