"""Triton kernels of the selective scan: forward and backward.

Imported only through `mutransfer.ops.triton_scan`, which turns a missing triton into a
UserError and holds the launch configuration (`ScanConfig`).

Layout of the work. One program owns BLOCK_D channels of one batch row and one time segment.
It walks the segment in chunks of CHUNK steps; a chunk of an activation is a (CHUNK, BLOCK_D)
tile in which every thread holds whole columns: all CHUNK steps of its channel(s), channels
spread over the lanes (and the warps). Inside a chunk the program loops over the n state
indices; for each, the recurrence h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t u_t is a
`tl.associative_scan` along time that never leaves the thread (the compiler turns it into one
fused multiply-add per step), seeded with the state the previous chunk ended in. Nothing in
the forward crosses a lane; in the backward only dB and dC (sums over channels) do.

Why this layout: it needs no shared memory (the previous kernels, which spread time over
lanes and warps, spent most of their time in shared-memory scans and reductions), and it
reads activations the way the projections write them: (batch, L, channels) with channels
contiguous, each lane one channel, so every tile load is coalesced. Strides are arguments,
so any layout works; channel and time strides are never specialised by the compiler
(`_NO_SPECIALIZE`): a known unit stride would make it vectorise loads over channels, i.e.
put several channels in a thread with a different layout for every tensor. With both strides
unknown the compiler has no contiguous axis to lay over the lanes, and triton 3.4-3.6 then
put time over 16 lanes (11-39 warp shuffles per element in the state loops, a 128-byte
shared-memory exchange in the forward; triton 3.9 happened to choose channels): the tile
offsets therefore name channels the contiguous axis (`_channels`, a compiler hint), so every
triton version lays channels over the lanes. The hint cannot vectorise a load: the unknown
stride leaves the offsets' alignment at one element.

B and C arrive as (batch, n, L) float32, time contiguous (the wrapper makes that small copy):
a thread then reads its chunk of B_n as a few 16-byte loads that all lanes share.

States between chunks live in float32 work buffers (channels innermost, channel stride
`w_sd` = 1 at run time), written and read back by the same thread.

Time parallelism. A (batch, channel block) has L/CHUNK dependent chunks; when that is too
little work per program the wrapper cuts time into segments that run in parallel:
- forward: `ENDS_ONLY` programs scan each segment from a zero state and write its end state
  and Σ Δ; the full program of segment s composes its start state from those of the segments
  before it, each carried across the next by exp(A Σ Δ), the product of that segment's
  decays (equal to the product up to rounding; both underflow to 0 alike);
- backward: `scan_bwd_carry_kernel` runs each segment's adjoint from a zero carry; the full
  backward walks those from the right in the same way.

Checkpoints. The forward saves the state at the end of every CKPT_CHUNKS chunks (the
checkpoint interval), (batch, n_ckpt, n, dim) float32. The backward walks intervals from last
to first: it recomputes the state at the start of every chunk of the interval into a scratch
(pass 1), then walks those chunks backwards (pass 2), recomputing each chunk's states and
running the adjoint g_t = C_t dy_t + exp(Δ_{t+1} A) g_{t+1} as a flipped forward scan.
"""

from __future__ import annotations

import inspect

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x log2 e), folded into A

# strides that must stay run-time values (see the module docstring)
_NO_SPECIALIZE = ("u_st", "u_sd", "dl_st", "dl_sd", "z_st", "z_sd", "o_st", "o_sd",
                  "g_st", "g_sd", "du_st", "du_sd", "dd_st", "dd_sd", "dz_st", "dz_sd", "w_sd")


def _kernel(fn):
    """triton.jit with the kernel's channel and time strides kept out of specialisation."""
    names = inspect.signature(fn).parameters
    return triton.jit(fn, do_not_specialize=[a for a in _NO_SPECIALIZE if a in names])


@triton.jit
def _affine_combine(a_l, b_l, a_r, b_r):
    """Compose h -> a_l h + b_l (earlier) with h -> a_r h + b_r (later)."""
    return a_l * a_r, a_r * b_l + b_r


