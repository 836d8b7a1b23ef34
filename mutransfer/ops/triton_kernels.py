"""Triton kernels of the selective scan: forward and backward.

Imported only through `mutransfer.ops.triton_scan`, which turns a missing triton into a
UserError. Layout: one program per (batch, block of BLOCK_D channels); it walks L in chunks
of CHUNK steps and, inside a chunk, loops over the n state indices (as the CUDA kernel of
state-spaces/mamba does). For each state index the recurrence
h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t u_t of a (BLOCK_D, CHUNK) tile is one `tl.associative_scan`
along time, seeded with the state the previous chunk ended in. Looping over n keeps the tiles
2-D (time innermost, several steps per thread) and lets a program sum dB and dC over its
BLOCK_D channels before one atomic add per element.

Forward writes the state at the end of every chunk (the checkpoint, (batch, n_chunks, n, dim)
float32, channels innermost so each store is coalesced) and reads it back as the next chunk's
start. Backward walks the chunks from last to
first, recomputes a chunk's states from the checkpoint before it, and runs the adjoint
recurrence g_t = C_t dy_t + exp(Δ_{t+1} A) g_{t+1} as a reverse scan (`_adjoint_combine`).
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x log2 e), folded into A


@triton.jit
def _affine_combine(a_l, b_l, a_r, b_r):
    """Compose h -> a_l h + b_l (earlier) with h -> a_r h + b_r (later)."""
    return a_l * a_r, a_r * b_l + b_r


@triton.jit
def _adjoint_combine(a_r, fa_r, fb_r, a_l, fa_l, fb_l):
    """Reverse-scan combine: `_r` is the later segment, `_l` the earlier one.

    The adjoint g_t = c_t + a_{t+1} g_{t+1} (c_t = C_t dy_t) needs the decay one step to the
    right. Rather than load Δ shifted and pay a second exp per element, a segment [i, j]
    carries its first decay a_i and its "leading" map x -> fb + fa x, which sends the
    carry s = a_{j+1} g_{j+1} to g_i; elements start as (a_t, 1, c_t). Joining segments:
    g_i = fb_l + fa_l * s_l with s_l = a_r g_r = a_r (fb_r + fa_r s).
    """
    scale = fa_l * a_r
    return a_l, scale * fa_r, fb_l + scale * fb_r


@triton.jit
def _reverse_adjoint_scan(a, fa, fb, BY_FLIP: tl.constexpr):
    """Inclusive right-to-left scan along axis 1 with `_adjoint_combine`.

    BY_FLIP runs flip + forward scan + flip (the operand order of `reverse=True`) for a
    Triton build whose reverse scan misbehaves (see triton-lang/triton#4362).
    """
    if BY_FLIP:
        a, fa, fb = tl.associative_scan((tl.flip(a, 1), tl.flip(fa, 1), tl.flip(fb, 1)), 1,
                                        _adjoint_combine)
        return tl.flip(a, 1), tl.flip(fa, 1), tl.flip(fb, 1)
    else:
        return tl.associative_scan((a, fa, fb), 1, _adjoint_combine, reverse=True)


@triton.jit
def _pair_sum(a1, b1, a2, b2):
    return a1 + a2, b1 + b2


@triton.jit
def _log1p(x):
    """log(1 + x) without losing small x (the classic (1+x)-1 correction)."""
    w = 1.0 + x
    return tl.where(w == 1.0, x, tl.log(w) * x / (w - 1.0))


@triton.jit
def _timescale(raw, SOFTPLUS: tl.constexpr):
    """Δ after the bias: softplus with torch's threshold of 20, or unchanged."""
    if SOFTPLUS:
        return tl.where(raw > 20.0, raw, _log1p(tl.exp(tl.minimum(raw, 20.0))))
    else:
        return raw


@triton.jit
def _fwd_chunk(u_ptr, delta_ptr, bias, row, t, mask, SOFTPLUS: tl.constexpr):
    """Load u and Δ of one chunk in float32; Δ biased, softplus-ed and zero outside `mask`."""
    offs = row[:, None] + t[None, :]
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    raw = tl.load(delta_ptr + offs, mask=mask, other=0.0).to(tl.float32) + bias[:, None]
    # zero Δ outside the sequence: decay 1 and drive 0 carry the state through unchanged
    dt = tl.where(mask, _timescale(raw, SOFTPLUS), 0.0)
    return u, raw, dt


@triton.jit
def _channel_vector(ptr, offs_d, d_mask, PRESENT: tl.constexpr, BLOCK_D: tl.constexpr):
    """A per-channel vector (the Δ bias or D) in float32; zeros when the input is absent."""
    v = tl.zeros((BLOCK_D,), tl.float32)
    if PRESENT:
        v = tl.load(ptr + offs_d, mask=d_mask, other=0.0).to(tl.float32)
    return v


@triton.jit
def scan_fwd_kernel(u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, D_ptr, z_ptr, bias_ptr,
                    out_ptr, ckpt_ptr, dim, L, N, n_chunks,
                    HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr,
                    SOFTPLUS: tl.constexpr, BLOCK_D: tl.constexpr, CHUNK: tl.constexpr):
    """out = (C·h + D u) SiLU(z); ckpt[b, k, :, d] = state at the end of chunk k."""
    pid_b = tl.program_id(0).to(tl.int64)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_mask = offs_d < dim
    steps = tl.arange(0, CHUNK)
    chan = pid_b * dim + offs_d  # flat (batch, channel) index
    row = chan * L
    bc_base = pid_b * N * L
    bias = _channel_vector(bias_ptr, offs_d, d_mask, HAS_BIAS, BLOCK_D)
    skip = _channel_vector(D_ptr, offs_d, d_mask, HAS_D, BLOCK_D)
    for k in range(n_chunks):
        t = k * CHUNK + steps
        t_mask = t < L
        mask = d_mask[:, None] & t_mask[None, :]
        u, raw, dt = _fwd_chunk(u_ptr, delta_ptr, bias, row, t, mask, SOFTPLUS)
        dtu = dt * u
        y = tl.zeros((BLOCK_D, CHUNK), tl.float32)
        # the state is carried between chunks through the checkpoint itself: cheaper than
        # picking column n out of a (BLOCK_D, n) register tile at every n
        h_prev_ptr = ckpt_ptr + (pid_b * n_chunks + tl.maximum(k - 1, 0)) * N * dim + offs_d
        h_end_ptr = ckpt_ptr + (pid_b * n_chunks + k) * N * dim + offs_d
        for n in range(N):
            a_n = tl.load(A_ptr + offs_d * N + n, mask=d_mask, other=0.0).to(tl.float32)
            b_n = tl.load(B_ptr + bc_base + n * L + t, mask=t_mask, other=0.0).to(tl.float32)
            c_n = tl.load(C_ptr + bc_base + n * L + t, mask=t_mask, other=0.0).to(tl.float32)
            decay, drive = tl.associative_scan(
                (tl.exp2(dt * (a_n * LOG2E)[:, None]), dtu * b_n[None, :]), 1, _affine_combine)
            h_prev = tl.load(h_prev_ptr + n * dim, mask=d_mask, other=0.0)
            h = drive + decay * tl.where(k > 0, h_prev, 0.0)[:, None]
            y += h * c_n[None, :]
            h_end = tl.sum(tl.where(steps[None, :] == CHUNK - 1, h, 0.0), axis=1)
            tl.store(h_end_ptr + n * dim, h_end, mask=d_mask)
        out = y + skip[:, None] * u
        if HAS_Z:
            zz = tl.load(z_ptr + row[:, None] + t[None, :], mask=mask, other=0.0)
            zz = zz.to(tl.float32)
            out = out * zz * tl.sigmoid(zz)
        tl.store(out_ptr + row[:, None] + t[None, :], out.to(out_ptr.dtype.element_ty),
                 mask=mask)
        # the end states just stored (by some threads) are read by others in the next chunk
        tl.debug_barrier()


@triton.jit
def scan_bwd_kernel(u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, D_ptr, z_ptr, bias_ptr,
                    ckpt_ptr, carry_ptr, dout_ptr,
                    du_ptr, ddelta_ptr, dz_ptr, dB_ptr, dC_ptr,
                    dA_part_ptr, dD_part_ptr, dbias_part_ptr,
                    dim, L, N, n_chunks,
                    HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr,
                    SOFTPLUS: tl.constexpr, BLOCK_D: tl.constexpr, CHUNK: tl.constexpr,
                    N_PAD: tl.constexpr, BY_FLIP: tl.constexpr):
    """Gradients. dB, dC (batch, n, L) float32 are accumulated with atomic adds, one per
    program and element (already summed over the program's BLOCK_D channels); dA, dD and
    dΔbias are written per (batch, channel) and summed over batch by the caller."""
    pid_b = tl.program_id(0).to(tl.int64)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_mask = offs_d < dim
    cols = tl.arange(0, N_PAD)
    steps = tl.arange(0, CHUNK)
    chan = pid_b * dim + offs_d
    row = chan * L
    bc_base = pid_b * N * L
    bias = _channel_vector(bias_ptr, offs_d, d_mask, HAS_BIAS, BLOCK_D)
    skip = _channel_vector(D_ptr, offs_d, d_mask, HAS_D, BLOCK_D)
    dA_acc = tl.zeros((BLOCK_D, N_PAD), tl.float32)
    dD_acc = tl.zeros((BLOCK_D,), tl.float32)
    dbias_acc = tl.zeros((BLOCK_D,), tl.float32)
    for kk in range(n_chunks):
        k = n_chunks - 1 - kk
        t = k * CHUNK + steps
        t_mask = t < L
        mask = d_mask[:, None] & t_mask[None, :]
        offs = row[:, None] + t[None, :]
        u, raw, dt = _fwd_chunk(u_ptr, delta_ptr, bias, row, t, mask, SOFTPLUS)
        dtu = dt * u
        dy = tl.load(dout_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        if HAS_Z:
            zz = tl.load(z_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            dy = dy * zz * tl.sigmoid(zz)
        dD_acc += tl.sum(dy * u, axis=1)
        g_decay = tl.zeros((BLOCK_D, CHUNK), tl.float32)  # sum_n A_n g a_t h_{t-1}
        g_drive = tl.zeros((BLOCK_D, CHUNK), tl.float32)  # sum_n B_n g
        y = tl.zeros((BLOCK_D, CHUNK), tl.float32)
        # state entering this chunk: the checkpoint of the chunk before (zero for the first)
        h_start_ptr = ckpt_ptr + (pid_b * n_chunks + tl.maximum(k - 1, 0)) * N * dim + offs_d
        has_start = k > 0
        # s = a_t g_t at the start of the later chunk, carried in a (batch, 2, n, dim) scratch:
        # read the slot of the previous iteration, write the other (no read/write race)
        s_in_ptr = carry_ptr + (pid_b * 2 + (kk + 1) % 2) * N * dim + offs_d
        s_out_ptr = carry_ptr + (pid_b * 2 + kk % 2) * N * dim + offs_d
        for n in range(N):
            a_n = tl.load(A_ptr + offs_d * N + n, mask=d_mask, other=0.0).to(tl.float32)
            b_n = tl.load(B_ptr + bc_base + n * L + t, mask=t_mask, other=0.0).to(tl.float32)
            c_n = tl.load(C_ptr + bc_base + n * L + t, mask=t_mask, other=0.0).to(tl.float32)
            a = tl.exp2(dt * (a_n * LOG2E)[:, None])
            drive = dtu * b_n[None, :]
            decay, acc = tl.associative_scan((a, drive), 1, _affine_combine)
            h_start = tl.load(h_start_ptr + n * dim, mask=d_mask, other=0.0)
            h = acc + decay * tl.where(has_start, h_start, 0.0)[:, None]
            if HAS_Z:
                y += h * c_n[None, :]
            # adjoint g_t = C_t dy_t + a_{t+1} g_{t+1}, continued from the later chunk
            _, fa, fb = _reverse_adjoint_scan(a, tl.full((BLOCK_D, CHUNK), 1.0, tl.float32),
                                              dy * c_n[None, :], BY_FLIP)
            s_in = tl.load(s_in_ptr + n * dim, mask=d_mask, other=0.0)
            g = fb + fa * tl.where(kk > 0, s_in, 0.0)[:, None]
            # h - drive = a_t h_{t-1}: dL/da_t * a_t without shifting h by one step
            g_ah = g * (h - drive)
            g_decay += g_ah * a_n[:, None]
            g_drive += g * b_n[None, :]
            # sums over time (s to the chunk before, dA) and over channels (dB, dC), paired
            s_out, dA_n = tl.reduce((tl.where(steps[None, :] == 0, a * g, 0.0), g_ah * dt), 1,
                                    _pair_sum)
            tl.store(s_out_ptr + n * dim, s_out, mask=d_mask)
            dA_acc += tl.where(cols[None, :] == n, dA_n[:, None], 0.0)
            dB_n, dC_n = tl.reduce((g * dtu, dy * h), 0, _pair_sum)
            bc_offs = bc_base + n * L + t
            tl.atomic_add(dB_ptr + bc_offs, dB_n, mask=t_mask, sem="relaxed")
            tl.atomic_add(dC_ptr + bc_offs, dC_n, mask=t_mask, sem="relaxed")
        du = g_drive * dt + dy * skip[:, None]
        ddt = g_decay + g_drive * u
        if HAS_Z:
            # z and dout again (cache hits) rather than keep them live through the n loop
            dout = tl.load(dout_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            zz = tl.load(z_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            sig_z = tl.sigmoid(zz)
            dz = dout * (y + skip[:, None] * u) * sig_z * (1.0 + zz * (1.0 - sig_z))
            tl.store(dz_ptr + offs, dz.to(dz_ptr.dtype.element_ty), mask=mask)
        if SOFTPLUS:
            ddt = tl.where(raw > 20.0, ddt, ddt * tl.sigmoid(raw))
        ddt = tl.where(mask, ddt, 0.0)
        dbias_acc += tl.sum(ddt, axis=1)
        tl.store(du_ptr + offs, du.to(du_ptr.dtype.element_ty), mask=mask)
        tl.store(ddelta_ptr + offs, ddt.to(ddelta_ptr.dtype.element_ty), mask=mask)
        tl.debug_barrier()  # this chunk's carries, stored by some threads, read by others
    tl.store(dA_part_ptr + chan[:, None] * N + cols[None, :], dA_acc,
             mask=d_mask[:, None] & (cols < N)[None, :])
    tl.store(dD_part_ptr + chan, dD_acc, mask=d_mask)
    tl.store(dbias_part_ptr + chan, dbias_acc, mask=d_mask)
