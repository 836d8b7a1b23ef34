"""The `triton` scan backend: an autograd.Function over the kernels of `triton_kernels`.

Same inputs and options as `selective_scan_reference`. The Δ bias and softplus, the D skip
and the SiLU(z) gate are fused into the kernels; state and accumulation are float32, inputs
float32 or bf16, outputs in u's dtype.

Layouts: u, Δ, z and dout are read through their strides, so the (batch, L, channels) tensors
Mamba's projections produce are passed as transposed views without a copy; out, du, dΔ and dz
are allocated in the same dimension order as their inputs (a transposed view of a
(batch, L, channels) buffer when the input is one). B and C, (batch, n, L), are copied to
float32 with time contiguous (n/channels of an activation's size).

Memory: forward saves its inputs and one float32 state per checkpoint interval (chunk x
ckpt_chunks steps); backward recomputes the states in between (as the CUDA kernel of
state-spaces/mamba does) instead of storing all (batch, dim, n, L) of them.

triton is imported lazily: this module imports without it, and calling the backend without it
(or on CPU tensors without TRITON_INTERPRET=1) raises a UserError.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from types import ModuleType

import torch
from torch.autograd.function import once_differentiable

from mutransfer.errors import UserError
from mutransfer.ops.backends import triton_problem
from mutransfer.ops.common import check_shapes
from mutransfer.ops.reference import reference_states

_F32 = torch.float32


@dataclass(frozen=True)
class ScanConfig:
    """Launch parameters of the triton kernels (sizes are powers of two).

    - chunk, bwd_chunk: time steps each thread holds in registers in the forward and the
      backward; every state index is scanned over them inside the thread. At most 16 with
      one warp per program: Triton keeps a loaded vector (B and C of a chunk) in the
      registers of every thread only when it has fewer elements than the program has
      threads, else it passes it through shared memory.
    - ckpt_steps: the checkpoint interval, a multiple of both chunks. The forward saves one
      float32 state (n per channel) per interval; the backward recomputes the states at the
      chunk starts of an interval into a scratch of ckpt_steps / bwd_chunk + 2 states per
      channel and segment.
    - fwd_block_d, fwd_warps: channels and warps of a forward program (channels spread over
      lanes, then warps, then repeated in a thread).
    - bwd_block_d: channels of a backward program, which is one warp: 32 x channels per thread.
    - fwd_segments, bwd_segments: time segments scanned in parallel (whole checkpoint
      intervals each). None picks the fewest that give `target_programs` programs, capped
      so that the per-segment buffers stay under half an activation's size.
    - fwd_maxnreg, bwd_maxnreg: a register cap per thread for ptxas (None: its choice, up to
      255 with one-warp programs, i.e. 8 warps per SM); a lower cap fits more warps per SM
      and, past what the kernel needs, spills (the compile check shows both).

    Defaults from a static look at sm_90a code (triton 3.9 + ptxas, bf16); not yet timed on a
    GPU. `benchmarks/scan.py --sweep` times alternatives; `python -m
    mutransfer.ops.triton_compile_check` prints registers, spills, shared memory and the
    instructions per element of each kernel's inner loop.
    """

    chunk: int = 16
    bwd_chunk: int = 16
    ckpt_steps: int = 64
    fwd_block_d: int = 32
    fwd_warps: int = 1
    bwd_block_d: int = 32
    fwd_segments: int | None = None
    bwd_segments: int | None = None
    target_programs: int = 2048
    fwd_maxnreg: int | None = None
    bwd_maxnreg: int | None = None

    def __post_init__(self) -> None:
        for name in ("chunk", "bwd_chunk", "ckpt_steps", "fwd_block_d", "fwd_warps",
                     "bwd_block_d"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"ScanConfig.{name} must be a power of two, got {value}")
        for name in ("chunk", "bwd_chunk"):
            if getattr(self, name) > 32:
                raise ValueError(f"ScanConfig.{name} must be at most 32, got "
                                 f"{getattr(self, name)}")
        if self.ckpt_steps < max(self.chunk, self.bwd_chunk):
            raise ValueError(f"ScanConfig.ckpt_steps ({self.ckpt_steps}) must be a multiple "
                             f"of chunk ({self.chunk}) and bwd_chunk ({self.bwd_chunk})")
        if self.bwd_block_d < 32:
            raise ValueError("ScanConfig.bwd_block_d must be a multiple of 32 (one warp's "
                             f"lanes), got {self.bwd_block_d}")
        for name in ("fwd_segments", "bwd_segments"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"ScanConfig.{name} must be at least 1, got {value}")
        for name in ("fwd_maxnreg", "bwd_maxnreg"):
            value = getattr(self, name)
            if value is not None and not 24 <= value <= 255:
                raise ValueError(f"ScanConfig.{name} must be in [24, 255], got {value}")

    def launch_options(self, kernel: str) -> dict:
        """num_warps and maxnreg of the 'fwd' or 'bwd' kernels."""
        warps = self.fwd_warps if kernel == "fwd" else 1
        cap = self.fwd_maxnreg if kernel == "fwd" else self.bwd_maxnreg
        return {"num_warps": warps} | ({"maxnreg": cap} if cap else {})


DEFAULT_CONFIG = ScanConfig()


@dataclass(frozen=True)
class Segments:
    """How one kernel walks time: its chunks, and the segments they are cut into."""

    chunk: int
    n_chunks: int
    ckpt_chunks: int  # chunks per checkpoint interval
    count: int  # segments
    seg_chunks: int  # chunks per segment (whole intervals)


@dataclass(frozen=True)
class Plan:
    """Sizes of one scan: checkpoint slots, padded length, forward and backward walks."""

    n_ckpt: int  # checkpoint slots allocated (one per interval but the last, at least 1)
    L_pad: int  # B and C are padded with zeros to whole chunks of both walks
    fwd: Segments
    bwd: Segments


def _segments(chunk: int, L: int, config: ScanConfig, requested: int | None, programs: int,
              cap: float) -> Segments:
    """Whole intervals per segment, none empty; `cap` bounds the automatic count."""
    n_int = -(-L // config.ckpt_steps)
    want = requested or min(math.ceil(config.target_programs / max(programs, 1)),
                            max(1, int(cap)))
    seg_int = math.ceil(n_int / max(1, min(want, n_int)))
    per_int = config.ckpt_steps // chunk
    return Segments(chunk, -(-L // chunk), per_int, -(-n_int // seg_int), seg_int * per_int)


def plan(batch: int, dim: int, n: int, L: int, act_bytes: int, config: ScanConfig) -> Plan:
    """Chunk, checkpoint and segment counts for a (batch, dim, n, L) scan."""
    half_act = act_bytes * L / 2  # bytes per (batch, channel) of half an activation
    # per segment and channel the forward keeps 2 float32 states, the backward scratch 3 more
    # than its chunks per interval
    fwd = _segments(config.chunk, L, config, config.fwd_segments,
                    batch * -(-dim // config.fwd_block_d), half_act / (2 * n * 4))
    per_int = config.ckpt_steps // config.bwd_chunk
    bwd = _segments(config.bwd_chunk, L, config, config.bwd_segments,
                    batch * -(-dim // config.bwd_block_d), half_act / ((per_int + 3) * n * 4))
    step = max(config.chunk, config.bwd_chunk)
    return Plan(max(-(-L // config.ckpt_steps) - 1, 1), -(-L // step) * step, fwd, bwd)


def load_kernels() -> ModuleType:
    """The kernels module, or a UserError naming the fix when triton is missing or too old."""
    problem = triton_problem()
    if problem:
        raise UserError(f"scan backend 'triton': {problem}, or use scan backend 'chunked'")
    return importlib.import_module("mutransfer.ops.triton_kernels")


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


def empty_in_layout(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """An empty dense tensor shaped like x with x's dimension order in memory (a transposed
    view of a (batch, L, dim) buffer when x is one), whatever x's own gaps."""
    order = sorted(range(x.dim()), key=lambda i: -x.stride(i))
    buf = torch.empty([x.shape[i] for i in order], dtype=dtype or x.dtype, device=x.device)
    return buf.permute([order.index(i) for i in range(x.dim())])


