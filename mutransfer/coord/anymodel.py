"""Coordinate check of any model (built-in or from a factory): RMS of h_t and h_t - h_0.

As mutransfer/coord/measure.py, with two differences: the model is any that the seam builds
(mutransfer/models/factory.py) from a full TrialConfig, and its coordinates are what it
records (`mutransfer.models.trace.record`: the built-in models) or else, as the mup library's
`get_coord_data`, the output of every module that holds parameters, and the logits. Each row
also names the parameters behind its quantity (`params`), so a verdict can name their roles.
Rows have the columns of coord.parquet (docs/results-format.md) plus `order` (forward order).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F

from mutransfer.config import TrialConfig
from mutransfer.coord.updates import snapshot, step_or_blow_up, update_rows
from mutransfer.denormals import flush_denormals
from mutransfer.models.build import build_model
from mutransfer.models.data_init import init_sample
from mutransfer.models.trace import tracing
from mutransfer.optim import make_optimizer
from mutransfer.param.roles import owners

# what feeds each quantity the built-in models record (layer i's module, by name suffix):
# Mamba's names (x_proj_B, dt_proj, ...) and Mamba-2's (in_proj_B, in_proj_dt, dt_bias, ...);
# a suffix matches a whole name part, so `in_proj` is not `in_proj_B`
TRACED = {"embedding": ["embedding"], "in_proj": ["in_proj", "in_proj_zx"], "conv": ["conv1d"],
          "delta": ["dt_proj", "x_proj_dt", "in_proj_dt", "dt_bias"],
          "B": ["x_proj_B", "in_proj_B"], "C": ["x_proj_C", "in_proj_C"],
          "ssm_state": ["x_proj_B", "dt_proj", "in_proj_B", "in_proj_dt"],
          "ssm_state_out": ["x_proj_C", "x_proj_B", "in_proj_C", "in_proj_B"],
          "ssm_out": ["D"], "block_out": ["out_proj"], "logits": ["<readout>"],
          "u": ["in_proj"], "y": ["B", "C"]}
_LAYER = re.compile(r"^layer(\d+)\.(.+)$")


def split_name(name: str) -> tuple[int, str]:
    """'layer1.conv' -> (1, 'conv'); anything else -> (-1, name)."""
    m = _LAYER.match(name)
    return (int(m.group(1)), m.group(2)) if m else (-1, name)


def _first_tensor(out) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return None


@contextmanager
def module_outputs(model: nn.Module, skip: frozenset[str] = frozenset()
                   ) -> Iterator[dict[str, torch.Tensor]]:
    """Outputs of every module holding parameters of its own (but those in `skip`), by module
    name, in call order."""
    store: dict[str, torch.Tensor] = {}
    handles = []
    for name, module in model.named_modules():
        if name and name not in skip and any(True for _ in module.parameters(recurse=False)):
            def hook(_m, _i, out, name=name):
                t = _first_tensor(out)
                if t is not None and t.is_floating_point():
                    store[name] = t.detach().float()
            handles.append(module.register_forward_hook(hook))
    try:
        yield store
    finally:
        for h in handles:
            h.remove()


def quantity_params(model: nn.Module, roles: dict[str, str]) -> Callable[[str], list[str]]:
    """quantity name -> the parameter names behind it (a module's own, or a traced quantity's
    modules in its layer; the logits: the readout, else the embedding)."""
    names = list(owners(model))
    readout = [n for n in names if roles.get(n) == "readout"] or \
        [n for n in names if roles.get(n) == "embedding"][:1]

    def params(quantity: str) -> list[str]:
        if quantity in ("logits", "loss"):
            return readout
        own = [n for n in names if n.rsplit(".", 1)[0] == quantity]
        if own:
            return own
        layer, q = split_name(quantity)
        out = []
        for suffix in TRACED.get(q, []):
            if suffix == "<readout>":
                out += readout
                continue
            prefix = f"layers.{layer}." if layer >= 0 else ""
            out += [n for n in names if n.startswith(prefix)
                    and (f".{suffix}." in f".{n}" or n.endswith(f".{suffix}"))]
        return out
    return params


def _rms(t: torch.Tensor) -> float:
    return t.pow(2).mean().sqrt().item()


def readout_modules(model: nn.Module, roles: dict[str, str]) -> frozenset[str]:
    """Modules whose parameters are all readout, when the model multiplies the logits itself
    (`readout_mult`): their own output is not the readout's (the logits are recorded)."""
    if not hasattr(model, "readout_mult"):
        return frozenset()
    by_module: dict[str, set[str]] = {}
    for name, role in roles.items():
        by_module.setdefault(name.rsplit(".", 1)[0] if "." in name else "", set()).add(role)
    return frozenset(m for m, r in by_module.items() if r == {"readout"})


