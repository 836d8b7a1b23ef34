"""Build a model from a trial config and a data spec, with its parameterization applied."""

from __future__ import annotations

import torch.nn as nn

from mutransfer.models.data_init import apply_init_schemes
from mutransfer.models.lm import SequenceModel
from mutransfer.models.mamba import MambaMixer
from mutransfer.models.mamba2 import Mamba2Mixer


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
        from mutransfer.models.s4d import S4DMixer

        def make(i: int) -> nn.Module:
            return S4DMixer.from_config(width, mc, layer_idx=i)
        return make
    raise ValueError(f"unknown arch {mc.arch!r}")


def sequence_model(cfg, spec, width: int) -> SequenceModel:
    """The built-in language model (`cfg.model.arch` mamba, mamba2 or s4d) at `width`, at the
    reference init (no parameterization yet): the built-in factory of models/factory.py."""
    tokens = spec.kind == "tokens"
    return SequenceModel(
        width, cfg.model.base_width, cfg.model.n_layer, make_mixer_factory(cfg, width),
        vocab_size=spec.vocab_size if tokens else None,
        input_dim=None if tokens else spec.input_dim,
        output_dim=spec.output_dim, tie_embeddings=cfg.model.tie_embeddings,
        embedding_std=cfg.model.embedding_std,
    )


def build_model(cfg, spec, sample=None) -> nn.Module:
    """The model of `cfg` (a TrialConfig) for data described by `spec` (a DataSpec).

    Every arch, built-in or `package.module:factory`, goes through the same seam
    (mutransfer/models/factory.py): factory, roles, parameterization. `sample`: a batch
    `(inputs, targets)` (or the inputs alone) from the training data, needed by the
    data-dependent init schemes of the built-in SSMs (model.dt_init autocorr, model.imag_init
    memory; see mutransfer/models/data_init.py); ignored by the others. model.imag_init memory:
    task reads the task's own memory function from `spec.memory_kernel`.
    """
    from mutransfer.models.factory import build

    model = build(cfg, spec)
    if cfg.model.builtin:
        apply_init_schemes(model, cfg, spec, sample)
    return model
