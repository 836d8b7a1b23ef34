"""The package's own models: the Mamba and S4D mixers and the language model around them,
which the seam (mutransfer/models/factory.py) builds for `model.arch` mamba, mamba2 and s4d."""

from __future__ import annotations

from collections.abc import Callable

import torch.nn as nn

from mutransfer.models.lm import SequenceModel
from mutransfer.models.mamba import MambaMixer
from mutransfer.models.mamba2 import Mamba2Mixer
from mutransfer.models.s4d import S4DMixer


def make_mixer_factory(cfg, width: int):
    """A function layer_idx -> mixer module for `cfg.model.arch`."""
    mc = cfg.model
    backend = None if mc.scan_backend == "auto" else mc.scan_backend
    d_state = mc.d_state
    if mc.arch == "mamba":
        def make(i: int) -> nn.Module:
            return MambaMixer(width, mc.base_width, d_state=d_state, d_conv=mc.d_conv,
                              expand=mc.expand, n_layer=mc.n_layer, dt_min=mc.dt_min,
                              dt_max=mc.dt_max, dt_init_floor=mc.dt_init_floor,
                              scan_backend=backend, layer_idx=i)
        return make
    if mc.arch == "mamba2":
        o = mc.mamba2

        def make(i: int) -> nn.Module:
            return Mamba2Mixer(width, mc.base_width, d_state=d_state, d_conv=mc.d_conv,
                               expand=mc.expand, headdim=o.headdim, ngroups=o.ngroups,
                               widen=o.widen, A_init_range=(o.A_init_min, o.A_init_max),
                               dt_min=mc.dt_min, dt_max=mc.dt_max,
                               dt_init_floor=mc.dt_init_floor, chunk_size=o.chunk_size,
                               n_layer=mc.n_layer, scan_backend=backend, layer_idx=i)
        return make
    if mc.arch == "s4d":
        def make(i: int) -> nn.Module:
            return S4DMixer.from_config(width, mc, layer_idx=i)
        return make
    raise ValueError(f"unknown arch {mc.arch!r}")


def sequence_model(cfg, spec, width: int) -> SequenceModel:
    """The built-in language model (`cfg.model.arch` mamba, mamba2 or s4d) at `width`, at the
    reference init (no parameterization yet)."""
    tokens = spec.kind == "tokens"
    return SequenceModel(
        width, cfg.model.base_width, cfg.model.n_layer, make_mixer_factory(cfg, width),
        vocab_size=spec.vocab_size if tokens else None,
        input_dim=None if tokens else spec.input_dim,
        output_dim=spec.output_dim, tie_embeddings=cfg.model.tie_embeddings,
        embedding_std=cfg.model.embedding_std,
    )


def builtin_factory(cfg, spec) -> Callable[[int], nn.Module]:
    """width -> the package's Mamba, Mamba-2 or S4D language model for `spec`'s data."""
    return lambda width: sequence_model(cfg, spec, width)
