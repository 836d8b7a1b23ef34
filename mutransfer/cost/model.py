"""Parameters, memory and FLOPs of one trial, from its config.

Parameters: exactly what mutransfer/models builds (embedding, per block an RMSNorm and the
mixer, the final norm, an untied readout when there is one).

Activation memory: the bytes autograd keeps from the forward for the backward, per token,
counted tensor by tensor in the order the forward makes them. Two regimes:
- "cpu": float32 everywhere, PyTorch's conv1d, the `chunked` scan (it keeps u, Δ, Δu, B, C
  time-major and the state at each chunk start, and recomputes the states in its backward);
- "cuda": bf16 autocast (each matmul keeps a bf16 copy of its input; the residual stream and
  the norms stay float32), the triton conv (keeps only its input) and the triton scan (u, Δ,
  float32 B and C, z as a view, one float32 state per 64 steps; everything else recomputed).
Peak memory = weights (float32) + gradients + optimizer state + (cuda) the bf16 copies of
the weights that autocast keeps for the backward + activations + the head's workspace (the
logits and their gradient, which dominate at a large vocabulary) + the allocator's retention
+ a fixed reserve. What "peak" means differs by regime:
- "cuda": torch.cuda.max_memory_allocated, live tensors only; the caching allocator's slack,
  the CUDA context and cuBLAS's workspace are the fixed reserve (CUDA_RESERVE_BYTES); no
  retention term.
- "cpu": the process's peak RSS. glibc's malloc raises its mmap threshold to the size of each
  mmapped block freed (up to 32 MiB), so from the second step on the activations under that
  size come from its heap, which freed memory fragments and which is not given back: RSS grows
  to about twice those activations (CPU_HEAP_RETENTION, measured: benchmarks/README.md,
  "Memory estimate"); tensors of 32 MiB or more are mmapped and given back when freed. The
  reserve is what a process holds before its trial (torch, the trainer's modules and the ones
  a first trial imports: CPU_RESERVE_BYTES).

FLOPs: 2 per multiply-add of every matmul (in_proj, x_proj, dt_proj, out_proj, the readout),
the depthwise conv, and 9 per (token, channel, state) for the selective scan's forward, as
Mamba's paper counts it; training = 3 x forward (backward = 2 x forward). S4D: its matmuls and
the FFT convolution (an estimate; its activations are counted more coarsely).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from mutransfer.config import TrialConfig, mamba2_layout

Regime = Literal["cpu", "cuda"]
GiB = float(1 << 30)
CUDA_RESERVE_BYTES = 1.0 * GiB  # CUDA context, cuBLAS workspace, allocator slack
# A process's RSS before its trial: torch and the trainer's modules (0.24 GB), and those its
# first trial imports (pyarrow, triton, sympy: +0.18 GB), its data (stdlib corpus: +0.05 GB):
# 0.43-0.48 GB measured on torch 2.13 (CPU); paid once per process, not per trial
CPU_RESERVE_BYTES = 0.5 * GiB
MMAP_MAX_BYTES = 32 << 20  # glibc's largest mmap threshold (64-bit): larger blocks are mmapped
# RSS the heap keeps beyond the live activations, per byte of activations in tensors under
# MMAP_MAX_BYTES: (peak RSS growth - weights - workspace) / activations was 1.5-2.1 over the
# grid of benchmarks/README.md ("Memory estimate"), 2.2 at width 64-128 after 30 steps
CPU_HEAP_RETENTION = 1.15
# per byte of a block's activations in tensors of MMAP_MAX_BYTES or more: the backward's
# temporaries and the narrower tensors beside them, which the heap keeps (1.24x measured at
# width 256, batch 24 x 1024)
CPU_MAPPED_EXTRA = 0.3
CPU_TRIAL_BYTES = 8e6  # a trial's own objects: its model's modules, eval batches, autograd's graph
TRITON_CKPT_STEPS = 64  # the triton scan keeps one state per this many steps (ScanConfig)
CHUNK_ELEMS = 1 << 19  # the chunked scan's chunk budget (mutransfer/ops/chunked.py)
SCAN_FLOPS = 9  # per (token, channel, state), forward


@dataclass(frozen=True)
class Shape:
    """What the counts depend on, read from a trial config (a dict as TrialConfig dumps)."""

    arch: str
    width: int
    n_layer: int
    d_state: int
    expand: int
    d_conv: int
    tie: bool
    vocab: int | None  # token inputs; None: real inputs of `input_dim`
    input_dim: int | None
    output_dim: int
    batch: int
    seq_len: int
    optimizer: str
    momentum: float
    s4d_output: str
    steps: int
    eval_every: int
    eval_batches: int
    nheads: int = 0  # mamba2: heads and groups at this width (0 for the other archs)
    ngroups: int = 1
    chunk: int = 64

    @classmethod
    def of(cls, config: dict[str, Any], vocab: int | None, input_dim: int | None = None,
           output_dim: int | None = None) -> Shape:
        c = TrialConfig.model_validate(config)
        m, t = c.model, c.train
        out = output_dim if output_dim is not None else (vocab or 1)
        heads = mamba2_layout(m, c.width)[0] if m.arch == "mamba2" else 0
        return cls(m.arch, c.width, m.n_layer, m.d_state, m.expand, m.d_conv,
                   m.tie_embeddings and vocab is not None and out == vocab, vocab, input_dim,
                   out, t.batch_size, t.seq_len, t.optimizer, t.momentum, m.s4d.output,
                   t.total_steps, t.eval_every, t.eval_batches, heads, m.mamba2.ngroups,
                   m.mamba2.chunk_size)

    @property
    def d_inner(self) -> int:
        return self.expand * self.width

    @property
    def dt_rank(self) -> int:
        return math.ceil(self.width / 16)

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.seq_len


# -- parameters ------------------------------------------------------------------------------

def mixer_params(s: Shape) -> int:
    d, e, n, r, k = s.width, s.d_inner, s.d_state, s.dt_rank, s.d_conv
    if s.arch == "mamba2":
        gn, h = s.ngroups * n, s.nheads
        return (d * (2 * e + 2 * gn + h) + (e + 2 * gn) * (k + 1)  # in_proj, conv
                + 3 * h + e + e * d)  # dt_bias, A_log, D, the gated norm, out_proj
    if s.arch == "mamba":
        return (d * 2 * e + e * k + e + e * (r + 2 * n) + r * e + e + e * d  # matmuls, conv
                + e * n + e)  # A_log, D
    modes = s.d_state // 2
    ssm = 2 * d * modes + d + 2 * (2 * d * modes) + d  # A_re, A_im, log_dt, B, C, D
    out = d * 2 * d + 2 * d if s.s4d_output == "glu" else 2 * d * d
    return ssm + out


def param_count(s: Shape) -> int:
    d = s.width
    embed = s.vocab * d if s.vocab is not None else (s.input_dim or 1) * d
    head = 0 if s.tie else d * s.output_dim
    return embed + s.n_layer * (d + mixer_params(s)) + d + head


def matmul_params(s: Shape) -> int:
    """Weights that multiply every token (FLOPs 2 per weight per token forward)."""
    d, e, n, r = s.width, s.d_inner, s.d_state, s.dt_rank
    if s.arch == "mamba":
        layer = d * 2 * e + e * (r + 2 * n) + r * e + e * d
    elif s.arch == "mamba2":
        layer = d * (2 * e + 2 * s.ngroups * n + s.nheads) + e * d
    else:
        layer = d * 2 * d if s.s4d_output == "glu" else 2 * d * d
    readout = d * s.output_dim
    encoder = (s.input_dim or 0) * d if s.vocab is None else 0
    return s.n_layer * layer + readout + encoder


def optimizer_state_bytes(s: Shape, params: int) -> int:
    if s.optimizer in ("adam", "adamw"):
        return 8 * params  # two float32 moments
    return 4 * params if s.momentum > 0 else 0


# -- activations -----------------------------------------------------------------------------

def layer_activation_bytes(s: Shape, regime: Regime) -> float:
    """Bytes kept for the backward per token by one block (norm + mixer)."""
    d, e, n, r, L, k = s.width, s.d_inner, s.d_state, s.dt_rank, s.seq_len, s.d_conv
    if s.arch == "mamba2":
        return _mamba2_layer_bytes(s)
    if s.arch != "mamba":
        return _s4d_layer_bytes(s, regime)
    if regime == "cpu":
        chunk = max(1, min(L, CHUNK_ELEMS // max(1, s.batch * e * n)))
        elems = (3 * d + 1  # norm: its input, 1/rms, the normalized x, its output (in_proj's)
                 + 2 * e  # in_proj's output xz: conv1d's input and the gate z are views of it
                 + e * (L + k - 1) / L  # conv1d's padded output, kept by SiLU
                 + e  # the conv's output made contiguous: x_proj's and the scan's u
                 + r  # dt_proj's input
                 + e  # softplus's input (Δ + bias)
                 + 3 * e + 2 * n  # the scan: u, Δ, Δu, B, C time-major
                 + n * e / chunk  # the scan: the state at each chunk start
                 + 2 * e  # y + D·u and SiLU(z), kept by the gate's product
                 + e)  # out_proj's input
        return 4 * elems
    return (4 * (2 * d + 1) + 2 * d  # norm (float32) and in_proj's bf16 input
            + 2 * 2 * e  # xz (bf16): the conv's input and z
            + 2 * e  # the conv's output: x_proj's input and u
            + 2 * r  # dt_proj's input
            + 2 * e  # Δ (dt_proj's output)
            + 4 * 2 * n  # B and C copied to float32
            + 4 * n * e / TRITON_CKPT_STEPS  # the scan's checkpoints
            + 2 * e)  # the scan's output: out_proj's input


def _mamba2_layer_bytes(s: Shape) -> float:
    """Mamba-2 with the chunked SSD (float32, either regime): norm, in_proj's outputs, the
    conv's padded output and its SiLU, Δ, the chunk's C·B scores and decays (Q per token and
    head), the states entering each chunk, y + D·x, the gated norm and out_proj's input; an
    estimate (no test pins it)."""
    d, e, n, k, h, q = s.width, s.d_inner, s.d_state, s.d_conv, s.nheads, s.chunk
    xbc = e + 2 * s.ngroups * n
    elems = (3 * d + 1 + 2 * e + 2 * s.ngroups * n + h  # norm; in_proj's outputs
             + 2 * xbc * (s.seq_len + k - 1) / s.seq_len  # the conv's padded output, SiLU
             + 3 * h + 2 * e  # Δ, A·Δ and their cumulative sums; x·Δ
             + 3 * q * h  # the scores, decays and their product within a chunk
             + 2 * e * n / q  # the state entering each chunk and each chunk's own
             + 2 * e  # y + D·x, y·SiLU(z)
             + 2 * e)  # the gated norm's output: out_proj's input
    return 4 * elems


def _s4d_layer_bytes(s: Shape, regime: Regime) -> float:
    """S4D: norm, u in float32, the FFT convolution's spectra (complex, length 2L), y + D·u,
    and the output layer's inputs; an estimate (no test pins it)."""
    d = s.width
    size = 4 if regime == "cpu" else 2
    fft = 2 * 4 * 2 * d * 2  # rfft of u and the product, complex64 of length ~2L, per token
    out = (2 * d + 2 * d) * 4 if s.s4d_output == "glu" else 3 * d * 4
    return 4 * (3 * d + 1) + size * d + 4 * d + fft + 4 * d + out


