"""Apply the initialization schemes of `cfg.model` (Liu & Li, ICLR 2025) to a built model.

Called by `build_model` after the parameterization; a no-op with the default config. Per
layer, from the bottom up (so that each layer sees the inputs that the layers below, already
initialised, produce):

- zero_real_fraction p: round(p · count) eigenvalues, drawn at random, get Re(A) = 0 exactly.
  S4D: A_re = 0 on those (H, N/2) entries (trainable). Mamba: its `A_zero` mask on those
  (d_inner, d_state) entries, so A = 0 there (Mamba's A = -exp(A_log) cannot reach 0, and
  the masked entries stay at 0 during training). The masks are drawn (masking nothing at
  p = 0) whenever dt_init is autocorr too, so that the Δ spread is the same at every p.
- dt_init autocorr: the layer's SSM input on `sample` is captured by a hook (S4D: the mixer's
  input; Mamba: the scan input, i.e. what enters x_proj_dt), from the output of the block
  below as that block ends up (one forward per block), its channels pooled as sequences
  (each channel centred on its own mean by the `toeplitz` estimate), λ_max estimated
  (mutransfer/init/autocorr.py), and Δ* = κ/√(L·λ_max) spread log-uniformly over the
  channels (S4D: Δ itself; Mamba: the Δ bias, softplus(bias) = Δ, floored at dt_init_floor
  as the reference).
- imag_init memory (S4D only): frequencies chosen once from the memory function
  (mutransfer/init/memory.py), then per channel, with the layer's final Δ, the Im(A) whose
  mode turns by θ per step under the mixer's discretization (ZOH θ/Δ, bilinear (2/Δ)·tan(θ/2)).

Everything data-derived comes from the caller, as the trainer hands it over (mutransfer/train.py):
the sample batch, and the data spec, which carries a task's own memory function
(`DataSpec.memory_kernel`, for `imag_init.memory: task`). This module never imports data/.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
import torch.nn as nn

from mutransfer.errors import UserError
from mutransfer.init import autocorr, memory

Sample = torch.Tensor | Sequence[torch.Tensor]


SAMPLE_SEED = 10_000  # stream of the batch that data-dependent init schemes look at
SAMPLE_SIZE = 16       # sequences in it


def init_sample(cfg, source, seq_len: int) -> tuple | None:
    """The batch the data-dependent init schemes of `cfg` look at (None when it needs none):
    SAMPLE_SIZE sequences of the source's train split from their own stream (SAMPLE_SEED +
    the trial's seed), so the training batches are untouched. A trial and the coordinate
    checks build their models from the same one."""
    if not needs_sample(cfg.model):
        return None
    return next(source.batches("train", SAMPLE_SIZE, seq_len,
                               seed=SAMPLE_SEED + cfg.train.seed))


def needs_sample(mc) -> bool:
    """Whether the model config asks for a data sample at init."""
    return mc.dt_init.scheme == "autocorr" or (
        mc.imag_init.scheme == "memory" and mc.imag_init.memory == "ridge")


def _split(sample: Sample | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    if sample is None or isinstance(sample, torch.Tensor):
        return sample, None
    inputs, targets = sample[0], sample[1] if len(sample) > 1 else None
    return inputs, targets


def _check(cfg, spec, inputs, targets) -> None:
    mc = cfg.model
    if needs_sample(mc) and inputs is None:
        raise UserError("model.dt_init autocorr / imag_init memory need a data sample at init: "
                        "call build_model(cfg, spec, sample=(inputs, targets))")
    if mc.imag_init.scheme == "memory" and mc.arch != "s4d":
        raise UserError(f"model.imag_init: memory applies to complex A (arch s4d); "
                        f"{mc.arch}'s A is real")
    im = mc.imag_init
    if im.scheme == "memory" and im.memory == "ridge" and targets is None:
        raise UserError("model.imag_init: memory with ridge needs targets in the sample: pass "
                        "sample=(inputs, targets)")
    if im.scheme == "memory" and im.memory == "task" and spec.memory_kernel is None:
        raise UserError("model.imag_init.memory: task needs data source synthetic, task memory")


def apply_init_schemes(model: nn.Module, cfg, spec, sample: Sample | None = None) -> None:
    """Zero real parts, Δ from the autocorrelation, imaginary parts from the memory function.

    `spec`: the DataSpec of the training data (its `memory_kernel` for imag_init memory: task).
    """
    inputs, targets = _split(sample)
    _check(cfg, spec, inputs, targets)
    mc = cfg.model
    mixers = [layer.mixer for layer in model.layers]
    autocorr_dt_init = mc.dt_init.scheme == "autocorr"
    if mc.zero_real_fraction > 0 or autocorr_dt_init:
        # drawn at p = 0 too (masking nothing): the Δ spread drawn next from the same stream
        # is then the same in every cell of a zero_real_fraction axis, so p is the only change
        for mixer in mixers:
            zero_real_parts(mixer, mc.zero_real_fraction)
    chosen = _chosen_frequencies(cfg, spec, mixers[0], inputs, targets)
    if not autocorr_dt_init and chosen is None:
        return
    block_inputs = _block_inputs(model, inputs) if autocorr_dt_init else None
    for i, mixer in enumerate(mixers):
        if block_inputs is not None:  # Δ before A_im: Im(A) = θ/Δ
            with scans_where_built(model):
                x = _ssm_input(model.layers[i], next(block_inputs))
            mixer.reset_dt(autocorr_dt(x, mc.dt_init, channels=mixer.channels, layer=i))
        if chosen is not None:
            with torch.no_grad():
                mixer.A_im.copy_(memory.imag_parts(chosen, mixer.dt(), mixer.modes,
                                                   mc.imag_init.min_separation,
                                                   mixer.discretization))


@contextmanager
def scans_where_built(model: nn.Module) -> Iterator[None]:
    """The init's forward passes run where the model is built, the CPU (a trial moves it to
    its device after): a mixer set to a GPU scan backend (triton, mamba_ssm) scans there with
    the device's default, the same scan by another kernel. Before, `scan_backend: triton`
    (or mamba_ssm) with dt_init autocorr and two layers failed every GPU trial while building:
    layer 1's input needs layer 0's scan, and those kernels take CUDA tensors only."""
    mixers = [m for m in (layer.mixer for layer in model.layers) if hasattr(m, "scan_backend")]
    saved = [m.scan_backend for m in mixers]
    if next(model.parameters()).device.type == "cpu":
        for m in mixers:
            m.scan_backend = None
    try:
        yield
    finally:
        for m, backend in zip(mixers, saved):
            m.scan_backend = backend


def zero_real_parts(mixer: nn.Module, fraction: float) -> torch.Tensor:
    """Set Re(A) = 0 on a random `fraction` of the eigenvalues; returns the boolean mask."""
    count = mixer.channels * mixer.modes
    mask = torch.zeros(count, dtype=torch.bool)
    mask[torch.randperm(count)[: round(fraction * count)]] = True
    mask = mask.reshape(mixer.channels, mixer.modes)
    mixer.zero_real_parts(mask)
    return mask


def autocorr_dt(x: torch.Tensor, opts, channels: int, layer: int = 0) -> torch.Tensor:
    """Per-channel Δ from sequences x (..., L): Δ* = κ/√(L·λ_max), spread log-uniformly."""
    lam = autocorr.lambda_max(x, opts.estimator)
    if not 0 < lam < math.inf:  # Δ* = κ/√(L·λ_max) would be inf, 0 or NaN: no timescale
        what = "zero everywhere" if lam == 0 else f"not finite (λ_max {lam:g})"
        raise UserError(f"model.dt_init autocorr: the SSM input of layer {layer} on the init "
                        f"sample is {what}, so it sets no timescale; use dt_init log_uniform")
    dt_star = autocorr.timescale(lam, x.shape[-1], opts.kappa)
    return autocorr.spread_dt(dt_star, opts.spread, channels)


class _Captured(Exception):
    """Raised by a capture hook to stop the forward pass once the input is recorded."""


@torch.no_grad()
def _input_of(target: nn.Module, run: nn.Module, arg: torch.Tensor) -> torch.Tensor:
    """The first positional input that `target` receives while `run(arg)` runs (cut there)."""
    store: list[torch.Tensor] = []

    def hook(_module, args):
        store.append(args[0].detach())
        raise _Captured

    handle = target.register_forward_pre_hook(hook)
    try:
        run(arg)
    except _Captured:
        pass
    finally:
        handle.remove()
    return store[0]


def _as_sequences(x: torch.Tensor) -> torch.Tensor:
    """(batch, L, channels) -> (channels, batch, L): each channel a process of its own, with
    its own mean, whose sequences are the batch's (autocorr's `toeplitz` estimate centres each
    channel on its mean; one mean for all shrank their spread and λ_max with it, to about 0.72
    of the pooled sequences' on the models' inputs, so Δ* came out ~1.2x too large)."""
    return x.float().permute(2, 0, 1).contiguous()


def _ssm_input(block: nn.Module, h: torch.Tensor) -> torch.Tensor:
    """The SSM input of `block` on its input h, as sequences (channels, batch, L)."""
    return _as_sequences(_input_of(block.mixer.ssm_input_module(), block, h))


@torch.no_grad()
def _block_inputs(model: nn.Module, inputs: torch.Tensor) -> Iterator[torch.Tensor]:
    """The input of each block in turn, each computed from the block below as it is when
    asked for (the caller initialises a block before asking for the next one's input): one
    forward per block, where a full forward up to each block would cost O(n_layer²) blocks."""
    device = next(model.parameters()).device
    h = _input_of(model.layers[0], model, inputs.to(device))
    for i, block in enumerate(model.layers):
        yield h
        if i + 1 < len(model.layers):
            h = block(h)


def capture_ssm_input(model: nn.Module, layer: int, inputs: torch.Tensor) -> torch.Tensor:
    """The SSM input of layer `layer` on `inputs`, as sequences (channels, batch, L)."""
    target = model.layers[layer].mixer.ssm_input_module()
    device = next(model.parameters()).device
    return _as_sequences(_input_of(target, model, inputs.to(device)))


def _chosen_frequencies(cfg, spec, mixer, inputs, targets) -> torch.Tensor | None:
    im = cfg.model.imag_init
    if im.scheme != "memory":
        return None
    if im.memory == "task":
        length = inputs.shape[1] if inputs is not None else cfg.train.seq_len
        rho = torch.from_numpy(spec.memory_kernel(length))
    else:
        rho = ridge_rho(inputs, targets, im)
    return memory.dominant_frequencies(rho, mixer.modes, im.min_separation)


def ridge_rho(inputs: torch.Tensor, targets: torch.Tensor, im) -> torch.Tensor:
    """The memory function of a scalar real task from a sample batch (B, L, 1) each."""
    if (not inputs.is_floating_point() or inputs.dim() != 3 or inputs.shape[-1] != 1
            or targets.dim() != 3 or targets.shape[-1] != 1):
        raise UserError("model.imag_init: memory with ridge needs scalar real inputs and "
                        "targets (e.g. the synthetic memory task)")
    return memory.ridge_memory(inputs[..., 0], targets[..., 0], max_lag=im.max_lag,
                               ridge=im.ridge)
