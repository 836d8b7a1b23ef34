"""Every tensor of the built-in models, built as the trainer builds it, against its paper's rule.

`spectral` (Yang, Simon & Bernstein 2023) is a rule by shape: as the width grows, a matrix
gets σ ∝ 1/√fan_in · min(1, √(fan_out/fan_in)), Adam η ∝ 1/fan_in and SGD η ∝ fan_out/fan_in;
a vector (bias, gain, per-channel array, conv tap; the embedding, whose input is one-hot) is
a matrix of fan-in 1 per channel: Adam η, SGD η ∝ its channels; the readout (fan-out the
vocabulary) is read through its 1/m multiplier. The project gives one rule per *role*, so a
tensor whose shape is not its role's departs from the paper. Such a departure is allowed only
when docs/parameterizations.md lists it (its table "Where a built-in tensor departs from
spectral's shape rule", with the paper's exponent and ours): a departure the table does not
list, or a row that no longer departs, fails here. The exponents are measured, not read from
the tables: the init std and the optimizer's per-tensor LR (`make_optimizer`) at widths 64 and
256, for mamba (tied and untied), mamba2 (`widen: heads` and `headdim`) and s4d.

`mup_ssm` (Vankadara et al. 2024) on W_B and W_C of Mamba-1 and Mamba-2 (both layouts): the
paper's init and SGD exponents in width and d_state, and the project's Adam rule (m⁻¹, n⁰).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from mutransfer.config import TrialConfig
from mutransfer.models.build import build_model
from mutransfer.optim import make_optimizer
from tests.conftest import BYTES

BASE, WIDE = 64, 256
DOC = Path(__file__).resolve().parents[1] / "docs" / "parameterizations.md"
HEADING = "**Where a built-in tensor departs from spectral's shape rule.**"
MODELS = {
    "mamba": {"arch": "mamba"},
    "mamba untied": {"arch": "mamba", "tie_embeddings": False},
    "mamba2 heads": {"arch": "mamba2", "mamba2": {"headdim": 16, "widen": "heads"}},
    "mamba2 headdim": {"arch": "mamba2", "mamba2": {"headdim": 16, "widen": "headdim"}},
    "s4d": {"arch": "s4d"},
    "s4d ssm": {"arch": "s4d", "s4d": {"ssm_roles": "ssm"}},
}
INIT_TOL, LR_TOL = 0.1, 0.02  # the std of a random tensor is noisy; an LR is exact
MIN_DRAWS = 512  # a vector's init is compared only when its std rests on this many values


def config(model: dict, width: int, param: str, optimizer: str, d_state: int = 16) -> TrialConfig:
    return TrialConfig(width=width, param={"name": param},
                       model={"base_width": BASE, "n_layer": 1, "d_state": d_state,
                              "base_d_state": 16, **model},
                       train={"optimizer": optimizer, "lr": 1e-3})


def measure(model_cfg: dict, width: int, param: str, d_state: int = 16) -> dict:
    """Name -> (module, tensor, std, Adam LR, SGD LR), and "readout_mult"."""
    adam, sgd = (config(model_cfg, width, param, o, d_state) for o in ("adam", "sgd"))
    torch.manual_seed(0)
    model = build_model(adam, BYTES)
    lrs = {}
    for cfg in (adam, sgd):
        for g in make_optimizer(model, cfg).param_groups:
            for p in g["params"]:
                lrs.setdefault(id(p), []).append(g["lr"])
    out: dict = {"readout_mult": getattr(model, "readout_mult", 1.0),
                 "readout": "embedding.weight" if getattr(model, "lm_head", None) is None
                 else "lm_head.weight"}
    for mod_name, module in model.named_modules():
        for local, p in module.named_parameters(recurse=False):
            name = f"{mod_name}.{local}" if mod_name else local
            out[name] = (module, local, p.detach().float(), *lrs[id(p)])
    return out


def exponent(small: float, large: float, ratio: float = WIDE / BASE) -> float:
    """The power of `ratio` (the width's, by default) that takes `small` to `large`."""
    return math.log(large / small) / math.log(ratio)


def spectral_rule(module: nn.Module, local: str, small: torch.Tensor,
                  large: torch.Tensor) -> dict[str, float]:
    """The paper's exponents of m for this tensor, from its shapes at the two widths."""
    if isinstance(module, nn.Linear) and local == "weight":
        a = exponent(small.shape[0], large.shape[0])  # fan-out
        b = exponent(small.shape[1], large.shape[1])  # fan-in
        # σ: 1/√fan_in, times √(fan_out/fan_in) where the fan-in outgrows the fan-out
        return {"init": -b / 2 - max(0.0, b - a) / 2, "adam": -b, "sgd": a - b}
    channels = 0.0 if small.dim() == 0 else exponent(small.shape[0], large.shape[0])
    if isinstance(module, nn.Embedding):
        channels = exponent(small.shape[1], large.shape[1])
    return {"init": 0.0, "adam": 0.0, "sgd": channels}


def readout_rule() -> dict[str, float]:
    """Fan-out the vocabulary (fixed), fan-in the width: σ ∝ 1/m, Adam η/m, SGD η/m."""
    return {"init": -1.0, "adam": -1.0, "sgd": -1.0}


def measured(small: tuple, large: tuple, mult: float = 0.0,
             ratio: float = WIDE / BASE) -> dict[str, float]:
    """Exponents of the tensor's std and LRs; `mult`: its forward multiplier's exponent, for
    the effective weight (init and Adam step × m^mult, an SGD step × m^(2·mult)); nan for the
    init of a constant tensor or one of fewer than MIN_DRAWS values (too noisy to read)."""
    _, _, ws, adam_s, sgd_s = small
    _, _, wl, adam_l, sgd_l = large
    readable = ws.numel() >= MIN_DRAWS and ws.std() > 0
    init = exponent(ws.std().item(), wl.std().item(), ratio) if readable else float("nan")
    return {"init": init + mult, "adam": exponent(adam_s, adam_l, ratio) + mult,
            "sgd": exponent(sgd_s, sgd_l, ratio) + 2 * mult}


def departures(key: str) -> dict[tuple[str, str, str], tuple[float, float]]:
    """(model, tensor, quantity) -> (paper's exponent, measured) where they differ."""
    small = measure(MODELS[key], BASE, "spectral")
    large = measure(MODELS[key], WIDE, "spectral")
    found = {}
    for name, entry in small.items():
        if name in ("readout_mult", "readout"):
            continue
        module, local, ws = entry[0], entry[1], entry[2]
        checks = []
        if name != "lm_head.weight":  # an untied readout is read through its multiplier alone
            checks.append((spectral_rule(module, local, ws, large[name][2]),
                           measured(entry, large[name])))
        if name == small["readout"]:
            mult = exponent(small["readout_mult"], large["readout_mult"])
            checks.append((readout_rule(), measured(entry, large[name], mult)))
        for rule, got in checks:
            for quantity, want in rule.items():
                if math.isnan(got[quantity]):
                    continue
                tol = INIT_TOL if quantity == "init" else LR_TOL
                if abs(got[quantity] - want) > tol:
                    tensor = name.split("mixer.", 1)[-1]
                    found[(key, tensor, quantity)] = (want, got[quantity])
    return found


def number(text: str) -> float:
    """An exponent as the docs write it: −1, −½, 0.88."""
    return float(text.strip().replace("−", "-").replace("½", "0.5"))


def documented() -> dict[tuple[str, str, str], tuple[float, float]]:
    """The departures table of docs/parameterizations.md, one entry per quantity."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADING))
    rows = {}
    table_started = False
    for line in lines[start + 1:]:
        if not line.startswith("|"):
            if table_started:
                break
            continue
        table_started = True
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("model", "") or set(cells[0]) <= {"-"}:
            continue
        model, tensor, quantities, paper, here = cells[:5]
        for q, p, h in zip(quantities.split(","), paper.split(","), here.split(","),
                           strict=True):
            rows[(model, tensor, q.strip())] = (number(p), number(h))
    return rows


def test_the_departures_table_parses():
    rows = documented()
    assert ("mamba2 headdim", "in_proj_dt.weight", "init") in rows
    assert all(re.fullmatch(r"init|adam|sgd", q) for _, _, q in rows)


@pytest.mark.parametrize("key", list(MODELS))
def test_spectral_follows_the_paper_by_shape_except_where_the_docs_say(key):
    """A tensor departs from spectral's shape rule only where the docs list it, with the
    paper's exponent and ours as measured; a listed row must still depart."""
    found = departures(key)
    listed = {k: v for k, v in documented().items() if k[0] == key}
    assert set(found) == set(listed), (
        f"undocumented departures: {sorted(set(found) - set(listed))}; "
        f"listed but not departing: {sorted(set(listed) - set(found))}")
    for k, (paper, got) in found.items():
        want_paper, want_here = listed[k]
        assert paper == pytest.approx(want_paper, abs=0.01), k
        tol = INIT_TOL if k[2] == "init" else LR_TOL
        assert got == pytest.approx(want_here, abs=tol), k


MUP_SSM = {  # (init, Adam, SGD) exponents of m and of n = d_state / base_d_state
    "B": {"m": (-0.5, -1.0, -0.5), "n": (0.5, 0.0, 0.5)},
    "C": {"m": (-0.5, -1.0, -0.5), "n": (-0.5, 0.0, -1.0)},
}


@pytest.mark.parametrize("key", ["mamba", "mamba2 heads", "mamba2 headdim"])
def test_mup_ssm_scales_W_B_and_W_C_as_the_paper_in_width_and_d_state(key):
    """σ_B ∝ √(N/N_u), σ_C ∝ 1/√(N·N_u); SGD η_B ∝ √(N/N_u), η_C ∝ 1/(N·√N_u) (Vankadara
    et al.); Adam η ∝ 1/N_u (the project's measured exponent, no d_state factor): N_u the
    width W_B and W_C read (d_inner for Mamba-1, d for Mamba-2), N = d_state."""
    base = measure(MODELS[key], BASE, "mup_ssm")
    wide = measure(MODELS[key], WIDE, "mup_ssm")
    deep = measure(MODELS[key], BASE, "mup_ssm", d_state=64)
    for name in base:
        match = re.search(r"(?:x_proj|in_proj)_([BC])\.weight$", name)
        if not match:
            continue
        for axis, other in (("m", wide), ("n", deep)):
            got = measured(base[name], other[name], ratio=4.0)  # 256/64 and 64/16
            want = dict(zip(("init", "adam", "sgd"), MUP_SSM[match[1]][axis], strict=True))
            for q, w in want.items():
                tol = INIT_TOL if q == "init" else LR_TOL
                assert got[q] == pytest.approx(w, abs=tol), (name, axis, q)