@triton.jit
def _adjoint_combine(a_r, fa_r, fb_r, a_l, fa_l, fb_l):
    """Combine for the adjoint, scanned in flipped time: `_r` is the later segment.

    g_t = c_t + a_{t+1} g_{t+1} needs the decay one step to the right. Rather than load Δ
    shifted, a segment [i, j] carries its first decay a_i and its "leading" map
    x -> fb + fa x, which sends the carry s = a_{j+1} g_{j+1} to g_i; elements start as
    (a_t, 1, c_t). Joining segments: g_i = fb_l + fa_l * s_l with s_l = a_r g_r.
    """
    scale = fa_l * a_r
    return a_l, scale * fa_r, fb_l + scale * fb_r


@triton.jit
def _log1p(x):
    """log(1 + x) without losing small x (the classic (1+x)-1 correction).

    Divisions here and in `_sigmoid` are the fast ones (`tl.fdiv`, within 2 ulp): these
    run once per (batch, channel, step), and IEEE division costs a dozen instructions."""
    w = 1.0 + x
    return tl.where(w == 1.0, x, tl.fdiv(tl.log(w) * x, w - 1.0))


@triton.jit
def _exp(x):
    """exp as one multiply and the hardware exp2 (denormal results flushed to 0)."""
    return tl.exp2(x * LOG2E)


@triton.jit
def _sigmoid(x):
    return tl.fdiv(1.0, 1.0 + _exp(-x))


@triton.jit
def _timescale(raw, SOFTPLUS: tl.constexpr):
    """Δ after the bias: softplus with torch's threshold of 20, or unchanged."""
    if SOFTPLUS:
        return tl.where(raw > 20.0, raw, _log1p(_exp(tl.minimum(raw, 20.0))))
    else:
        return raw


@triton.jit
def _channels(offs_d, sd):
    """(1, BLOCK_D) offsets of the channels, marked as the tile's contiguous axis (see the
    module docstring: the layout of every tile follows from it)."""
    return tl.max_contiguous(offs_d[None, :] * sd, [1, offs_d.shape[0]])


@triton.jit
def _tile(ptr, t, offs_d, st, sd, mask):
    """A (CHUNK, BLOCK_D) tile of a (time, channel)-strided tensor in float32, 0 off `mask`."""
    return tl.load(ptr + t[:, None] * st + _channels(offs_d, sd), mask=mask,
                   other=0.0).to(tl.float32)