def _observe(model: nn.Module, cfg: TrialConfig, probe, skip: frozenset[str]
             ) -> dict[str, torch.Tensor]:
    inputs, targets = probe
    custom = cfg.model.loss == "custom"
    with torch.no_grad(), tracing() as traced, module_outputs(model, skip) as outs:
        out = model(inputs, targets) if custom else model(inputs)
    if traced:
        return dict(traced)
    acts = dict(outs)
    if not custom:
        acts["logits"] = out.detach().float()
    return acts


def _loss(model: nn.Module, cfg: TrialConfig, spec, batch) -> torch.Tensor:
    inputs, targets = batch
    if cfg.model.loss == "custom":
        return model(inputs, targets)
    out = model(inputs)
    if spec.loss == "ce":
        return F.cross_entropy(out.float().reshape(-1, out.shape[-1]), targets.reshape(-1),
                               ignore_index=-100)
    return F.mse_loss(out.float(), targets.float())


def measure(cfg: TrialConfig, spec, train_batches, probe, sample=None
            ) -> tuple[list[dict], dict, list[dict]]:
    """Train `len(train_batches)` steps from `cfg`'s seed; rows of (step, layer, quantity,
    rms, drms, order), per quantity the parameter names behind it with their roles, and rows
    of every parameter tensor's init and update size (coord/updates.py) per step. `sample`:
    the batch the data-dependent init schemes look at (data_init.init_sample)."""
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg, spec, sample=sample)
    opt = make_optimizer(model, cfg)
    roles = dict(model.mutransfer_roles)
    params = quantity_params(model, roles)
    skip = readout_modules(model, roles)
    w0 = snapshot(model)
    rows, h0, behind, sizes = [], None, {}, []
    for step in range(len(train_batches) + 1):
        model.eval()
        acts = _observe(model, cfg, probe, skip)
        sizes += update_rows(model, w0, roles, step)  # the weights this forward used
        if h0 is None:
            h0 = acts
            behind = {q: {n: roles[n] for n in params(q)} for q in acts}
        for order, (name, h) in enumerate(acts.items()):
            layer, quantity = split_name(name)
            rows.append({"step": step, "layer": layer, "quantity": quantity, "rms": _rms(h),
                         "drms": _rms(h - h0[name]), "order": order})
        if step == len(train_batches):
            break
        model.train()
        loss = _loss(model, cfg, spec, train_batches[step])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        step_or_blow_up(opt)
    return rows, behind, sizes


def run(configs: list[TrialConfig], source, steps: int, batch_size: int, seq_len: int,
        progress: Callable[[int, int, str], None] | None = None
        ) -> tuple[pd.DataFrame, dict[str, dict[str, str]], pd.DataFrame]:
    """Every config (one per width and seed) measured on the same probe batch, each seed on
    its own training batches; the long table, the parameters behind each quantity, and the
    per-parameter sizes (params.parquet: coord/updates.py's rows with the run's columns)."""
    flush_denormals()  # as every trial does (mutransfer/denormals.py)
    probe = next(source.batches("eval", batch_size, seq_len, seed=1234))
    train: dict[int, list] = {}
    rows, behind, sizes = [], {}, []
    for i, cfg in enumerate(configs):
        seed = cfg.train.seed
        if seed not in train:
            it = source.batches("train", batch_size, seq_len, seed=seed)
            train[seed] = [next(it) for _ in range(steps)]
        measured, quantities, per_param = measure(cfg, source.spec, train[seed], probe,
                                                  init_sample(cfg, source, seq_len))
        behind.update(quantities)
        run_cols = {"parameterization": cfg.param.name, "optimizer": cfg.train.optimizer,
                    "width": cfg.width, "seed": seed}
        rows += [{**run_cols, **r} for r in measured]
        sizes += [{**run_cols, **r} for r in per_param]
        if progress:
            progress(i + 1, len(configs), f"width {cfg.width} seed {seed}")
    return pd.DataFrame(rows), behind, pd.DataFrame(sizes)
