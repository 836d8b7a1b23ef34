"""Per-parameter update sizes (coord/updates.py, analysis/updates.py): the exponents the tables
imply, measured on the built-in Mamba as `mutransfer check` builds it, and a tensor whose
exponent is off found by name."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from mutransfer.analysis.updates import expected_exponents, update_slopes
from mutransfer.config import TrialConfig
from mutransfer.coord import anymodel
from mutransfer.data.base import DataSpec
from mutransfer.param.config import ParamConfig
from mutransfer.param.tables import rules_for

ROLES = {"emb.weight": "embedding", "fc.weight": "hidden", "B.weight": "ssm_B",
         "head.weight": "readout", "norm.weight": "vector"}


def exponents(param: str, optimizer: str = "adamw") -> pd.DataFrame:
    return expected_exponents(ROLES, rules_for(ParamConfig(name=param)), optimizer
                              ).set_index("param")


def test_expected_exponents_follow_from_the_tables_init_and_lr_entries():
    mup = exponents("mup")
    # hidden: Adam η/m over std m^-1/2 -> relative update m^-1/2; embedding and a base-init
    # readout: η over a fixed std -> m^0; a vector: its update's RMS, η -> m^0
    assert mup.loc["fc.weight", ["init_exp", "update_exp"]].tolist() == [-0.5, -0.5]
    assert mup.loc["emb.weight", ["init_exp", "update_exp"]].tolist() == [0.0, 0.0]
    assert mup.loc["head.weight", ["init_exp", "update_exp"]].tolist() == [0.0, 0.0]
    assert math.isnan(mup.loc["norm.weight", "init_exp"])
    assert not mup.loc["norm.weight", "relative"] and mup.loc["norm.weight", "update_exp"] == 0
    assert exponents("mup_ssm").loc["B.weight", "update_exp"] == -0.5  # η/m over m^-1/2
    assert exponents("sp").loc["fc.weight", "update_exp"] == 0.5  # η over m^-1/2
    assert exponents("mup", "sgd")["update_exp"].isna().all()  # needs the gradient's size


def sizes(slope_of: dict[str, float], widths=(64, 128, 256), seeds=range(4)) -> pd.DataFrame:
    """params.parquet rows whose init RMS follows the mup table and whose update RMS grows as
    width^slope_of[param] (with a little seed noise)."""
    rng = np.random.default_rng(0)
    exp = exponents("mup")
    rows = []
    for w in widths:
        for seed in seeds:
            for p, role in ROLES.items():
                init = exp.loc[p, "init_exp"]
                w_rms = w ** (0.0 if np.isnan(init) else init)
                for step in range(3):
                    dw = step * 1e-3 * w ** slope_of[p] * (1 + 0.01 * rng.standard_normal())
                    rows.append({"parameterization": "mup", "width": w, "seed": seed,
                                 "step": step, "param": p, "role": role, "order": 0,
                                 "w_rms": w_rms, "dw_rms": dw})
    return pd.DataFrame(rows)


def test_a_tensor_whose_update_scales_off_its_rule_is_outside_and_the_rest_inside():
    right = {"emb.weight": 0.0, "fc.weight": -1.0, "B.weight": 0.0, "head.weight": 0.0,
             "norm.weight": 0.0}  # update RMS ∝ the Adam LR, mup table
    exp = expected_exponents(ROLES, rules_for(ParamConfig(name="mup")), "adamw")
    sl = update_slopes(sizes(right), exp, tol=0.2)
    assert (sl["excess"] == 0).all() and set(sl["kind"]) == {"init", "update"}
    assert not ((sl["quantity"] == "norm.weight") & (sl["kind"] == "init")).any()
    sl = update_slopes(sizes({**right, "fc.weight": 0.0}), exp, tol=0.2)  # LR not 1/m
    bad = sl[sl["excess"] > 0]
    assert set(bad["quantity"]) == {"fc.weight"} and set(bad["kind"]) == {"update"}
    assert bad["slope"].to_numpy() == pytest.approx(0.5, abs=0.02)


def test_on_the_builtin_mamba_every_tensor_scales_as_its_mup_ssm_rule():
    torch.set_num_threads(1)
    spec = DataSpec("tokens", 32, None, 32, "ce")
    g = torch.Generator().manual_seed(0)
    batch = [(torch.randint(0, 32, (2, 16), generator=g),) * 2 for _ in range(2)]
    rows = []
    for width in (32, 64, 128):
        cfg = TrialConfig(width=width, model={"base_width": 32, "n_layer": 1, "d_state": 4},
                          param={"name": "mup_ssm"},
                          train={"optimizer": "adamw", "lr": 3e-3, "grad_clip": None})
        per = anymodel.measure(cfg, spec, batch, batch[0])[2]
        rows += [{"parameterization": "mup_ssm", "width": width, "seed": 0, **r} for r in per]
    sz = pd.DataFrame(rows)
    exp = expected_exponents(dict(zip(sz["param"], sz["role"])),
                             rules_for(ParamConfig(name="mup_ssm")), "adamw")
    sl = update_slopes(sz, exp, tol=0.2)
    assert len(sl) and (sl["excess"] == 0).all(), sl[sl["excess"] > 0]
    first = sl[(sl["kind"] == "update") & (sl["step"] == 1) & (sl["role"] != "vector")
               & ~sl["quantity"].str.contains("dt_proj")]
    # Adam's first step is ±η in every entry with |g| >> ε: the matrices' exponents are the
    # table's (dt_proj's and A_log's tiny gradients lose a little to ε; docs/models.md)
    assert (first["slope"] - first["expected"]).abs().max() < 0.1