def head_activation_bytes(s: Shape, regime: Regime) -> float:
    """Per token: the input ids (or reals), the final norm, the readout's input, the loss."""
    d = s.width
    ids = 8 if s.vocab is not None else 4 * (s.input_dim or 1)
    norm = 4 * (3 * d + 1) if regime == "cpu" else 4 * (2 * d + 1) + 2 * d  # + readout's in
    return ids + norm + loss_activation_bytes(s)


def loss_activation_bytes(s: Shape) -> float:
    """Per token: log_softmax's output (one float32 per class) and the targets."""
    return 4 * s.output_dim + 8 if s.vocab is not None else 4 * s.output_dim


def activation_bytes(s: Shape, regime: Regime) -> float:
    """What autograd keeps for the backward of one training step."""
    per_token = s.n_layer * layer_activation_bytes(s, regime) + head_activation_bytes(s, regime)
    return per_token * s.tokens_per_step + s.n_layer * fixed_layer_bytes(s)


def fixed_layer_bytes(s: Shape) -> float:
    """What a block keeps for the backward whatever the number of tokens."""
    if s.arch == "s4d":  # the kernel's Vandermonde powers Ā^l, (H, N/2, L) complex64 in
        # either regime, kept by the einsum that sums them: per layer, whatever the batch
        # (left out before: 6.8x under at width 64, d_state 128, L 2048, batch 1)
        return 8 * s.width * (s.d_state // 2) * s.seq_len
    # A = -exp(A_log) (the exp's output, the masked product, its mask factor)
    return 3 * 4 * s.d_inner * s.d_state if s.arch == "mamba" else 0


def heap_bytes(s: Shape, regime: Regime) -> float:
    """The activations and the head's workspace that sit in tensors under MMAP_MAX_BYTES
    (what glibc's heap serves), each group judged by its widest tensor: a block's (batch,
    seq_len, d_inner) (S4D: width), the head's (batch, seq_len, width), the loss's (batch,
    seq_len, classes)."""
    t = s.tokens_per_step

    def small(size: float) -> bool:
        return size < MMAP_MAX_BYTES

    wide = s.width if s.arch == "s4d" else s.d_inner
    layers = s.n_layer * layer_activation_bytes(s, regime) * t if small(4 * t * wide) else 0.0
    fixed = fixed_layer_bytes(s)
    loss = loss_activation_bytes(s) * t + head_workspace_bytes(s, regime)
    head = (head_activation_bytes(s, regime) - loss_activation_bytes(s)) * t
    return (layers + (s.n_layer * fixed if small(fixed) else 0.0)
            + (head if small(4 * t * s.width) else 0.0)
            + (loss if small(4 * t * s.output_dim) else 0.0))


def allocator_bytes(s: Shape, regime: Regime) -> float:
    """RSS beyond the saved tensors at the CPU's peak (module docstring): what malloc's heap
    keeps of the activations under MMAP_MAX_BYTES; of the blocks' mmapped ones, the backward's
    temporaries and their narrower tensors (norms, B and C), which the heap still serves; the
    trial's own objects. 0 on cuda, whose allocator's slack is in the fixed reserve."""
    if regime != "cpu":
        return 0.0
    heap = heap_bytes(s, regime)
    t, wide = s.tokens_per_step, s.width if s.arch == "s4d" else s.d_inner
    mapped = (s.n_layer * layer_activation_bytes(s, regime) * t
              if 4 * t * wide >= MMAP_MAX_BYTES else 0.0)
    return CPU_HEAP_RETENTION * heap + CPU_MAPPED_EXTRA * mapped + CPU_TRIAL_BYTES


def head_workspace_bytes(s: Shape, regime: Regime) -> float:
    """Transient at the loss: the logits (bf16 on cuda) and their float32 copy in the forward,
    the gradients of the log-softmax and of the logits in the backward."""
    per_token = (2 + 4 + 4 if regime == "cuda" else 4 + 4) * s.output_dim
    return per_token * s.tokens_per_step


# -- FLOPs ---------------------------------------------------------------------------------------

def forward_flops_per_token(s: Shape) -> float:
    flops = 2.0 * matmul_params(s)
    if s.arch == "mamba":
        flops += s.n_layer * (2 * s.d_conv * s.d_inner + SCAN_FLOPS * s.d_inner * s.d_state)
    elif s.arch == "mamba2":
        flops += s.n_layer * (2 * s.d_conv * (s.d_inner + 2 * s.ngroups * s.d_state)
                              + ssd_flops_per_token(s))
    else:  # FFT convolution of length 2L: ~ 2 rfft + 1 irfft, 5 N log2 N each, per channel
        n = 2 * s.seq_len
        flops += s.n_layer * s.width * 3 * 5 * n * math.log2(n) / s.seq_len
    return flops


def ssd_flops_per_token(s: Shape) -> float:
    """The chunked SSD per token (ops/ssd_chunked.py), 2 per multiply-add: C·B within the
    chunk (Q·N per group), the scores times x (Q·P per head), each chunk's state and the
    entering state's read-out (2·P·N per head)."""
    q, n, p = min(s.chunk, s.seq_len), s.d_state, s.d_inner // max(1, s.nheads)
    return 2.0 * (s.ngroups * q * n + s.nheads * (q * p + 2 * p * n))


def train_flops_per_token(s: Shape) -> float:
    return 3.0 * forward_flops_per_token(s)


@dataclass(frozen=True)
class Estimate:
    params: int
    weights_bytes: float  # float32 weights + gradients + optimizer state (+ bf16 copies)
    activation_bytes: float
    workspace_bytes: float
    reserve_bytes: float  # the process's own (cpu) or the CUDA context's and allocator's
    allocator_bytes: float  # cpu: what malloc's heap keeps beyond the live tensors
    train_tokens: int
    eval_tokens: int
    flops_per_token: float  # training
    flops: float  # the whole trial, evals included

    @property
    def peak_bytes(self) -> float:
        return (self.weights_bytes + self.activation_bytes + self.workspace_bytes
                + self.allocator_bytes + self.reserve_bytes)

    @property
    def peak_gb(self) -> float:
        return self.peak_bytes / 1e9


def eval_points(steps: int, every: int, start: int = 0) -> int:
    """The evaluations a run of `steps` steps makes after step `start` (the trainer's: every
    `every` steps and at the last), with step 0's when it starts from the beginning; a horizon
    branch (`start`: its cooldown start) has the ones before from its trunk."""
    after = steps // every - start // every + (1 if steps % every else 0)
    return after + (1 if start == 0 else 0)


def estimate(s: Shape, regime: Regime = "cuda", start: int = 0) -> Estimate:
    """What one trial holds and costs; `start`: the step its training starts from (a horizon
    branch trains only from its cooldown start: its tokens and FLOPs are those steps')."""
    params = param_count(s)
    weights = 4 * params + 4 * params + optimizer_state_bytes(s, params)
    if regime == "cuda":
        weights += 2 * matmul_params(s)  # autocast's bf16 copies, kept for the backward
    train_tokens = (s.steps - start) * s.tokens_per_step
    eval_tokens = eval_points(s.steps, s.eval_every, start) * s.eval_batches * s.tokens_per_step
    fwd = forward_flops_per_token(s)
    return Estimate(
        params=params, weights_bytes=weights, activation_bytes=activation_bytes(s, regime),
        workspace_bytes=head_workspace_bytes(s, regime),
        reserve_bytes=CUDA_RESERVE_BYTES if regime == "cuda" else CPU_RESERVE_BYTES,
        allocator_bytes=allocator_bytes(s, regime),
        train_tokens=train_tokens, eval_tokens=eval_tokens, flops_per_token=3 * fwd,
        flops=3 * fwd * train_tokens + fwd * eval_tokens)
