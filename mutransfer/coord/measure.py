"""Coordinate check, measuring part: RMS of every traced activation and of its change (a
factory arch, which traces none: every parameter-holding module's output and the logits).

As the mup library's `get_coord_data`: for each width, train a few steps and record, per
quantity, the RMS per coordinate of h_t and of h_t - h_0 on a fixed probe batch.
"""

from __future__ import annotations

import pandas as pd

from mutransfer.config import ModelConfig, TrainConfig, TrialConfig
from mutransfer.coord import anymodel
from mutransfer.coord.settings import CoordSettings
from mutransfer.denormals import flush_denormals
from mutransfer.models.data_init import init_sample


def trial_config(s: CoordSettings, param: str, width: int, seed: int,
                 n_layer: int | None = None) -> TrialConfig:
    """The trial a coordinate-check run builds (`n_layer`: the depth; default s.n_layer)."""
    overrides = (s.overrides or {}).get(param, {})
    model = {"n_layer": s.n_layer, "d_state": s.d_state,
             "base_width": s.base_width or min(s.widths), **(s.model or {})}
    if n_layer is not None:
        model["n_layer"] = n_layer
    if s.depths and "base_n_layer" in ModelConfig.model_fields:
        model.setdefault("base_n_layer", min(s.depths))  # as base_width: the smallest depth
    param_cfg = {"name": param, "overrides": overrides}
    if s.depth_param is not None:
        param_cfg["depth"] = s.depth_param
    for key, value in (s.depth_fields or {}).items():
        *path, last = key.split(".")
        node = param_cfg
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return TrialConfig(
        width=width,
        model=ModelConfig(**model),
        param=param_cfg,
        train=TrainConfig(optimizer=s.optimizer, lr=s.lr, betas=(0.9, 0.95), seed=seed,
                          grad_clip=None, batch_size=s.batch_size, seq_len=s.seq_len),
    )


def measure_one(cfg: TrialConfig, spec, train_batches, probe, sample=None) -> list[dict]:
    """Train `len(train_batches)` steps; rows of (step, layer, quantity, rms, drms) on the
    `probe` batch `(inputs, targets)`. `sample`: the batch the data-dependent init schemes look
    at (data_init.init_sample). The measuring is `mutransfer check`'s (coord/anymodel.py): the
    activations a built-in model records, else (a `package.module:factory` arch, which records
    none) the output of every module holding parameters and the logits; before, a factory
    arch gave no rows at all and the verdict ended in a KeyError traceback."""
    rows = anymodel.measure(cfg, spec, train_batches, probe, sample)[0]
    return [{k: v for k, v in r.items() if k != "order"} for r in rows]


def run_coord_check(s: CoordSettings, source, progress=None) -> pd.DataFrame:
    """All (parameterization, width or depth, seed) runs as one long table
    (docs/results-format.md)."""
    flush_denormals()  # as every trial does (mutransfer/denormals.py)
    spec = source.spec
    rows = []
    seeds = s.seeds
    # the same data for every parameterization and width: a fixed probe, train batches per seed
    probe = next(source.batches("eval", s.batch_size, s.seq_len, seed=1234))
    train = {}
    for seed in seeds:
        it = source.batches("train", s.batch_size, s.seq_len, seed=seed)
        train[seed] = [next(it) for _ in range(s.steps)]
    jobs = [(p, w, d, seed) for p in s.params for w, d in s.points() for seed in seeds]
    for i, (param, width, depth, seed) in enumerate(jobs):
        cfg = trial_config(s, param, width, seed, depth)
        sample = init_sample(cfg, source, s.seq_len)
        for r in measure_one(cfg, spec, train[seed], probe, sample):
            rows.append({"parameterization": param, "optimizer": s.optimizer, "width": width,
                         "n_layer": depth, "seed": seed, **r})
        if progress:
            where = f"depth {depth}" if s.depths else f"width {width}"
            progress(i + 1, len(jobs), f"{param} {where} seed {seed}")
    return pd.DataFrame(rows)
