"""Build a model from a trial config and a data spec, with its parameterization applied
(the package's own models: mutransfer/models/builtin.py)."""

from __future__ import annotations

import torch.nn as nn

from mutransfer.models.data_init import apply_init_schemes
from mutransfer.models.factory import build


def build_model(cfg, spec, sample=None) -> nn.Module:
    """The model of `cfg` (a TrialConfig) for data described by `spec` (a DataSpec).

    Every arch, built-in or `package.module:factory`, goes through the same seam
    (mutransfer/models/factory.py): factory, roles, parameterization. `sample`: a batch
    `(inputs, targets)` (or the inputs alone) from the training data, needed by the
    data-dependent init schemes of the built-in SSMs (model.dt_init autocorr, model.imag_init
    memory; see mutransfer/models/data_init.py); ignored by the others. model.imag_init memory:
    task reads the task's own memory function from `spec.memory_kernel`.
    """
    model = build(cfg, spec)
    if cfg.model.builtin:
        apply_init_schemes(model, cfg, spec, sample)
    return model
