"""GPUs the cost table knows: memory, peak dense bf16 FLOP/s, memory bandwidth, and measured
training throughput.

The measured figures are the ones in benchmarks/README.md ("Throughput for cost estimates";
a test keeps the two the same). They were taken at vocab 256, where the blocks are nearly all
of a step; a trial's time per token is the measured one at its width (interpolated in
log-log between the measured widths; beyond the widest, scaled by the blocks' FLOPs) plus
what its larger vocabulary adds: the readout matmul's FLOPs at READOUT_MFU of the peak and
the loss's HEAD_BYTES per vocabulary entry at the memory bandwidth. With `--mfu`, a trial's
time is its FLOPs / (mfu x peak) instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from mutransfer.cost.model import Shape, forward_flops_per_token
from mutransfer.errors import UserError

READOUT_MFU = 0.5  # an assumption: large bf16 GEMMs reach about half the dense peak
# bytes moved per token and vocabulary entry at the loss: bf16 logits written, read into a
# float32 copy, log-softmax written, read in the backward with its gradient, bf16 gradient
HEAD_BYTES = 2 + 2 + 4 + 4 + 4 + 4 + 2


@dataclass(frozen=True)
class Measured:
    """Tokens/s of one training process, by width, at one shape."""

    source: str
    n_layer: int
    d_state: int
    vocab: int
    batch: int
    seq_len: int
    tokens_per_s: dict[int, float]


@dataclass(frozen=True)
class GPU:
    name: str
    memory_gb: float
    peak_flops: float  # dense bf16
    bandwidth: float  # HBM bytes/s
    measured: Measured | None = None


# The project's trainer on one H100 80GB (3 blocks, d_state 16, vocab 256, batch 8 x 2048,
# bf16 autocast, AdamW): the figures of issue 4, before the triton kernels were redesigned
# (benchmarks/README.md "Training step": the current kernels are unmeasured).
H100_PROJECT = Measured("project trainer, H100 80GB, before the kernel redesign (issue 4)",
                        n_layer=3, d_state=16, vocab=256, batch=8, seq_len=2048,
                        tokens_per_s={256: 926e3, 512: 599e3, 1024: 304e3, 2048: 147e3})

# The same trainer and shape on one H200 with the current triton kernels (2026-11-30,
# benchmarks/train_gpu.py; torch 2.11.0+cu130, triton 3.6.0).
H200_PROJECT = Measured("project trainer, H200, current kernels (2026-11-30)",
                        n_layer=3, d_state=16, vocab=256, batch=8, seq_len=2048,
                        tokens_per_s={256: 1377670, 512: 1027194, 1024: 822753,
                                      2048: 385020})

GPUS = {g.name: g for g in (
    GPU("h100", 80, 989e12, 3.35e12, H100_PROJECT),
    GPU("h200", 141, 989e12, 4.8e12, H200_PROJECT),
    GPU("a100", 80, 312e12, 2.0e12),
    GPU("l40s", 48, 362e12, 0.864e12),
)}


def gpu_named(name: str) -> GPU:
    try:
        return GPUS[name.lower()]
    except KeyError:
        raise UserError(f"--gpu {name}: unknown GPU; known: {', '.join(GPUS)}") from None


def _blocks_flops(s: Shape) -> float:
    """Forward FLOPs per token of the blocks alone (no readout)."""
    return forward_flops_per_token(s) - 2.0 * s.width * s.output_dim


def seconds_per_token(gpu: GPU, s: Shape, mfu: float | None) -> float:
    """Training time per token of a trial of shape `s` on one `gpu`."""
    if mfu is not None:
        return 3 * forward_flops_per_token(s) / (mfu * gpu.peak_flops)
    m = gpu.measured
    if m is None:
        raise UserError(f"--gpu {gpu.name}: no measured throughput for it; give --mfu "
                        f"(e.g. 0.3) to estimate from its peak ({gpu.peak_flops / 1e12:g} "
                        f"TFLOP/s)")
    widths = sorted(m.tokens_per_s)
    w = min(max(s.width, widths[0]), widths[-1])
    lo = max(x for x in widths if x <= w)
    hi = min(x for x in widths if x >= w)
    t_lo, t_hi = 1 / m.tokens_per_s[lo], 1 / m.tokens_per_s[hi]
    frac = 0.0 if hi == lo else math.log2(w / lo) / math.log2(hi / lo)
    t = math.exp((1 - frac) * math.log(t_lo) + frac * math.log(t_hi))
    if s.width > widths[-1]:  # wider than measured: the blocks' FLOPs grow, so does the time
        at = replace(s, width=widths[-1], d_state=m.d_state, output_dim=m.vocab)
        t *= _blocks_flops(replace(s, d_state=m.d_state, output_dim=m.vocab)) / \
            _blocks_flops(at)
    t *= s.n_layer / m.n_layer
    extra_vocab = max(0, s.output_dim - m.vocab)
    t += 6.0 * s.width * extra_vocab / (READOUT_MFU * gpu.peak_flops)
    t += HEAD_BYTES * extra_vocab / gpu.bandwidth
    return t
