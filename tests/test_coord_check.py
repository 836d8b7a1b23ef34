"""The coordinate check: slopes, the verdict rules, and the command end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis.coordverdict import (
    DOCS,
    judge,
    slopes,
    strict_failures,
    verdict_text,
    verdicts,
)
from mutransfer.analysis.slopes import ols
from mutransfer.cli import main
from mutransfer.errors import UserError

WIDTHS = [64, 128, 256, 512]


def table(plan: dict[str, dict[str, tuple[float, float]]], steps: int = 2,
          seeds: tuple[int, ...] = (0, 1), seed_spread: float = 0.0) -> pd.DataFrame:
    """Coord rows where RMS of h and Δh grow as width^slope: plan[param][quantity] = slopes.

    With `seed_spread`, seed k's slopes are shifted by ±seed_spread (alternating signs), so
    the seeds' slopes have mean as planned and standard deviation about seed_spread.
    """
    rows = []
    for param, quantities in plan.items():
        for q, (h_slope, dh_slope) in quantities.items():
            for seed in seeds:
                shift = seed_spread * (1 if seed % 2 == 0 else -1)
                for w in WIDTHS:
                    for step in range(steps + 1):
                        rows.append({"parameterization": param, "optimizer": "adam", "width": w,
                                     "seed": seed, "step": step, "layer": 0, "quantity": q,
                                     "rms": (w / 64) ** (h_slope + shift),
                                     "drms": 0.0 if step == 0 else
                                     0.1 * (w / 64) ** (dh_slope + shift)})
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
    assert v.loc["sp", "largest"] == "ΔL0.ssm_state@t1"
    assert v.loc["sp", "slope"] == pytest.approx(1.2)


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


def test_each_slope_has_the_standard_error_of_its_seeds_slopes():
    seeds = tuple(range(6))
    sl = slopes(table({"mup": {"conv": (0.1, 0.3)}}, seeds=seeds, seed_spread=0.2))
    h = sl[(sl.kind == "h") & (sl.step == 1)].iloc[0]
    assert h.slope == pytest.approx(0.1) and h.n_seeds == 6
    # per-seed slopes ±0.2 alternating: sample sd 0.2·√(6/5), s.e. that / √6
    assert h.se == pytest.approx(0.2 * np.sqrt(6 / 5) / np.sqrt(6))


def test_a_slope_beyond_the_tolerance_counts_only_when_significantly_outside():
    seeds = tuple(range(4))
    plan = {"mup": {"ssm_state": (0.0, 0.3)}}  # 0.1 beyond the tolerance
    noisy = verdicts(slopes(table(plan, seeds=seeds, seed_spread=0.2)), alpha=0.05)
    quiet = verdicts(slopes(table(plan, seeds=seeds, seed_spread=0.02)), alpha=0.05)
    assert noisy.verdict.item() == "PASS"  # s.e. 0.115: 0.1 is 0.87 s.e., not significant
    assert noisy.borderline.item() == 2 and noisy.robust.item() == 0  # steps 1 and 2
    assert quiet.verdict.item() == "FAIL" and quiet.robust.item() == 2
    assert quiet.slope.item() == pytest.approx(0.3) and quiet.se.item() < 0.02


def test_the_verdict_names_the_largest_robust_slope_its_standard_error_and_the_seeds():
    sl = slopes(table({"sp": {"conv": (0.0, 0.5), "ssm_state": (0.0, 1.1)}},
                      seeds=(3, 4, 5, 6), seed_spread=0.05))
    v = verdicts(sl, seeds=[3, 4, 5, 6]).iloc[0]
    assert v.verdict == "FAIL" and v.largest.startswith("ΔL0.ssm_state@t")
    assert v.slope == pytest.approx(1.1) and 0 < v.se < 0.05
    assert v.seeds == "3-6" and v.robust == 4 and v.checked == 2 * (3 + 2)


def test_a_curve_that_bends_carries_the_error_of_its_power_law_fit():
    # every seed the same (no seed noise), but log2 RMS bends over the widths
    df = table({"mup": {"conv": (0.0, 0.0)}}, seeds=(0, 1, 2))
    bend = {64: 0.0, 128: 0.0, 256: 0.25, 512: 0.75}
    df["drms"] = df["drms"] * 2.0 ** df["width"].map(bend)
    sl = slopes(df)
    dh = sl[(sl.kind == "dh") & (sl.step == 1)].iloc[0]
    x = np.log2(WIDTHS)
    expected = ols(x, np.log2(0.1) + np.array([bend[w] for w in WIDTHS]))
    assert dh.slope == pytest.approx(expected.slope) and dh.slope > 0.2
    assert dh.se_seeds == pytest.approx(0.0, abs=1e-9)
    assert dh.se == pytest.approx(expected.stderr) and dh.se > 0.05
    assert dh.df == pytest.approx(len(WIDTHS) - 2)  # the fit's degrees of freedom alone
    v = verdicts(sl, alpha=0.05)
    assert v.verdict.item() == "PASS" and v.borderline.item() == 2


def test_with_one_seed_and_two_widths_a_slope_beyond_the_tolerance_is_undecided():
    """No standard error: nothing measures the noise (it was taken as exact: FAIL)."""
    df = table({"mup": {"conv": (0.0, 0.25)}}, seeds=(0,))
    v = verdicts(slopes(df[df.width.isin([64, 512])]))
    assert v.verdict.item() == "INCONCLUSIVE" and np.isnan(v.se.item())
    assert v.robust.item() == 0 and v.undecided.item() > 0


def test_two_widths_are_judged_by_their_seeds_spread_alone():
    """Through two points the power law fits exactly: it has no error to add, not an infinite
    one. Before, the rounding residual of that fit, divided by 0 degrees of freedom, made the
    standard error infinite and every slope outside the band a robust violation."""
    rng = np.random.default_rng(1)  # a draw whose two-point fit rounds off zero in one row
    df = table({"mup": {"ssm_state": (0.0, 0.3)}}, seeds=tuple(range(4)), seed_spread=0.2)
    df = df[df.width.isin([128, 256])].copy()
    for col in ("drms", "rms"):  # sizes as measured, not exact powers of two
        df[col] *= np.exp(rng.normal(0.0, 1e-3, len(df)))
    sl = slopes(df)
    assert sl["se_fit"].isna().all() and np.isfinite(sl["se"]).all()
    assert sl["se"].to_numpy() == pytest.approx(sl["se_seeds"].to_numpy())
    v = verdicts(sl, alpha=0.05)  # 0.1 beyond the tolerance is < 1 s.e. of the seeds: not robust
    assert v.verdict.item() == "PASS" and v.robust.item() == 0


def test_a_slope_far_outside_the_band_that_the_test_cannot_call_is_inconclusive_not_a_pass():
    """Two widths x two seeds: 1 degree of freedom, where Holm over a family needs t in the
    hundreds, so nothing is robust. A slope twice the tolerance out leaves the width check
    undecided; one just outside the band, or a depth check (undecided_beyond None), does not."""
    df = table({"sp": {"conv": (0.0, 0.9), "ssm_state": (0.0, 0.1)}}, seeds=(0, 1),
               seed_spread=0.3)
    two = slopes(df[df.width.isin([64, 128])])
    v = verdicts(two, tol=0.2, undecided_beyond=0.2)
    assert v.verdict.item() == "INCONCLUSIVE" and v.robust.item() == 0
    assert v.undecided.item() == 2 and v.largest.item().startswith("ΔL0.conv")  # t1 and t2
    assert verdicts(two, tol=0.2).verdict.item() == "PASS"  # no power rule: the old answer
    near = table({"mup": {"conv": (0.0, 0.35)}}, seeds=(0, 1), seed_spread=0.3)
    assert verdicts(slopes(near[near.width.isin([64, 128])]), tol=0.2,
                    undecided_beyond=0.2).verdict.item() == "PASS"
    assert strict_failures(v) == ["sp is INCONCLUSIVE"]
    text = verdict_text(judge(two, 0.2), v, 2, 0.2)
    assert "INCONCLUSIVE: no violation, but a slope lies outside ±0.2 by more than 0.2" in text


def test_sp_checked_at_two_small_widths_and_two_seeds_is_not_a_pass(tmp_path, capsys):
    """The user's path, a quick first try: `coord-check` of sp at widths 16 and 32, seeds 0
    and 1 (before: PASS, 0 robust and 22 borderline slopes of 98, some 1.4 outside)."""
    argv = ["coord-check", "--widths", "16", "32", "--n-layer", "1", "--param", "sp",
            "--steps", "2", "--seeds", "0", "1", "--batch-size", "2", "--seq-len", "16",
            "--model", "d_state=4", "--out", str(tmp_path / "cc")]
    assert main(argv + ["--strict"]) == 1
    out = capsys.readouterr()
    assert "sp is INCONCLUSIVE" in out.err
    row = pd.read_parquet(tmp_path / "cc" / "verdicts.parquet").iloc[0]
    assert row["verdict"] == "INCONCLUSIVE" and row["undecided"] > 0


def test_a_correct_mamba_checked_at_two_widths_does_not_fail(tmp_path):
    """The user's path: `mutransfer check --coord-only` on the built-in mup_ssm Mamba at two
    widths (before: FAIL, '... grows as width^+0.28 (± 0.00)', for a correct model)."""
    import yaml

    spec = yaml.safe_load((Path(__file__).parents[1] / "examples" / "mamba_check.yaml")
                          .read_text())
    spec["check"]["widths"] = [128, 256]
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    assert main(["check", str(path), "--out", str(out), "--coord-only"]) == 3  # INCONCLUSIVE
    judged = pd.read_parquet(out / "slopes.parquet")
    assert not (judged["status"] == "robust").any()


def test_a_zero_or_nonfinite_size_is_a_robust_violation():
    df = table({"mup": {"conv": (0.0, 0.0)}}, seeds=(0, 1, 2))
    df.loc[(df.width == 512) & (df.seed == 1) & (df.step == 2), "drms"] = np.nan
    v = verdicts(slopes(df))
    assert v.verdict.item() == "FAIL" and v.largest.item() == "ΔL0.conv@t2"


def test_the_printed_verdict_says_what_it_measures_and_where_to_read_more():
    sl = slopes(table({"sp": {"conv": (0.0, 0.9)}}))
    text = verdict_text(judge(sl, 0.3, 0.01), verdicts(sl, tol=0.3, alpha=0.01), 2, 0.3, 0.01)
    assert "slope of log2 RMS against log2 width" in text
    assert "outside ±0.3 by a t test" in text and "significant at family-wise 0.01" in text
    page, section = DOCS.split(", ")
    assert f"Read more: {DOCS}." in text
    assert f"## {section.strip(chr(34))}\n" in (Path(__file__).parents[1] / page).read_text()


@pytest.mark.parametrize("argv,needle", [
    (["--widths", "4", "64"], "below the minimum width 8"),
    (["--param", "sp", "mu_p"], "unknown parameterization 'mu_p'"),
    (["--lr", "-0.1"], "--lr: must be positive"),
    (["--widths", "64"], "at least two"),
    (["--set", "mup_ssm.ssm_B.lr_adam=1"], "lr_adam"),
    (["--model", "embedding_sd=1"], "embedding_sd"),
    (["--model", "embedding_std=-1"], "embedding_std"),
    (["--model", "tie_embeddings"], "--model 'tie_embeddings': expected FIELD=VALUE"),
    (["--alpha", "0"], "--alpha: must be between 0 and 1"),
    (["--alpha", "1.5"], "--alpha: must be between 0 and 1"),
    # no slope is exactly 0: a tolerance of 0 flags every significant slope (check's is > 0)
    (["--tolerance", "0"], "--tolerance: must be positive, got 0.0"),
    (["--tolerance", "nan"], "--tolerance: must be positive, got nan"),
    # 0 is no width (it used to run as the smallest width); 4 is below the minimum
    (["--widths", "16", "32", "--base-width", "0"], "--base-width: 0 is below the minimum"),
    (["--widths", "16", "32", "--base-width", "4"], "--base-width: 4 is below the minimum"),
])
def test_bad_input_gives_one_line_and_exit_2(tmp_path, capsys, argv, needle):
    code = main(["coord-check", "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert needle in err and "\n" not in err
    assert not (tmp_path / "out").exists()


MAMBA2 = ["--model", "arch=mamba2", "--param", "sp", "--seeds", "0", "--steps", "1",
          "--n-layer", "1", "--batch-size", "2", "--seq-len", "16"]


@pytest.mark.parametrize("argv,needle", [
    (["--model", "mamba2.headdim=12", "--widths", "32", "64"],
     "mamba2.headdim 12 does not divide d_inner 64"),
    (["--model", "mamba2.headdim=32", "--widths", "16", "24", "32"],
     "--widths 24: Value error, mamba2: headdim 32 does not divide d_inner 48"),
])
def test_a_mamba2_head_dim_that_does_not_divide_a_width_is_refused_before_any_work(
        tmp_path, capsys, argv, needle):
    """A dotted --model field reaches the nested option; every width is built before the
    first model trains, and the refusal names the width."""
    code = main(["coord-check", "--out", str(tmp_path / "out"), *MAMBA2, *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert needle in err and "\n" not in err and "[1/" not in err
    assert not (tmp_path / "out").exists()


def test_a_dotted_model_field_sets_the_mamba2_head_dim(tmp_path):
    """headdim 8 at width 16 (4 heads); the default head dim 64 does not divide d_inner 32."""
    out = tmp_path / "cc"
    code = main(["coord-check", "--out", str(out), *MAMBA2, "--model", "mamba2.headdim=8",
                 "--widths", "16", "32"])
    assert code == 0
    assert set(pd.read_parquet(out / "coord.parquet").width) == {16, 32}


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


def test_the_figure_shows_the_geometric_mean_over_seeds_the_slopes_are_taken_of():
    from mutransfer.analysis.coordplot import coord_summary

    df = table({"mup": {"conv": (0.0, 0.0)}})
    df.loc[df.seed == 1, "rms"] *= 4.0  # seed 0 at 1, seed 1 at 4: geometric mean 2
    s = coord_summary(df)
    assert s.rms.to_numpy() == pytest.approx(2.0)



def _loaded_after(imports: str, packages: tuple[str, ...]) -> list[str]:
    """Modules of `packages` (or the packages) that a fresh Python loaded after `imports`."""
    import subprocess
    import sys

    code = (f"import sys; {imports}; print(sorted(m for m in sys.modules for p in {packages!r} "
            "if m == p or m.startswith(p + '.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return eval(done.stdout.splitlines()[-1])


def test_measuring_never_imports_the_analysis_and_judging_never_imports_torch():
    """coord measures (torch, models), analysis judges (Parquet tables only): one direction."""
    def every_module(package: str) -> str:
        return (f"import importlib, pkgutil, {package} as p; "
                f"[importlib.import_module(f'{package}.{{m.name}}') "
                "for m in pkgutil.iter_modules(p.__path__)]")

    assert _loaded_after(every_module("mutransfer.coord"), ("mutransfer.analysis",)) == []
    assert _loaded_after(every_module("mutransfer.analysis"),
                         ("torch", "ray", "mutransfer.models")) == []


def one_family(excess_t: list[float], df: float, tol: float = 0.2) -> pd.DataFrame:
    """Hand-made slopes of one parameterization: Δconv at steps 1.., each `excess_t` standard
    errors (s.e. 0.05) above the tolerance, with `df` degrees of freedom."""
    return pd.DataFrame({"parameterization": "mup", "layer": 0, "quantity": "conv",
                         "step": np.arange(1, len(excess_t) + 1), "kind": "dh",
                         "slope": tol + 0.05 * np.asarray(excess_t), "se": 0.05, "df": df,
                         "se_seeds": 0.05, "se_fit": np.nan, "n_seeds": df + 1})


def test_the_standard_error_is_weighed_by_the_t_quantile_of_its_degrees_of_freedom():
    # 2.2 s.e. beyond the band: past z = 2, but not past t(0.95, 3) = 2.353 (4 seeds)
    assert judge(one_family([2.2], df=3)).status.item() == "borderline"
    assert judge(one_family([2.2], df=23)).status.item() == "robust"  # t(0.95, 23) = 1.714
    p = judge(one_family([2.2], df=3)).p.item()
    assert 0.05 < p < 0.065


def test_a_slope_whose_standard_error_is_infinite_or_unknown_is_never_a_violation():
    """An infinite s.e. says the slope could be anything, and so does none at all (NaN: one
    seed at two widths, nothing measures the noise): p = 1, not the p = 0 of a slope
    measured exactly (s.e. 0). Such a slope leaves the verdict INCONCLUSIVE."""
    sl = one_family([1.0, 1.0, 1.0], df=3).assign(se=[np.inf, 0.0, np.nan])
    assert judge(sl).status.tolist() == ["borderline", "robust", "borderline"]
    assert judge(sl).p.tolist()[0] == 1.0 and judge(sl).p.tolist()[2] == 1.0
    unknown = one_family([1.0], df=3).assign(se=np.nan)
    assert verdicts(unknown).verdict.item() == "INCONCLUSIVE"  # on a depth check too
    assert verdicts(unknown, undecided_beyond=0.2).verdict.item() == "INCONCLUSIVE"


def test_one_seed_at_two_widths_is_inconclusive_not_a_failure_of_a_correct_model(
        tmp_path, capsys):
    """`coord-check --seeds 0 --widths 16 32` of mup_ssm said FAIL, p_holm < 1e-6: one
    seed's slope between two widths has no standard error, and was taken as exact."""
    rc = main(["coord-check", "--widths", "16", "32", "--steps", "1", "--seeds", "0",
               "--param", "mup_ssm", "--out", str(tmp_path / "cc")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "with one seed at two widths nothing measures the noise" in out
    row = next(line for line in out.splitlines() if line.split()[:1] == ["mup_ssm"])
    assert row.split()[1] == "INCONCLUSIVE", row


def test_many_slopes_are_held_to_a_family_wise_error_rate_by_holm():
    many = one_family([3.0] * 140, df=7)  # each p ≈ 0.01: one alone would count
    assert judge(one_family([3.0], df=7)).status.item() == "robust"
    assert (judge(many).status == "borderline").all()
    many.loc[17, "slope"] = 0.2 + 0.05 * 20  # one clear violation among them
    j = judge(many)
    assert j.status.tolist().count("robust") == 1 and j.status[17] == "robust"
    assert verdicts(many).verdict.item() == "FAIL"


def test_a_family_at_the_band_edge_fails_at_most_alpha_of_the_time():
    """Null families: 140 slopes whose true value is the tolerance, 8 seeds each. With z = 2
    per slope (the old rule) nearly every family FAILed; Holm keeps it to about alpha."""
    rng = np.random.default_rng(0)
    fails = 0
    for _ in range(100):
        per_seed = 0.2 + 0.1 * rng.standard_normal((140, 8))
        sl = pd.DataFrame({"parameterization": "mup", "layer": 0, "quantity": "conv",
                           "step": np.arange(140), "kind": "dh",
                           "slope": per_seed.mean(axis=1),
                           "se": per_seed.std(axis=1, ddof=1) / np.sqrt(8), "df": 7.0})
        fails += judge(sl, alpha=0.05).status.eq("robust").any()
    assert fails <= 10


def test_the_degrees_of_freedom_of_seed_spread_plus_fit_error_are_welchs():
    from mutransfer.analysis.coordverdict import welch_df

    got = welch_df(np.array([0.1, 0.1, np.nan, 0.0]), np.array([7, 7, 7, 7]),
                   np.array([0.1, np.nan, 0.1, 0.0]), np.array([3, 3, 3, 3]))
    assert got[0] == pytest.approx((0.02) ** 2 / (1e-4 / 7 + 1e-4 / 3))
    assert got[1] == pytest.approx(7) and got[2] == pytest.approx(3) and np.isinf(got[3])
    sl = slopes(table({"mup": {"conv": (0.0, 0.3)}}, seeds=tuple(range(6)), seed_spread=0.1))
    assert (sl.df == 5).all()  # planted power laws: no fit error, the seeds' 5 df alone


def test_every_coord_check_option_says_what_it_does_and_its_default():
    from mutransfer.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["coord-check"]
    for action in sub._actions:
        if action.dest == "help":
            continue
        assert action.help, action.option_strings
        assert "default" in action.help % {"default": action.default}, action.option_strings


TINY = dict(params=["sp"], steps=1, seeds=[0, 1], batch_size=2, seq_len=16, d_state=4)


def test_the_python_entry_point_measures_and_judges_a_width_check():
    from mutransfer import CoordSettings, coord_check

    r = coord_check(CoordSettings(widths=[16, 32], n_layer=1, **TINY))
    assert set(r.coord.width) == {16, 32} and set(r.coord.n_layer) == {1}
    assert r.verdict("sp") in ("PASS", "FAIL", "INCONCLUSIVE") and r.settings.axis == "width"
    assert {"p", "p_holm", "df", "status"} <= set(r.slopes.columns)
    assert "against log2 width" in r.text()


@pytest.mark.parametrize("points,needle", [
    ({"widths": [16, 2**20]}, "width 1048576: the model does not fit in memory"),
    ({"widths": [16], "depths": [1, 10**8]}, "depth 100000000: the model does not fit"),
])
def test_a_model_larger_than_the_machine_is_refused_before_the_smaller_ones_run(
        points, needle):
    """Weights, gradients and Adam's moments beyond physical memory are refused while the
    settings are checked: found at the build, the error came after the smaller widths'
    progress lines and their minutes of training."""
    from mutransfer import CoordSettings, coord_check

    ran = []
    with pytest.raises(UserError, match=needle):
        coord_check(CoordSettings(**points, **TINY), progress=lambda *a: ran.append(a))
    assert ran == []


def test_a_depth_check_takes_slopes_against_log2_depth_at_one_width():
    from mutransfer import CoordSettings, coord_check

    r = coord_check(CoordSettings(widths=[16], depths=[1, 2, 4], **TINY))
    assert set(r.coord.n_layer) == {1, 2, 4} and set(r.coord.width) == {16}
    assert sorted(r.coord[r.coord.n_layer == 4].layer.unique()) == [-1, 0, 1, 2, 3]
    # the blocks every depth has (layer 0), the last block of each (Llast), model-level (-1)
    assert set(r.slopes.layer) == {-1, 0, -2}
    assert r.slopes.n_seeds.eq(2).all() and "against log2 depth" in r.text()
    assert "Llast." in r.text()


def test_a_planted_depth_law_is_recovered_on_the_last_block():
    rows = []
    for d in (2, 4, 8):
        for layer in range(d):
            for seed in (0, 1, 2):
                for step in (0, 1):
                    rows.append({"parameterization": "mup", "optimizer": "adam", "width": 64,
                                 "n_layer": d, "seed": seed, "step": step, "layer": layer,
                                 "quantity": "block_out", "rms": d ** (0.5 * layer / (d - 1)),
                                 "drms": 0.0 if step == 0 else 1.0})
    sl = slopes(pd.DataFrame(rows), axis="n_layer").set_index(["layer", "kind", "step"])
    assert sl.loc[(-2, "h", 0), "slope"] == pytest.approx(0.5)  # last block: d^0.5
    assert sl.loc[(0, "h", 0), "slope"] == pytest.approx(0.0)  # first block: flat
    assert verdicts(sl.reset_index(), seeds=[0, 1, 2]).verdict.item() == "FAIL"


@pytest.mark.parametrize("argv,needle", [
    (["--depths", "4"], "--depths: give at least two different depths"),
    (["--depths", "0", "2"], "--depths: 0 is below the minimum depth 1"),
    (["--depths", "2", "4", "--widths", "64", "128"], "--widths: a depth check holds one"),
    (["--depths", "2", "4", "--n-layer", "3"], "--n-layer: a depth check sets it"),
    (["--depths", "2", "4", "--model", "n_layer=3"], "--model n_layer: a depth check sets"),
    (["--width", "64"], "--width: only with --depths"),
    (["--depths", "2", "4", "--width", "4"], "--width: 4 is below the minimum width 8"),
    (["--depths", "2", "4", "--depth-param", "completep"], "--depth-param: this version has"),
])
def test_bad_depth_input_gives_one_line_and_exit_2(tmp_path, capsys, argv, needle):
    from mutransfer.param.config import ParamConfig

    if "--depth-param" in argv and "depth" in ParamConfig.model_fields:
        pytest.skip("param.depth exists: --depth-param is accepted")
    code = main(["coord-check", "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert needle in err and "\n" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_coord_check_command_runs_a_depth_check(tmp_path, capsys):
    out = tmp_path / "cc"
    code = main(["coord-check", "--depths", "1", "2", "--width", "16", "--param", "sp",
                 "--steps", "1", "--seeds", "0", "1", "--batch-size", "2", "--seq-len", "16",
                 "--out", str(out)])
    assert code == 0
    assert set(pd.read_parquet(out / "coord.parquet").n_layer) == {1, 2}
    assert (out / "coord_check_depth_adam.png").exists()
    assert "slope of log2 RMS against log2 depth" in capsys.readouterr().out


def test_a_depth_check_is_relative_to_its_smallest_depth_where_the_model_has_a_base_depth():
    from mutransfer.config import ModelConfig
    from mutransfer.coord.measure import trial_config
    from mutransfer.coord.settings import CoordSettings

    s = CoordSettings(widths=[64], depths=[2, 8])
    cfg = trial_config(s, "mup_ssm", 64, 0, 8)
    assert cfg.model.n_layer == 8 and cfg.width == 64
    if "base_n_layer" not in ModelConfig.model_fields:
        pytest.skip("no model.base_n_layer in this version")
    assert cfg.model.base_n_layer == 2
    given = CoordSettings(widths=[64], depths=[2, 8], model={"base_n_layer": 4})
    assert trial_config(given, "mup_ssm", 64, 0, 8).model.base_n_layer == 4


def test_the_figure_of_a_depth_check_is_drawn_against_depth():
    from mutransfer.analysis.coordplot import coord_axis

    depth = table({"mup": {"conv": (0.0, 0.0)}}).assign(n_layer=lambda d: d.width // 32,
                                                          width=64)
    assert coord_axis(depth) == "n_layer"
    assert coord_axis(table({"mup": {"conv": (0.0, 0.0)}})) == "width"  # no n_layer column
