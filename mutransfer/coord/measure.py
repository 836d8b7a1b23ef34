"""Coordinate check, measuring part: RMS of every traced activation and of its change.

As the mup library's `get_coord_data`: for each width, train a few steps and record, per
quantity, the RMS per coordinate of h_t and of h_t - h_0 on a fixed probe batch.
"""

from __future__ import annotations

import pandas as pd
import torch
import torch.nn.functional as F

from mutransfer.config import ModelConfig, TrainConfig, TrialConfig
from mutransfer.coord.settings import CoordSettings
from mutransfer.coord.updates import step_or_blow_up
from mutransfer.denormals import flush_denormals
from mutransfer.models.build import build_model
from mutransfer.models.data_init import init_sample
from mutransfer.models.trace import tracing
from mutransfer.optim import make_optimizer


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


def _rms(t: torch.Tensor) -> float:
    return t.pow(2).mean().sqrt().item()


def _split_name(name: str) -> tuple[int, str]:
    """'layer1.conv' -> (1, 'conv'); 'logits' -> (-1, 'logits')."""
    if name.startswith("layer"):
        head, q = name.split(".", 1)
        return int(head[5:]), q
    return -1, name


def measure_one(cfg: TrialConfig, spec, train_batches, probe, sample=None) -> list[dict]:
    """Train `len(train_batches)` steps; rows of (step, layer, quantity, rms, drms).
    `sample`: the batch the data-dependent init schemes look at (data_init.init_sample)."""
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg, spec, sample=sample)
    opt = make_optimizer(model, cfg)
    rows, h0 = [], None
    for step in range(len(train_batches) + 1):
        model.eval()
        with torch.no_grad(), tracing() as acts:
            model(probe)
        if h0 is None:
            h0 = dict(acts)
        for name, h in acts.items():
            layer, quantity = _split_name(name)
            rows.append({"step": step, "layer": layer, "quantity": quantity, "rms": _rms(h),
                         "drms": _rms(h - h0[name])})
        if step == len(train_batches):
            break
        model.train()
        inputs, targets = train_batches[step]
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        step_or_blow_up(opt)
    return rows


def run_coord_check(s: CoordSettings, source, progress=None) -> pd.DataFrame:
    """All (parameterization, width or depth, seed) runs as one long table
    (docs/results-format.md)."""
    flush_denormals()  # as every trial does (mutransfer/denormals.py)
    spec = source.spec
    rows = []
    seeds = s.seeds
    # the same data for every parameterization and width: a fixed probe, train batches per seed
    probe, _ = next(source.batches("eval", s.batch_size, s.seq_len, seed=1234))
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