@triton.jit
def _put(ptr, t, offs_d, st, sd, mask, x):
    tl.store(ptr + t[:, None] * st + _channels(offs_d, sd), x.to(ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _channel_vector(ptr, offs_d, w_sd, d_mask, PRESENT: tl.constexpr, BLOCK_D: tl.constexpr):
    """A per-channel vector (the Δ bias or D) in float32; zeros when the input is absent."""
    v = tl.zeros((BLOCK_D,), tl.float32)
    if PRESENT:
        v = tl.load(ptr + offs_d * w_sd, mask=d_mask, other=0.0).to(tl.float32)
    return v


@triton.jit
def _timesteps(u_b, dl_b, bias, t, offs_d, u_st, u_sd, dl_st, dl_sd, mask,
               SOFTPLUS: tl.constexpr):
    """u, the biased raw Δ and Δ of one chunk; Δ is 0 off `mask` (decay 1, drive 0: the state
    passes through padding steps unchanged)."""
    u = _tile(u_b, t, offs_d, u_st, u_sd, mask)
    raw = _tile(dl_b, t, offs_d, dl_st, dl_sd, mask) + bias[None, :]
    return u, raw, tl.where(mask, _timescale(raw, SOFTPLUS), 0.0)


@triton.jit
def _row(x, steps, i):
    """x[i, :] for a compile-time i. With time inside the thread this folds to a register
    read: the other terms are -0.0, which adds exactly."""
    return tl.sum(tl.where(steps[:, None] == i, x, -0.0), axis=0)


@triton.jit
def _states(a, drive, h0, steps):
    """h_t = a_t h_{t-1} + drive_t along axis 0, from h0 before the first step."""
    seeded = tl.where(steps[:, None] == 0, drive + a * h0[None, :], drive)
    _, h = tl.associative_scan((a, seeded), 0, _affine_combine)
    return h


@triton.jit
def _affine_combine_prev(a_l, b_l, pa_l, pb_l, a_r, b_r, pa_r, pb_r):
    """`_affine_combine` that also carries (pa, pb), the map of a segment without its last
    step, so that the scan yields h_{t-1} beside h_t. An element's own is the identity
    (1, -0.0): inside a thread this costs nothing beyond the plain scan."""
    return a_l * a_r, a_r * b_l + b_r, a_l * pa_r, pa_r * b_l + pb_r


@triton.jit
def _states_and_previous(a, drive, h0, steps):
    """(h_t, h_{t-1}) along axis 0, from h0 before the first step."""
    first = steps[:, None] == 0
    seeded = tl.where(first, drive + a * h0[None, :], drive)
    _, h, _, prev = tl.associative_scan(
        (a, seeded, tl.full(a.shape, 1.0, tl.float32), tl.full(a.shape, -0.0, tl.float32)),
        0, _affine_combine_prev)
    return h, tl.where(first, h0[None, :], prev)


@triton.jit
def _adjoint(a, c, s_in, steps, CHUNK: tl.constexpr):
    """g_t = c_t + a_{t+1} g_{t+1} along axis 0, with a_{T} g_{T} = s_in after the last step.

    A forward scan of the flipped chunk (flips inside a thread are register renames);
    Triton's reverse scan exchanges every element between lanes first, which costs more.
    """
    c = tl.where(steps[:, None] == CHUNK - 1, c + s_in[None, :], c)
    ones = tl.full(c.shape, 1.0, tl.float32)
    _, _, g = tl.associative_scan((tl.flip(a, 0), ones, tl.flip(c, 0)), 0, _adjoint_combine)
    return tl.flip(g, 0)


@triton.jit
def _gated_dout(g_b, z_b, t, offs_d, g_st, g_sd, z_st, z_sd, mask, HAS_Z: tl.constexpr):
    """dL/dy before the gate of one chunk: dout * SiLU(z)."""
    dy = _tile(g_b, t, offs_d, g_st, g_sd, mask)
    if HAS_Z:
        zz = _tile(z_b, t, offs_d, z_st, z_sd, mask)
        dy = dy * zz * _sigmoid(zz)
    return dy


@triton.jit
def _halve(x, lane, LEVEL: tl.constexpr, T: tl.constexpr):
    """One step of a reduce-scatter over lanes: (T, 32) -> (T/2, 32).

    Lanes l and l ^ 2^LEVEL split the T steps in halves: each keeps one half and adds the
    partner's values for it, received by a warp shuffle (`tl.gather` along the lane axis).
    """
    lo, hi = tl.split(tl.permute(tl.reshape(x, (2, T // 2, 32)), (1, 2, 0)))
    upper = ((lane >> LEVEL) & 1)[None, :] == 1
    partner = tl.broadcast_to((lane ^ (1 << LEVEL))[None, :], (T // 2, 32))
    return tl.where(upper, hi, lo) + tl.gather(tl.where(upper, lo, hi), partner, 1)


@triton.jit
def _lane_sums(x, lane, CHUNK: tl.constexpr, REPS: tl.constexpr):
    """Sums over the channels of a (CHUNK, 32 * REPS) tile of one warp, one step per lane.

    Returns a (32,) vector: lane l holds the sum for step `_lane_step(l)` (lanes >= CHUNK
    repeat others). About one shuffle per step and lane, where a butterfly sum (`tl.sum`)
    takes five and leaves every sum in every lane.
    """
    x = tl.sum(tl.reshape(x, (CHUNK, REPS, 32)), axis=1)
    if CHUNK >= 2:
        x = _halve(x, lane, 0, CHUNK)
    if CHUNK >= 4:
        x = _halve(x, lane, 1, CHUNK // 2)
    if CHUNK >= 8:
        x = _halve(x, lane, 2, CHUNK // 4)
    if CHUNK >= 16:
        x = _halve(x, lane, 3, CHUNK // 8)
    if CHUNK >= 32:
        x = _halve(x, lane, 4, CHUNK // 16)
    y = tl.reshape(x, (32,))
    # lanes that still hold partial sums of the same step: butterfly over the remaining bits
    if CHUNK < 32:
        y += tl.gather(y, lane ^ 16, 0)
    if CHUNK < 16:
        y += tl.gather(y, lane ^ 8, 0)
    if CHUNK < 8:
        y += tl.gather(y, lane ^ 4, 0)
    if CHUNK < 4:
        y += tl.gather(y, lane ^ 2, 0)
    if CHUNK < 2:
        y += tl.gather(y, lane ^ 1, 0)
    return y


@triton.jit
def _lane_step(lane, CHUNK: tl.constexpr):
    """The step whose sum `_lane_sums` leaves in `lane`: bit i of the lane picks the upper
    half at halving i."""
    t = tl.zeros_like(lane)
    if CHUNK >= 2:
        t += (lane & 1) * (CHUNK // 2)
    if CHUNK >= 4:
        t += ((lane >> 1) & 1) * (CHUNK // 4)
    if CHUNK >= 8:
        t += ((lane >> 2) & 1) * (CHUNK // 8)
    if CHUNK >= 16:
        t += ((lane >> 3) & 1) * (CHUNK // 16)
    if CHUNK >= 32:
        t += ((lane >> 4) & 1) * (CHUNK // 32)
    return t


@triton.jit
def _where_also(mask, cond):
    """mask & cond for a scalar cond (written so that the interpreter accepts it too)."""
    return mask & ((tl.zeros(mask.shape, tl.int32) + cond) > 0)


@triton.jit
def _wptr(ptr, row, dim, offs_d, w_sd):
    """Pointers to row `row` of a float32 work buffer shaped (..., dim)."""
    return ptr + row * dim + offs_d * w_sd


@triton.jit
def _decay_log2(A_ptr, offs_d, N, n, d_mask):
    """A[:, n] log2(e) of the program's channels (A is (dim, N) contiguous)."""
    return tl.load(A_ptr + offs_d * N + n, mask=d_mask, other=0.0) * LOG2E


@triton.jit
def _program(dim, seg_chunks, n_chunks, FIRST_SEGMENT: tl.constexpr, BLOCK_D: tl.constexpr,
             CHUNK: tl.constexpr):
    """This program's batch row, channels (and their mask), steps of a chunk, segment, and
    chunk range [k0, k1). Grid: (batch, channel blocks, segments from FIRST_SEGMENT)."""
    b = tl.program_id(0).to(tl.int64)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    s = tl.program_id(2) + FIRST_SEGMENT
    k0 = s * seg_chunks
    return b, offs_d, offs_d < dim, tl.arange(0, CHUNK), s, k0, \
        tl.minimum(k0 + seg_chunks, n_chunks)


@triton.jit
def _fwd_operands(A_ptr, B_ptr, C_ptr, carry_ptr, bc_row, carry_row, n, offs_d, N, L_pad, dim,
                  w_sd, t, d_mask, ENDS_ONLY: tl.constexpr):
    """What the forward needs of state n in one chunk: A log2(e), B, C (not with
    ENDS_ONLY: zeros) and the state entering the chunk."""
    a2 = _decay_log2(A_ptr, offs_d, N, n, d_mask)
    b_n = tl.load(B_ptr + (bc_row + n) * L_pad + t)
    c_n = tl.zeros_like(b_n)
    if not ENDS_ONLY:
        c_n = tl.load(C_ptr + (bc_row + n) * L_pad + t)
    h0 = tl.load(_wptr(carry_ptr, carry_row + n, dim, offs_d, w_sd), mask=d_mask, other=0.0)
    return a2, b_n, c_n, h0


@_kernel
def scan_fwd_kernel(u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, D_ptr, z_ptr, bias_ptr, out_ptr,
                    ckpt_ptr, carry_ptr, seg_end_ptr, seg_dt_ptr,
                    u_sb, u_st, u_sd, dl_sb, dl_st, dl_sd, z_sb, z_st, z_sd, o_sb, o_st, o_sd,
                    w_sd, dim, L, L_pad, N, n_chunks, seg_chunks, n_seg, n_ckpt,
                    HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr,
                    SOFTPLUS: tl.constexpr, ENDS_ONLY: tl.constexpr, BLOCK_D: tl.constexpr,
                    CHUNK: tl.constexpr, CKPT_CHUNKS: tl.constexpr):
    """out = (C·h + D u) SiLU(z) for one segment; ckpt[b, j] = state after interval j.

    Program (batch b, channel block, segment s). With ENDS_ONLY it writes only the end state
    of its segment from a zero start (seg_end[b, s], through `carry_ptr` = seg_end) and the
    segment's Σ Δ (seg_dt[b, s]). Otherwise it starts from the state before the segment,
    composed from those (zero for s = 0), and writes out and the checkpoints: those of the
    intervals ending inside its segment, and its start state as the end of the interval
    before it (the previous segment's program skips that one).
    """
    b, offs_d, d_mask, steps, s, k0, k1 = _program(dim, seg_chunks, n_chunks, 0, BLOCK_D,
                                                   CHUNK)
    bias = _channel_vector(bias_ptr, offs_d, w_sd, d_mask, HAS_BIAS, BLOCK_D)
    skip = _channel_vector(D_ptr, offs_d, w_sd, d_mask, HAS_D, BLOCK_D)
    u_b, dl_b, z_b, o_b = u_ptr + b * u_sb, delta_ptr + b * dl_sb, z_ptr + b * z_sb, \
        out_ptr + b * o_sb
    carry_row = (b * n_seg + s) * N  # row of state 0 of this program's running state
    for n in range(N):
        h = tl.zeros((BLOCK_D,), tl.float32)
        if not ENDS_ONLY:
            a2 = _decay_log2(A_ptr, offs_d, N, n, d_mask)
            for s2 in range(s):  # compose the segments before this one
                dsum = tl.load(_wptr(seg_dt_ptr, b * n_seg + s2, dim, offs_d, w_sd),
                               mask=d_mask, other=0.0)
                end = tl.load(_wptr(seg_end_ptr, (b * n_seg + s2) * N + n, dim, offs_d, w_sd),
                              mask=d_mask, other=0.0)
                h = tl.exp2(a2 * dsum) * h + end
            tl.store(_wptr(ckpt_ptr, (b * n_ckpt + k0 // CKPT_CHUNKS - 1) * N + n, dim, offs_d,
                           w_sd), h, mask=_where_also(d_mask, s > 0))
        tl.store(_wptr(carry_ptr, carry_row + n, dim, offs_d, w_sd), h, mask=d_mask)
    dt_sum = tl.zeros((BLOCK_D,), tl.float32)
    for k in range(k0, k1):
        t = k * CHUNK + steps
        t_mask = t < L
        mask = t_mask[:, None] & d_mask[None, :]
        u, raw, dt = _timesteps(u_b, dl_b, bias, t, offs_d, u_st, u_sd, dl_st, dl_sd, mask,
                                SOFTPLUS)
        dt_sum += tl.sum(dt, axis=0)
        dtu = dt * u
        y = tl.zeros((CHUNK, BLOCK_D), tl.float32)
        # checkpoint after this chunk: an interval ends here, inside this segment
        save = ((k + 1) % CKPT_CHUNKS == 0) & (k + 1 < k0 + seg_chunks) & (k + 1 < n_chunks)
        ckpt_row = (b * n_ckpt + (k + 1) // CKPT_CHUNKS - 1) * N
        a2, b_n, c_n, h0 = _fwd_operands(A_ptr, B_ptr, C_ptr, carry_ptr, b * N, carry_row, 0,
                                         offs_d, N, L_pad, dim, w_sd, t, d_mask, ENDS_ONLY)
        for n in range(N):
            # the next state's operands, loaded while this one computes (the last reloads)
            nxt = _fwd_operands(A_ptr, B_ptr, C_ptr, carry_ptr, b * N, carry_row,
                                tl.minimum(n + 1, N - 1), offs_d, N, L_pad, dim, w_sd, t,
                                d_mask, ENDS_ONLY)
            a = tl.exp2(dt * a2[None, :])
            h = _states(a, dtu * b_n[:, None], h0, steps)
            h_end = _row(h, steps, CHUNK - 1)
            tl.store(_wptr(carry_ptr, carry_row + n, dim, offs_d, w_sd), h_end, mask=d_mask)
            if not ENDS_ONLY:
                y += h * c_n[:, None]
                tl.store(_wptr(ckpt_ptr, ckpt_row + n, dim, offs_d, w_sd), h_end,
                         mask=_where_also(d_mask, save))
            a2, b_n, c_n, h0 = nxt
        if not ENDS_ONLY:
            out = y + skip[None, :] * u
            if HAS_Z:
                zz = _tile(z_b, t, offs_d, z_st, z_sd, mask)
                out = out * zz * _sigmoid(zz)
            _put(o_b, t, offs_d, o_st, o_sd, mask, out)
        tl.debug_barrier()  # orders this chunk's state stores before the next chunk's loads
    if ENDS_ONLY:
        tl.store(_wptr(seg_dt_ptr, b * n_seg + s, dim, offs_d, w_sd), dt_sum, mask=d_mask)


@_kernel
def scan_bwd_carry_kernel(delta_ptr, A_ptr, C_ptr, z_ptr, bias_ptr, dout_ptr,
                          seg_s_ptr, seg_dt_ptr,
                          dl_sb, dl_st, dl_sd, z_sb, z_st, z_sd, g_sb, g_st, g_sd,
                          w_sd, dim, L, L_pad, N, n_chunks, seg_chunks, n_seg,
                          HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr, SOFTPLUS: tl.constexpr,
                          BLOCK_D: tl.constexpr, CHUNK: tl.constexpr):
    """The adjoint leaving each segment s >= 1 through its start when nothing enters it from
    the right: seg_s[b, s] = a g at the segment's first step, and seg_dt[b, s] = Σ Δ."""
    b, offs_d, d_mask, steps, s, k0, k1 = _program(dim, seg_chunks, n_chunks, 1, BLOCK_D,
                                                   CHUNK)
    bias = _channel_vector(bias_ptr, offs_d, w_sd, d_mask, HAS_BIAS, BLOCK_D)
    dl_b, z_b, g_b = delta_ptr + b * dl_sb, z_ptr + b * z_sb, dout_ptr + b * g_sb
    s_row = (b * n_seg + s) * N
    for n in range(N):
        tl.store(_wptr(seg_s_ptr, s_row + n, dim, offs_d, w_sd),
                 tl.zeros((BLOCK_D,), tl.float32), mask=d_mask)
    dt_sum = tl.zeros((BLOCK_D,), tl.float32)
    for kk in range(k1 - k0):
        t = (k1 - 1 - kk) * CHUNK + steps
        mask = (t < L)[:, None] & d_mask[None, :]
        raw = _tile(dl_b, t, offs_d, dl_st, dl_sd, mask) + bias[None, :]
        dt = tl.where(mask, _timescale(raw, SOFTPLUS), 0.0)
        dt_sum += tl.sum(dt, axis=0)
        dy = _gated_dout(g_b, z_b, t, offs_d, g_st, g_sd, z_st, z_sd, mask, HAS_Z)
        for n in range(N):
            a = tl.exp2(dt * _decay_log2(A_ptr, offs_d, N, n, d_mask)[None, :])
            c_n = tl.load(C_ptr + (b * N + n) * L_pad + t)
            carry = _wptr(seg_s_ptr, s_row + n, dim, offs_d, w_sd)
            g = _adjoint(a, dy * c_n[:, None], tl.load(carry, mask=d_mask, other=0.0), steps,
                         CHUNK)
            tl.store(carry, _row(a * g, steps, 0), mask=d_mask)
        tl.debug_barrier()
    tl.store(_wptr(seg_dt_ptr, b * n_seg + s, dim, offs_d, w_sd), dt_sum, mask=d_mask)


@_kernel
def scan_bwd_kernel(u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, D_ptr, z_ptr, bias_ptr, dout_ptr,
                    ckpt_ptr, scratch_ptr, seg_s_ptr, seg_dt_ptr,
                    du_ptr, ddelta_ptr, dz_ptr, dB_ptr, dC_ptr, dA_ptr, dD_ptr, dbias_ptr,
                    u_sb, u_st, u_sd, dl_sb, dl_st, dl_sd, z_sb, z_st, z_sd, g_sb, g_st, g_sd,
                    du_sb, du_st, du_sd, dd_sb, dd_st, dd_sd, dz_sb, dz_st, dz_sd,
                    w_sd, dim, L, L_pad, N, n_chunks, seg_chunks, n_seg, n_ckpt,
                    HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr,
                    SOFTPLUS: tl.constexpr, BLOCK_D: tl.constexpr, CHUNK: tl.constexpr,
                    CKPT_CHUNKS: tl.constexpr):
    """All gradients of one segment (one warp per program).

    du, dΔ, dz are written in their tensors' layouts; dB, dC (batch, N, L) float32 get one
    atomic add per (program, step, state), already summed over the program's channels;
    dA (dim, N), dD and dΔbias (dim,) float32 get one atomic add per program and element.
    Scratch (batch, n_seg, CKPT_CHUNKS + 2, N, dim): rows 0..CKPT_CHUNKS-1 the states at the
    chunk starts of the current interval, then the adjoint carry, then dA's running sum.
    """
    b, offs_d, d_mask, steps, s, k0, k1 = _program(dim, seg_chunks, n_chunks, 0, BLOCK_D,
                                                   CHUNK)
    lane = tl.arange(0, 32)
    lane_t = _lane_step(lane, CHUNK)
    bias = _channel_vector(bias_ptr, offs_d, w_sd, d_mask, HAS_BIAS, BLOCK_D)
    skip = _channel_vector(D_ptr, offs_d, w_sd, d_mask, HAS_D, BLOCK_D)
    u_b, dl_b, z_b, g_b = u_ptr + b * u_sb, delta_ptr + b * dl_sb, z_ptr + b * z_sb, \
        dout_ptr + b * g_sb
    du_b, dd_b, dz_b = du_ptr + b * du_sb, ddelta_ptr + b * dd_sb, dz_ptr + b * dz_sb
    scr = (b * n_seg + s) * (CKPT_CHUNKS + 2) * N  # row of this program's scratch
    s_rows = scr + CKPT_CHUNKS * N  # the adjoint carry entering the current chunk
    dA_rows = s_rows + N  # dA summed over this program's steps
    # the adjoint entering the segment from the right: compose the later segments
    for n in range(N):
        a2 = _decay_log2(A_ptr, offs_d, N, n, d_mask)
        carry = tl.zeros((BLOCK_D,), tl.float32)
        for j in range(n_seg - 1 - s):
            s2 = n_seg - 1 - j
            dsum = tl.load(_wptr(seg_dt_ptr, b * n_seg + s2, dim, offs_d, w_sd),
                           mask=d_mask, other=0.0)
            carry = tl.load(_wptr(seg_s_ptr, (b * n_seg + s2) * N + n, dim, offs_d, w_sd),
                            mask=d_mask, other=0.0) + tl.exp2(a2 * dsum) * carry
        tl.store(_wptr(scratch_ptr, s_rows + n, dim, offs_d, w_sd), carry, mask=d_mask)
        tl.store(_wptr(scratch_ptr, dA_rows + n, dim, offs_d, w_sd),
                 tl.zeros((BLOCK_D,), tl.float32), mask=d_mask)
    dD_acc = tl.zeros((BLOCK_D,), tl.float32)
    dbias_acc = tl.zeros((BLOCK_D,), tl.float32)
    i0 = k0 // CKPT_CHUNKS
    i1 = (k1 + CKPT_CHUNKS - 1) // CKPT_CHUNKS
    for ii in range(i1 - i0):
        i = i1 - 1 - ii
        c0 = i * CKPT_CHUNKS
        c1 = tl.minimum(c0 + CKPT_CHUNKS, k1)
        # pass 1: the state entering every chunk of interval i, from its checkpoint
        for n in range(N):
            start = tl.load(_wptr(ckpt_ptr, (b * n_ckpt + i - 1) * N + n, dim, offs_d, w_sd),
                            mask=_where_also(d_mask, i > 0), other=0.0)
            tl.store(_wptr(scratch_ptr, scr + n, dim, offs_d, w_sd), start, mask=d_mask)
        for j in range(c1 - c0 - 1):
            t = (c0 + j) * CHUNK + steps
            mask = (t < L)[:, None] & d_mask[None, :]
            u, raw, dt = _timesteps(u_b, dl_b, bias, t, offs_d, u_st, u_sd, dl_st, dl_sd, mask,
                                    SOFTPLUS)
            dtu = dt * u
            for n in range(N):
                a = tl.exp2(dt * _decay_log2(A_ptr, offs_d, N, n, d_mask)[None, :])
                b_n = tl.load(B_ptr + (b * N + n) * L_pad + t)
                h0 = tl.load(_wptr(scratch_ptr, scr + j * N + n, dim, offs_d, w_sd),
                             mask=d_mask, other=0.0)
                h = _states(a, dtu * b_n[:, None], h0, steps)
                tl.store(_wptr(scratch_ptr, scr + (j + 1) * N + n, dim, offs_d, w_sd),
                         _row(h, steps, CHUNK - 1), mask=d_mask)
            tl.debug_barrier()
        # pass 2: the interval's chunks from last to first
        for jj in range(c1 - c0):
            j = c1 - c0 - 1 - jj
            t = (c0 + j) * CHUNK + steps
            t_mask = t < L
            mask = t_mask[:, None] & d_mask[None, :]
            u, raw, dt = _timesteps(u_b, dl_b, bias, t, offs_d, u_st, u_sd, dl_st, dl_sd, mask,
                                    SOFTPLUS)
            dtu = dt * u
            dy = _gated_dout(g_b, z_b, t, offs_d, g_st, g_sd, z_st, z_sd, mask, HAS_Z)
            dD_acc += tl.sum(dy * u, axis=0)
            g_drive = tl.zeros((CHUNK, BLOCK_D), tl.float32)  # sum_n B_n g
            g_decay = tl.zeros((CHUNK, BLOCK_D), tl.float32)  # sum_n A_n g a_t h_{t-1}
            y = tl.zeros((CHUNK, BLOCK_D), tl.float32)  # C·h, for dz
            row_t = (c0 + j) * CHUNK + lane_t
            for n in range(N):
                A_n = tl.load(A_ptr + offs_d * N + n, mask=d_mask, other=0.0)
                a = tl.exp2(dt * (A_n * LOG2E)[None, :])
                bc = (b * N + n) * L_pad
                b_n = tl.load(B_ptr + bc + t)
                c_n = tl.load(C_ptr + bc + t)
                h0 = tl.load(_wptr(scratch_ptr, scr + j * N + n, dim, offs_d, w_sd),
                             mask=d_mask, other=0.0)
                h, h_prev = _states_and_previous(a, dtu * b_n[:, None], h0, steps)
                if HAS_Z:
                    y += h * c_n[:, None]
                carry = _wptr(scratch_ptr, s_rows + n, dim, offs_d, w_sd)
                g = _adjoint(a, dy * c_n[:, None], tl.load(carry, mask=d_mask, other=0.0),
                             steps, CHUNK)
                tl.store(carry, _row(a * g, steps, 0), mask=d_mask)
                g_ah = g * (a * h_prev)  # dL/da_t * a_t; a h_{t-1} is a product of the scan
                g_decay += g_ah * A_n[None, :]
                g_drive += g * b_n[:, None]
                dA_run = _wptr(scratch_ptr, dA_rows + n, dim, offs_d, w_sd)
                tl.store(dA_run, tl.load(dA_run, mask=d_mask, other=0.0) +
                         tl.sum(g_ah * dt, axis=0), mask=d_mask)
                # dB, dC: sums over channels, one step per lane, one atomic add per lane
                tl.atomic_add(dB_ptr + bc + row_t, _lane_sums(g * dtu, lane, CHUNK,
                                                              BLOCK_D // 32),
                              mask=lane < CHUNK, sem="relaxed")
                tl.atomic_add(dC_ptr + bc + row_t, _lane_sums(dy * h, lane, CHUNK,
                                                              BLOCK_D // 32),
                              mask=lane < CHUNK, sem="relaxed")
            _put(du_b, t, offs_d, du_st, du_sd, mask, g_drive * dt + dy * skip[None, :])
            # u and the raw Δ again (cache hits) rather than keep them live through the n loop
            u = _tile(u_b, t, offs_d, u_st, u_sd, mask)
            raw = _tile(dl_b, t, offs_d, dl_st, dl_sd, mask) + bias[None, :]
            ddt = g_decay + g_drive * u
            if HAS_Z:
                # dout and z again (cache hits) rather than keep them live through the n loop
                dout = _tile(g_b, t, offs_d, g_st, g_sd, mask)
                zz = _tile(z_b, t, offs_d, z_st, z_sd, mask)
                sig_z = _sigmoid(zz)
                dz = dout * (y + skip[None, :] * u) * sig_z * (1.0 + zz * (1.0 - sig_z))
                _put(dz_b, t, offs_d, dz_st, dz_sd, mask, dz)
            if SOFTPLUS:
                ddt = tl.where(raw > 20.0, ddt, ddt * _sigmoid(raw))
            ddt = tl.where(mask, ddt, 0.0)
            dbias_acc += tl.sum(ddt, axis=0)
            _put(dd_b, t, offs_d, dd_st, dd_sd, mask, ddt)
            tl.debug_barrier()
    for n in range(N):
        tl.atomic_add(dA_ptr + offs_d * N + n,
                      tl.load(_wptr(scratch_ptr, dA_rows + n, dim, offs_d, w_sd), mask=d_mask,
                              other=0.0), mask=d_mask, sem="relaxed")
    tl.atomic_add(dD_ptr + offs_d * w_sd, dD_acc, mask=d_mask, sem="relaxed")
    tl.atomic_add(dbias_ptr + offs_d * w_sd, dbias_acc, mask=d_mask, sem="relaxed")
