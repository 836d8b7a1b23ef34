"""The coordinate check: slopes, the verdict rules, and the command end to end."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mutransfer.cli import main
from mutransfer.coord.verdict import slopes, strict_failures, verdicts

WIDTHS = [64, 128, 256, 512]


def table(plan: dict[str, dict[str, tuple[float, float]]], steps: int = 2) -> pd.DataFrame:
    """Coord rows where RMS of h and Δh grow as width^slope: plan[param][quantity] = slopes."""
    rows = []
    for param, quantities in plan.items():
        for q, (h_slope, dh_slope) in quantities.items():
            for w in WIDTHS:
                for step in range(steps + 1):
                    for seed in (0, 1):
                        rows.append({"parameterization": param, "optimizer": "adam", "width": w,
                                     "seed": seed, "step": step, "layer": 0, "quantity": q,
                                     "rms": (w / 64) ** h_slope,
                                     "drms": 0.0 if step == 0 else 0.1 * (w / 64) ** dh_slope})
    return pd.DataFrame(rows)


def test_slopes_recover_planted_exponents():
    sl = slopes(table({"x": {"conv": (0.0, 1.0), "ssm_state": (-0.5, 0.25)}}))
    got = {(r.quantity, r.kind): r.slope for r in sl[sl.step == 2].itertuples()}
    assert got[("conv", "h")] == pytest.approx(0.0, abs=1e-9)
    assert got[("conv", "dh")] == pytest.approx(1.0)
    assert got[("ssm_state", "h")] == pytest.approx(-0.5)
    assert got[("ssm_state", "dh")] == pytest.approx(0.25)
    assert not ((sl.step == 0) & (sl.kind == "dh")).any()  # Δh is not judged at init


def test_flat_passes_and_growth_fails_naming_the_worst_quantity():
    v = verdicts(slopes(table({
        "mup_ssm": {"conv": (0.05, -0.1), "ssm_state": (0.1, 0.15)},
        "sp": {"conv": (0.0, 0.9), "ssm_state": (0.5, 1.2)},
    }))).set_index("parameterization")
    assert v.loc["mup_ssm", "verdict"] == "PASS"
    assert v.loc["sp", "verdict"] == "FAIL"
    assert v.loc["sp", "worst"].startswith("ΔL0.ssm_state")
    assert v.loc["sp", "max_abs_slope"] == pytest.approx(1.2)


def test_vanishing_updates_fail_too():
    v = verdicts(slopes(table({"mup": {"ssm_state": (0.0, -0.6)}})))
    assert v.verdict.item() == "FAIL"


def test_logits_may_shrink_at_init_but_their_updates_must_stay_flat():
    ok = verdicts(slopes(table({"mup": {"logits": (-0.5, 0.0)}})))
    assert ok.verdict.item() == "PASS"
    growing = verdicts(slopes(table({"mup": {"logits": (0.5, 0.0)}})))
    vanishing_update = verdicts(slopes(table({"mup": {"logits": (-0.5, -0.5)}})))
    assert growing.verdict.item() == vanishing_update.verdict.item() == "FAIL"


def test_strict_flags_failing_feature_learning_and_passing_sp():
    v = pd.DataFrame({"parameterization": ["sp", "mup_ssm", "mup"],
                      "verdict": ["PASS", "FAIL", "PASS"]})
    assert strict_failures(v) == ["sp PASSes", "mup_ssm FAILs"]


def test_seed_noise_is_averaged_before_the_fit():
    df = table({"mup": {"conv": (0.0, 0.0)}})
    noise = np.where(df.seed == 0, 1.5, 1 / 1.5) ** np.log2(df.width / 32)
    df["rms"] = df["rms"] * noise  # seed 0 grows, seed 1 shrinks, the mean stays ~flat
    sl = slopes(df)
    assert sl[sl.kind == "h"].slope.abs().max() < 0.2


@pytest.mark.parametrize("argv,needle", [
    (["--widths", "4", "64"], "below the minimum width 8"),
    (["--param", "sp", "mu_p"], "unknown parameterization 'mu_p'"),
    (["--lr", "-0.1"], "--lr: must be positive"),
    (["--widths", "64"], "at least two"),
    (["--set", "mup_ssm.ssm_B.lr_adam=1"], "lr_adam"),
])
def test_bad_input_gives_one_line_and_exit_2(tmp_path, capsys, argv, needle):
    code = main(["coord-check", "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert needle in err and "\n" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_coord_check_command_writes_tables_figure_and_verdicts(tmp_path, capsys):
    out = tmp_path / "cc"
    code = main(["coord-check", "--widths", "16", "32", "--param", "sp", "mup_ssm",
                 "--steps", "1", "--seeds", "0", "--base-width", "16", "--n-layer", "1",
                 "--batch-size", "2", "--seq-len", "16", "--out", str(out)])
    assert code == 0
    coord = pd.read_parquet(out / "coord.parquet")
    assert set(coord.parameterization) == {"sp", "mup_ssm"}
    assert set(coord.width) == {16, 32} and set(coord.step) == {0, 1}
    assert {"ssm_state", "ssm_state_out", "delta", "B", "C", "logits"} <= set(coord.quantity)
    assert (coord[coord.step == 0].drms == 0).all() and (coord[coord.step == 1].drms > 0).all()
    assert (out / "coord_check_adam.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "verdict" in printed and ("PASS" in printed or "FAIL" in printed)