def _strides(x: torch.Tensor) -> tuple[int, int, int]:
    """(batch, time, channel) strides of a (batch, dim, L) tensor, in elements."""
    return x.stride(0), x.stride(2), x.stride(1)


def _check_offsets(*tensors: torch.Tensor) -> None:
    """Within one batch row the kernels index with int32."""
    for x in tensors:
        if x is not None and (x.shape[2] - 1) * x.stride(2) + (x.shape[1] - 1) * x.stride(1) \
                >= 2**31:
            raise ValueError(f"a (batch, dim, L) = {tuple(x.shape)} input with strides "
                             f"{x.stride()} spans more than 2^31 elements per batch row")


def _time_major_f32(x: torch.Tensor, L_pad: int) -> torch.Tensor:
    """(batch, n, L_pad) float32, time contiguous and zero past L: what the kernels read B
    and C as (whole chunks, so their loads need no mask)."""
    out = torch.empty(*x.shape[:2], L_pad, dtype=_F32, device=x.device)
    out[..., : x.shape[2]].copy_(x)
    out[..., x.shape[2]:].zero_()
    return out


def _grid(batch: int, dim: int, block_d: int, segments: int) -> tuple[int, int, int]:
    return (batch, -(-dim // block_d), segments)


def _forward(kernels, u, delta, A, B, C, D, z, delta_bias, softplus, config):
    """Returns out (u's dtype and dimension order) and the checkpoints, float32."""
    batch, dim, L = u.shape
    n = A.shape[1]
    p = plan(batch, dim, n, L, u.element_size(), config)
    w = p.fwd
    out = empty_in_layout(u)
    f32 = dict(device=u.device, dtype=_F32)
    ckpt = torch.empty(batch, p.n_ckpt, n, dim, **f32)
    carry = torch.empty(batch, w.count, n, dim, **f32)
    seg_end = torch.empty(batch, w.count, n, dim, **f32) if w.count > 1 else carry
    seg_dt = torch.empty(batch, w.count, dim, **f32)
    zz = z if z is not None else u

    def launch(segments: int, carry_buf: torch.Tensor, ends_only: bool) -> None:
        kernels.scan_fwd_kernel[_grid(batch, dim, config.fwd_block_d, segments)](
            u, delta, A, B, C, D if D is not None else A, zz,
            delta_bias if delta_bias is not None else A, out, ckpt, carry_buf, seg_end, seg_dt,
            *_strides(u), *_strides(delta), *_strides(zz), *_strides(out),
            1, dim, L, p.L_pad, n, w.n_chunks, w.seg_chunks, w.count, p.n_ckpt,
            HAS_D=D is not None, HAS_Z=z is not None, HAS_BIAS=delta_bias is not None,
            SOFTPLUS=softplus, ENDS_ONLY=ends_only, BLOCK_D=config.fwd_block_d,
            CHUNK=w.chunk, CKPT_CHUNKS=w.ckpt_chunks, **config.launch_options("fwd"))

    if w.count > 1:  # end states of all segments but the last, from zero starts
        launch(w.count - 1, seg_end, True)
    launch(w.count, carry, False)
    return out, ckpt


def _backward(kernels, saved, dout, softplus, config):
    """All gradients: du, dΔ, dz in their inputs' dimension order; each in its input's dtype
    (None for absent D, z, delta_bias); dB, dC (batch, n, L)."""
    u, delta, A, B, C, D, z, delta_bias, ckpt = saved
    batch, dim, L = u.shape
    n = A.shape[1]
    p = plan(batch, dim, n, L, u.element_size(), config)
    w = p.bwd
    f32 = dict(device=u.device, dtype=_F32)
    du, ddelta = empty_in_layout(u), empty_in_layout(delta)
    dz = empty_in_layout(z) if z is not None else None
    dB, dC = torch.zeros(batch, n, p.L_pad, **f32), torch.zeros(batch, n, p.L_pad, **f32)
    dA, dD, dbias = torch.zeros(dim, n, **f32), torch.zeros(dim, **f32), torch.zeros(dim, **f32)
    scratch = torch.empty(batch, w.count, w.ckpt_chunks + 2, n, dim, **f32)
    seg_s = torch.empty(batch, w.count, n, dim, **f32)
    seg_dt = torch.empty(batch, w.count, dim, **f32)
    zz, dzz = (z, dz) if z is not None else (u, du)
    if w.count > 1:  # the adjoint each later segment sends left, from zero carries
        kernels.scan_bwd_carry_kernel[_grid(batch, dim, config.bwd_block_d, w.count - 1)](
            delta, A, C, zz, delta_bias if delta_bias is not None else A, dout, seg_s, seg_dt,
            *_strides(delta), *_strides(zz), *_strides(dout),
            1, dim, L, p.L_pad, n, w.n_chunks, w.seg_chunks, w.count,
            HAS_Z=z is not None, HAS_BIAS=delta_bias is not None, SOFTPLUS=softplus,
            BLOCK_D=config.bwd_block_d, CHUNK=w.chunk, **config.launch_options("bwd"))
    kernels.scan_bwd_kernel[_grid(batch, dim, config.bwd_block_d, w.count)](
        u, delta, A, B, C, D if D is not None else A, zz,
        delta_bias if delta_bias is not None else A, dout, ckpt, scratch, seg_s, seg_dt,
        du, ddelta, dzz, dB, dC, dA, dD, dbias,
        *_strides(u), *_strides(delta), *_strides(zz), *_strides(dout),
        *_strides(du), *_strides(ddelta), *_strides(dzz),
        1, dim, L, p.L_pad, n, w.n_chunks, w.seg_chunks, w.count, p.n_ckpt,
        HAS_D=D is not None, HAS_Z=z is not None, HAS_BIAS=delta_bias is not None,
        SOFTPLUS=softplus, BLOCK_D=config.bwd_block_d, CHUNK=w.chunk,
        CKPT_CHUNKS=w.ckpt_chunks, **config.launch_options("bwd"))
    return du, ddelta, dA, dB[..., :L], dC[..., :L], dD, dz, dbias


class SelectiveScanFn(torch.autograd.Function):
    """Triton forward and backward; saves inputs and per-interval states only."""

    @staticmethod
    def forward(ctx, u, delta, A, B, C, D, z, delta_bias, softplus: bool, config: ScanConfig):
        kernels = load_kernels()
        check_device(u.device, kernels_interpreted(kernels))
        _check_offsets(u, delta, z)
        dtypes = (A.dtype, B.dtype, C.dtype, None if D is None else D.dtype,
                  None if delta_bias is None else delta_bias.dtype)
        A32 = A.to(_F32, memory_format=torch.contiguous_format)
        L_pad = plan(*u.shape[:2], A.shape[1], u.shape[2], u.element_size(), config).L_pad
        B32, C32 = _time_major_f32(B, L_pad), _time_major_f32(C, L_pad)
        D32, bias32 = (None if t is None else t.to(_F32, memory_format=torch.contiguous_format)
                       for t in (D, delta_bias))
        out, ckpt = _forward(kernels, u, delta, A32, B32, C32, D32, z, bias32, softplus, config)
        ctx.save_for_backward(u, delta, A32, B32, C32, D32, z, bias32, ckpt)
        ctx.softplus, ctx.config, ctx.dtypes = softplus, config, dtypes
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        du, ddelta, dA, dB, dC, dD, dz, dbias = _backward(
            load_kernels(), ctx.saved_tensors, dout, ctx.softplus, ctx.config)
        tA, tB, tC, tD, tbias = ctx.dtypes
        return (du, ddelta, dA.to(tA), dB.to(tB), dC.to(tC),
                None if tD is None else dD.to(tD), dz,
                None if tbias is None else dbias.to(tbias), None, None)


def selective_scan_triton(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                          delta_softplus=False, return_states=False,
                          config: ScanConfig | None = None):
    """Selective scan with Triton kernels; `return_states` adds states from the reference."""
    check_shapes(u, delta, A, B, C, D, z, delta_bias)
    out = SelectiveScanFn.apply(u, delta, A, B, C, D, z, delta_bias, bool(delta_softplus),
                                config or DEFAULT_CONFIG)
    if return_states:
        return out, reference_states(u, delta, A, B, C, delta_bias, delta_softplus)
    return out
