"""Per-parameter update sizes against width: measured exponents, and the ones the table implies.

Reads params.parquet (mutransfer/coord/updates.py: per run, step and parameter tensor, the RMS of
its init W_0 and of its change ΔW_t = W_t − W_0); no torch.

What the parameterization's table (mutransfer/param/tables.py) implies, per role, with
m = width / base_width (docs/models.md, "Per-parameter update sizes", has the derivation):

- init: the table sets std = std_ref(base shape) · m^init_m, so RMS(W_0) ∝ m^init_m for every
  role the table governs (embedding, hidden, readout, ssm_B, ssm_C). A vector keeps its
  module's init at every width (norm gains 1, zero biases, A_log, D): no prescription, no test.
- update, Adam family: Adam's step is elementwise, m̂/(√v̂ + ε); at step 1 it is g/|g| = ±1 in
  every entry with a gradient, and after a few steps a sum of O(1) entries whose correlations do
  not depend on width. So every entry of ΔW_t is of size η_role = η · m^lr_adam_m, RMS(ΔW_t) ∝
  m^lr_adam_m, and the relative update ‖ΔW_t‖_F/‖W_0‖_F = RMS(ΔW_t)/RMS(W_0) ∝
  m^(lr_adam_m − init_m), whatever the tensor's shape (the same number of entries on both
  sides). For a vector (no prescribed init; often 0) the update's RMS is tested, ∝ m^lr_adam_m;
  so for a governed tensor initialised to zero at every width (a zero readout): no init test.
  Under muP a hidden matrix: η/m against std ∝ m^-½, relative update ∝ m^-½; an embedding or a
  base-init readout: η against a fixed std, ∝ m^0.
- update, SGD: ΔW = η_role · g depends on the gradient's size, which the table alone does not
  fix: measured and shown, not judged.

Each exponent is fitted and its noise estimated exactly as the activations' slopes
(analysis/coordverdict.py: per-seed slopes, seed spread + power-law fit error); a tensor
violates when its slope lies outside expected ± tolerance, by the same one-sided t test, Holm
at the same alpha over the parameterization's tensors (a family of their own beside the
activations': analysis/checkverdict.py, `judge_all`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.analysis.coordverdict import slopes
from mutransfer.param.tables import RoleRule, optimizer_family

GOVERNED = ("embedding", "hidden", "readout", "ssm_B", "ssm_C")  # init set by the table
KINDS = {"h": "init", "dh": "update"}  # coordverdict's kinds -> what a parameter's slope is


def expected_exponents(roles: dict[str, str], rules: dict[str, RoleRule],
                       optimizer: str) -> pd.DataFrame:
    """Per parameter: its role, the init exponent (NaN: not prescribed), the update exponent
    (NaN: not implied, e.g. SGD) and whether the update is relative (over ‖W_0‖) or absolute."""
    adam = optimizer_family(optimizer) == "adam"
    rows = []
    for name, role in roles.items():
        rule = rules[role]
        governed = role in GOVERNED
        init = rule.init_m if governed else np.nan
        lr = rule.lr_adam_m if adam else np.nan
        rows.append({"param": name, "role": role, "init_exp": init,
                     "update_exp": lr - rule.init_m if governed else lr, "relative": governed})
    return pd.DataFrame(rows)


def update_sizes(sizes: pd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """params.parquet as a coordinate table (coordverdict's columns): `quantity` the parameter,
    `rms` its init's RMS, `drms` its relative update (absolute for vectors)."""
    relative = dict(zip(expected["param"], expected["relative"]))
    rel = sizes["param"].map(relative).fillna(False).to_numpy(bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        drms = np.where(rel, sizes["dw_rms"] / sizes["w_rms"], sizes["dw_rms"])
    return pd.DataFrame({"parameterization": sizes["parameterization"], "layer": -1,
                         "quantity": sizes["param"], "step": sizes["step"],
                         "seed": sizes["seed"], "width": sizes["width"],
                         "rms": sizes["w_rms"], "drms": drms})


def _untrained(sizes: pd.DataFrame) -> set[tuple[str, int]]:
    """(param, step) whose update is zero at every width and seed: no gradient reaches it."""
    g = sizes[sizes["step"] > 0].groupby(["param", "step"])["dw_rms"].max()
    return {k for k, v in g.items() if v == 0}


def zero_init(sizes: pd.DataFrame) -> set[str]:
    """Parameters whose init is zero at every width and seed (e.g. a zero-initialised readout,
    muP's recommended one): RMS(W_0) = 0 scales as any power of width, and the relative update
    has no denominator."""
    g = sizes[sizes["step"] == 0].groupby("param")["w_rms"].max()
    return {k for k, v in g.items() if v == 0}


def _for_zero_init(expected: pd.DataFrame, zero: set[str]) -> pd.DataFrame:
    """`expected` with each zero-init tensor judged as a vector is: no init test, and its
    update's own RMS against width^lr_adam_m (= update_exp + init_exp of a governed role).
    Before, its init and relative update had slopes of +inf, and a correct muP model with a
    zero readout FAILed naming the readout's init."""
    e = expected.copy()
    z = e["param"].isin(zero) & e["relative"].astype(bool)
    e.loc[z, "update_exp"] = e.loc[z, "update_exp"] + e.loc[z, "init_exp"]
    e.loc[z, "init_exp"] = np.nan
    e.loc[z, "relative"] = False
    return e


def update_slopes(sizes: pd.DataFrame, expected: pd.DataFrame, tol: float) -> pd.DataFrame:
    """Per (parameter, step, kind init/update): slope of log2 size against log2 width with its
    s.e. and df (coordverdict's noise model), the role, the expected exponent and the `excess`
    of |slope − expected| over `tol` (inf where a size is 0 or not finite at some width). Init
    is judged at step 0 only (W_0 is the same at every step); rows with no expectation are
    left out. A tensor initialised to zero at every width is judged as a vector is (its
    update's RMS, `zero_init`)."""
    if sizes.empty:
        return pd.DataFrame()
    expected = _for_zero_init(expected, zero_init(sizes))
    sl = slopes(update_sizes(sizes, expected))
    sl = sl[((sl["kind"] == "h") & (sl["step"] == 0)) | (sl["kind"] == "dh")]
    skip = _untrained(sizes)
    sl = sl[[(q, s) not in skip for q, s in zip(sl["quantity"], sl["step"])]]
    exp = expected.set_index("param")
    # `relative`: whether the update's size is over ‖W_0‖ (a governed tensor, not zero-init)
    sl = sl.assign(kind=sl["kind"].map(KINDS), role=sl["quantity"].map(exp["role"]),
                   relative=sl["quantity"].map(exp["relative"]).fillna(False).astype(bool))
    sl["expected"] = np.where(sl["kind"] == "init", sl["quantity"].map(exp["init_exp"]),
                              sl["quantity"].map(exp["update_exp"]))
    sl = sl[np.isfinite(sl["expected"].to_numpy(float))].reset_index(drop=True)
    s = sl["slope"].to_numpy(float)
    with np.errstate(invalid="ignore"):
        ex = np.maximum(np.abs(s - sl["expected"].to_numpy(float)) - tol, 0.0)
    sl["excess"] = np.where(np.isfinite(s), ex, np.inf)
    return sl


def is_relative(r) -> bool:
    """Whether a judged update row's size is relative (‖ΔW‖/‖W_0‖): a governed role's, but
    not a zero-init tensor's (`_for_zero_init`), whose own RMS is judged."""
    relative = r.get("relative")
    if isinstance(relative, (bool, np.bool_)):
        return bool(relative)
    return r["role"] in GOVERNED  # a table without the column (slopes.parquet of before)


def exponent_text(r) -> str:
    """'layers.1.mixer.out_proj.weight (hidden): its relative update grows as width^+0.50
    ± 0.01 after step 1; the table implies width^-0.50'."""
    what = {"init": "its init's RMS", "update": "its relative update ‖ΔW‖/‖W‖"}[r["kind"]]
    if r["kind"] == "update" and not is_relative(r):
        what = "its update's RMS" + (" (its init is zero)" if r["role"] in GOVERNED else "")
    when = "at init" if r["kind"] == "init" else f"after step {int(r['step'])}"
    se = r["se"] if np.isfinite(r["se"]) else 0.0
    return (f"{r['quantity']} ({r['role']}): {what} scales as width^{r['slope']:+.2f} "
            f"(± {se:.2f}) {when}; the table implies width^{r['expected']:+.2f}")
