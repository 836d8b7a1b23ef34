"""A size that is zero at every width and seed (a zero-initialised readout, and what no gradient
has reached yet) has nothing to scale: the coordinate check leaves it out instead of calling it
a slope of +inf (a correct muP model with a zero readout FAILed `mutransfer check`)."""

import numpy as np
import pandas as pd

from mutransfer.analysis.checkverdict import judge_all
from mutransfer.analysis.coordverdict import slopes, verdicts
from mutransfer.analysis.updates import expected_exponents, update_slopes
from mutransfer.param.config import ParamConfig
from mutransfer.param.tables import rules_for

WIDTHS = [32, 64, 128, 256]
SEEDS = [0, 1, 2, 3]
TOL, ALPHA = 0.2, 0.05


def _coord(logits_zero_at: list[int]) -> pd.DataFrame:
    """A flat model's activations; the logits' RMS is 0 at step 0 at `logits_zero_at`."""
    rng = np.random.default_rng(0)
    rows = []
    for w in WIDTHS:
        for seed in SEEDS:
            for step in range(3):
                for q in ("in_proj", "logits"):
                    rms = 1.0 + 0.01 * rng.standard_normal()
                    if q == "logits" and step == 0 and w in logits_zero_at:
                        rms = 0.0
                    drms = 0.0 if step == 0 else 0.1 * (1 + 0.01 * rng.standard_normal())
                    rows.append({"parameterization": "mup", "optimizer": "adam", "width": w,
                                 "seed": seed, "step": step, "layer": -1, "quantity": q,
                                 "rms": rms, "drms": drms})
    return pd.DataFrame(rows)


def test_an_activation_zero_at_every_width_and_seed_is_not_checked_and_the_model_passes():
    sl = slopes(_coord(logits_zero_at=WIDTHS))
    assert not ((sl["quantity"] == "logits") & (sl["step"] == 0) & (sl["kind"] == "h")).any()
    v = verdicts(sl, TOL, ALPHA, undecided_beyond=TOL).iloc[0]
    assert v["verdict"] == "PASS"
    assert v["checked"] == 9  # 2 quantities x (h at 3 steps + Δh at 2), less logits@t0


def test_an_activation_zero_at_some_widths_only_is_still_a_violation():
    sl = slopes(_coord(logits_zero_at=[256]))
    row = sl[(sl["quantity"] == "logits") & (sl["step"] == 0) & (sl["kind"] == "h")]
    assert len(row) == 1 and np.isinf(row["slope"].iloc[0])
    assert verdicts(sl, TOL, ALPHA, undecided_beyond=TOL).iloc[0]["verdict"] == "FAIL"


def _sizes() -> pd.DataFrame:
    """muP under Adam at LR 1e-3: a hidden matrix (std ∝ m^-½, entries of ΔW ∝ η/m) and a
    zero-initialised readout (W_0 = 0, entries of ΔW ∝ η)."""
    rng = np.random.default_rng(1)
    rows = []
    for w in WIDTHS:
        m = w / WIDTHS[0]
        for seed in SEEDS:
            for step in range(3):
                noise = 1 + 0.02 * rng.standard_normal()
                rows.append({"param": "hidden.weight", "role": "hidden",
                             "w_rms": 0.1 * m**-0.5 * (1 + 0.01 * rng.standard_normal()),
                             "dw_rms": 0.0 if step == 0 else step * 1e-3 / m * noise})
                rows.append({"param": "head.weight", "role": "readout", "w_rms": 0.0,
                             "dw_rms": 0.0 if step == 0 else step * 1e-3 * noise})
                rows[-2:] = [dict(r, parameterization="mup", optimizer="adam", width=w,
                                  seed=seed, step=step) for r in rows[-2:]]
    return pd.DataFrame(rows)


def test_a_zero_initialised_readout_is_judged_on_its_update_rms_not_its_init():
    sizes = _sizes()
    roles = dict(zip(sizes["param"], sizes["role"]))
    expected = expected_exponents(roles, rules_for(ParamConfig(name="mup")), "adam")
    params = update_slopes(sizes, expected, TOL)
    head = params[params["quantity"] == "head.weight"]
    assert set(head["kind"]) == {"update"}  # W_0 = 0 scales as any power: no init test
    assert np.isfinite(head["slope"]).all() and (head["expected"] == 0.0).all()
    assert (head["slope"].abs() < 0.1).all()
    hidden = params[params["quantity"] == "hidden.weight"]
    assert set(hidden["kind"]) == {"init", "update"}
    act = slopes(_coord(logits_zero_at=[]))
    judged = judge_all(act, params, TOL, ALPHA)
    assert (judged["status"] != "robust").all()


def test_a_readout_zero_at_some_widths_only_still_fails_its_init():
    sizes = _sizes()
    head0 = (sizes["param"] == "head.weight") & (sizes["width"] < 256)
    sizes.loc[head0, "w_rms"] = 0.02
    roles = dict(zip(sizes["param"], sizes["role"]))
    expected = expected_exponents(roles, rules_for(ParamConfig(name="mup")), "adam")
    params = update_slopes(sizes, expected, TOL)
    init = params[(params["quantity"] == "head.weight") & (params["kind"] == "init")]
    assert len(init) == 1 and np.isinf(init["slope"].iloc[0])
    judged = judge_all(slopes(_coord(logits_zero_at=[])), params, TOL, ALPHA)
    assert (judged.loc[judged["quantity"] == "head.weight", "status"] == "robust").any()
