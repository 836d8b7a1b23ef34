"""Coordinate check, judging part: log-log slopes against width (or depth), their noise, and a
verdict.

Reads the table coord/measure.py writes (coord.parquet, docs/results-format.md); no torch.

A parameterization that claims feature learning must keep the RMS of every activation h and
of its update Δh flat in width: |slope of log2 RMS against log2 width| <= tolerance, at every
step. One exception, as in the mup library's own checks: the logits only need to stay O(1) at
init, so for `logits` h may shrink (slope <= tolerance, no lower bound); their Δh must be flat.
The same rule judges slopes against log2 depth (`axis="n_layer"`).

Noise model: each seed (its own init and its own training batches) gives its own slope per
(layer, quantity, step, kind); the estimate is their mean (equal to the slope of the seeds'
geometric-mean RMS). Its standard error has two parts: the spread of the per-seed slopes
(/√seeds, seeds − 1 degrees of freedom), and the OLS error of a power law fitted over the
widths to the seed-mean curve (widths − 2 degrees of freedom), which no number of seeds removes
where the log-log curve bends. The two are added in quadrature and the sum's degrees of freedom
are Welch–Satterthwaite's.

Verdict: each slope outside the tolerance is tested (one-sided t test of "inside the band"
at those degrees of freedom); the p-values of a parameterization's slopes (~140: its family)
are Holm-adjusted, and a slope is a *violation* (status `robust`) when its adjusted p is at
most `alpha`: the chance that a parameterization whose every slope lies inside the band FAILs
is at most alpha, however many slopes are checked. A slope outside by less is *borderline*:
reported, not counted. With one seed and two widths there is no standard error: a slope
outside the tolerance is undecided (INCONCLUSIVE), never a violation. A quantity whose RMS is 0
at every width and seed (nothing has reached it yet) has no slope and is not checked.

No violation is a PASS only where the test could have seen one: a width check with a borderline
slope outside the band by more than the band's own width (|slope| > 2 x tolerance: sp's slopes
at 2 widths x 2 seeds, 1 degree of freedom, where Holm over 140 slopes needs t > 800) is
INCONCLUSIVE, naming that slope. Correct models at the defaults keep every borderline excess
below 0.1 (docs/parameterizations.md). A depth check keeps the old rule: the stream at a fixed
index shrinks with depth by design and passes through its fit error alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.analysis.slopes import rowwise_slopes
from mutransfer.analysis.tdist import t_upper
from mutransfer.analysis_defaults import COORD_ALPHA as ALPHA
from mutransfer.analysis_defaults import COORD_TOLERANCE as TOLERANCE
from mutransfer.param.config import PARAMETERIZATIONS

FEATURE_LEARNING = tuple(p for p in PARAMETERIZATIONS if p != "sp")  # SP does not claim it
DOCS = 'docs/parameterizations.md, "The coordinate check and its noise model"'
SHRINK_ALLOWED = ("logits",)
KEYS = ["parameterization", "layer", "quantity", "step"]
LAST = -2  # `layer` of the last block in a depth check (-1: model-level quantities)
AXES = {"width": "width", "n_layer": "depth"}  # what slopes can be taken against


def _log_sizes(coord: pd.DataFrame, axis: str = "width") -> list[tuple[str, pd.DataFrame]]:
    """Per kind (h, dh): log2 RMS with a row per (param, layer, quantity, step, seed) and a
    column per value of `axis` (width or n_layer). Δh at step 0 (zero by definition) is left
    out, and so is a (param, layer, quantity, step, kind) whose RMS is 0 at every width and
    seed: nothing has reached it yet, so it has no size to scale (a zero-initialised readout's
    logits at init, and every Δh at step 1 behind it, since no gradient passes a zero readout;
    before, each counted as a slope of +inf and a correct muP model FAILed), as
    analysis/updates.py leaves out a tensor no gradient reaches. Zero at some widths only
    still gives an infinite slope (`seed_slopes`)."""
    out = []
    for kind, col in (("h", "rms"), ("dh", "drms")):
        rows = coord if kind == "h" else coord[coord["step"] > 0]
        wide = rows.pivot_table(index=KEYS + ["seed"], columns=axis, values=col,
                                aggfunc="first", sort=True)
        zero = (wide == 0).all(axis=1).groupby(level=KEYS).transform("all")
        wide = wide[~zero.to_numpy(bool)]
        if wide.shape[1] >= 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                out.append((kind, np.log2(wide)))
    return out


def seed_slopes(coord: pd.DataFrame, axis: str = "width") -> pd.DataFrame:
    """Slope of log2 RMS vs log2 `axis` per (param, layer, quantity, step, kind, seed).

    A seed whose RMS is zero or non-finite at some width gets an infinite slope (it cannot be
    flat).
    """
    out = []
    for kind, logs in _log_sizes(coord, axis):
        y = logs.to_numpy(float)
        s = rowwise_slopes(np.log2(logs.columns.to_numpy(float)), y)
        s[~np.isfinite(y).all(axis=1)] = np.inf
        out.append(logs.index.to_frame(index=False).assign(kind=kind, slope=s))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=KEYS + ["seed", "kind", "slope"])


def fit_errors(coord: pd.DataFrame, axis: str = "width") -> pd.DataFrame:
    """OLS standard error of the slope fitted to the seed-mean log2 RMS, per (…, kind): how
    far the curve is from a power law over these widths (NaN with fewer than 3 widths), and
    its degrees of freedom (widths − 2)."""
    out = []
    for kind, logs in _log_sizes(coord, axis):
        mean = logs.groupby(level=KEYS, sort=True).mean()
        x = np.log2(mean.columns.to_numpy(float))
        y = mean.to_numpy(float)
        xc = x - x.mean()
        slope = rowwise_slopes(x, y)
        se = np.full(len(y), np.nan)
        if len(x) > 2:  # two widths: the line passes through both (residual 0, or a rounding
            # error that would make the error infinite and every slope outside the band robust)
            with np.errstate(invalid="ignore", divide="ignore"):  # non-finite rows: NaN
                resid = y - y.mean(axis=1, keepdims=True) - slope[:, None] * xc
                se = np.sqrt((resid**2).sum(axis=1) / (len(x) - 2) / (xc**2).sum())
        out.append(mean.index.to_frame(index=False).assign(kind=kind, se_fit=se,
                                                           df_fit=len(x) - 2))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=KEYS + ["kind", "se_fit", "df_fit"])


def slopes(coord: pd.DataFrame, axis: str = "width") -> pd.DataFrame:
    """Per (param, layer, quantity, step, kind): the mean slope over seeds against log2 `axis`,
    its standard error `se` = √(se_seeds² + se_fit²), its two parts, its degrees of freedom
    `df` and the number of seeds.

    se_seeds is the spread of the per-seed slopes / √seeds (NaN with one seed; seeds − 1
    degrees of freedom); se_fit the OLS error of the power law fitted to the seed-mean curve
    (see `fit_errors`; widths − 2), which also holds what seed noise is left in that mean, so
    the sum errs on the wide side. `df` is Welch–Satterthwaite's for the sum.
    """
    if axis == "n_layer":
        coord = by_position(coord)
    per_seed = seed_slopes(coord, axis)
    g = per_seed.groupby(KEYS + ["kind"], sort=True)["slope"]
    out = g.agg(slope="mean", sd="std", n_seeds="count").reset_index()
    out = out.merge(fit_errors(coord, axis), on=KEYS + ["kind"], how="left")
    with np.errstate(invalid="ignore"):
        out["se_seeds"] = np.where(out["n_seeds"] > 1, out["sd"] / np.sqrt(out["n_seeds"]),
                                   np.nan)
    out["se"] = np.sqrt(out["se_seeds"].fillna(0.0) ** 2 + out["se_fit"].fillna(0.0) ** 2)
    out["df"] = welch_df(out["se_seeds"].to_numpy(float), out["n_seeds"].to_numpy(float) - 1,
                         out["se_fit"].to_numpy(float), out["df_fit"].to_numpy(float))
    none = out["se_seeds"].isna() & out["se_fit"].isna()
    out.loc[none, "se"] = np.nan  # one seed, two widths: no standard error
    out.loc[~np.isfinite(out["slope"]), ["se", "se_seeds", "se_fit", "df"]] = np.nan
    return out.drop(columns=["sd", "df_fit"])[KEYS + ["kind", "slope", "se", "df", "se_seeds",
                                                      "se_fit", "n_seeds"]]


def by_position(coord: pd.DataFrame) -> pd.DataFrame:
    """For slopes against depth: the blocks every depth has (layer < the smallest n_layer),
    the last block of each depth as layer LAST, and the model-level quantities (layer -1)."""
    shallowest = int(coord["n_layer"].min())
    last = coord[coord["layer"] == coord["n_layer"] - 1].assign(layer=LAST)
    return pd.concat([coord[coord["layer"] < shallowest], last], ignore_index=True)


def welch_df(se1: np.ndarray, df1: np.ndarray, se2: np.ndarray, df2: np.ndarray) -> np.ndarray:
    """Welch–Satterthwaite degrees of freedom of √(se1² + se2²): (Σ se²)² / Σ se⁴/df, over the
    parts that exist (a NaN part, or one with df < 1, is left out); inf when every part is 0."""
    parts = []
    for se, df in ((se1, df1), (se2, df2)):
        ok = np.isfinite(se) & (df >= 1)
        parts.append((np.where(ok, se**2, 0.0), np.where(ok, df, 1.0)))
    var = sum(v for v, _ in parts)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = var**2 / sum(v**2 / d for v, d in parts)
    # the t test rounds df down: a whole df that rounding left a hair below (one part, 7 df:
    # v²/(v²/7) = 6.999999999999999 for some v) would lose a degree of freedom (before: 29 of
    # 280 slopes of an 8-seed, 2-width check were tested at 6 df instead of 7)
    whole = np.rint(out)
    out = np.where(np.abs(out - whole) <= 1e-9 * np.maximum(whole, 1.0), whole, out)
    return np.where(var > 0, out, np.inf)


def _reach(sl: pd.DataFrame) -> pd.Series:
    """|slope|, or the signed slope where shrinking is allowed (only growth counts there)."""
    one_sided = (sl["kind"] == "h") & sl["quantity"].isin(SHRINK_ALLOWED)
    return sl["slope"].where(one_sided, sl["slope"].abs())


def excess(sl: pd.DataFrame, tol: float = TOLERANCE) -> pd.Series:
    """How far each slope lies outside the allowed band (0 when inside)."""
    s = sl["slope"].to_numpy(float)
    with np.errstate(invalid="ignore"):
        out = _reach(sl).to_numpy(float) - tol
    out = np.where(np.isfinite(s), np.maximum(out, 0.0), np.inf)
    return pd.Series(out, index=sl.index)


def p_values(sl: pd.DataFrame, tol: float = TOLERANCE,
             ex: pd.Series | None = None) -> pd.Series:
    """One-sided p of "inside the band" per slope: P(T_df > excess / se); 1 inside the band
    and where the standard error is infinite or unknown (NaN: one seed at two widths, where
    nothing measures the noise: the slope could be anything near it; before, such a slope
    counted as measured exactly, and a correct mup_ssm FAILed `coord-check --seeds 0` with
    p < 1e-6), 0 where the excess is infinite or the standard error 0 (measured exactly).
    `ex`: the excess when the band is not ±tol everywhere (default: `excess(sl, tol)`)."""
    ex = (excess(sl, tol) if ex is None else ex).to_numpy(float)
    se = sl["se"].to_numpy(float)
    df = sl["df"].to_numpy(float)
    p = np.ones(len(sl))
    for i in np.flatnonzero(ex > 0):
        if (se[i] == np.inf or np.isnan(se[i])) and np.isfinite(ex[i]):
            continue
        if not np.isfinite(ex[i]) or not se[i] > 0:
            p[i] = 0.0
        else:
            p[i] = t_upper(ex[i] / se[i], df[i]) if df[i] >= 1 else 1.0
    return pd.Series(p, index=sl.index)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values: reject where adjusted p <= alpha controls the
    family-wise error rate at alpha (any dependence between the tests)."""
    p = np.asarray(p, float)
    order = np.argsort(p, kind="stable")
    m = len(p)
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


def judge(sl: pd.DataFrame, tol: float = TOLERANCE, alpha: float = ALPHA,
          ex: pd.Series | None = None) -> pd.DataFrame:
    """`sl` with `excess`, `p`, `p_holm` (Holm over each parameterization's slopes) and
    `status`: ok, borderline (outside the band, p_holm > alpha) or robust (a violation).
    `ex`: each slope's excess when the band is not ±tol everywhere (mutransfer check)."""
    ex = excess(sl, tol) if ex is None else ex
    p = p_values(sl, tol, ex)
    p_holm = pd.Series(np.ones(len(sl)), index=sl.index)
    for _, idx in sl.groupby("parameterization", sort=False).groups.items():
        p_holm[idx] = holm(p[idx].to_numpy())
    status = np.where(ex <= 0, "ok", np.where(p_holm <= alpha, "robust", "borderline"))
    return sl.assign(excess=ex, p=p, p_holm=p_holm, status=status)


def undecided(judged: pd.DataFrame, beyond: float | None) -> pd.DataFrame:
    """The borderline slopes the test had no power to call: outside the band by more than
    `beyond` (None: no such bound), or by any amount with no standard error at all (one
    seed at two widths or depths)."""
    far = judged["se"].isna()
    if beyond is not None:
        far = far | (judged["excess"] > beyond)
    return judged[(judged["status"] == "borderline") & far]


def verdicts(sl: pd.DataFrame, tol: float = TOLERANCE, alpha: float = ALPHA,
             worst: int = 3, seeds: list[int] | None = None,
             undecided_beyond: float | None = None) -> pd.DataFrame:
    """One row per parameterization: PASS/FAIL/INCONCLUSIVE, the largest robust slope with its
    s.e., counts.

    FAIL when any slope is a robust violation. INCONCLUSIVE when none is but a borderline
    slope lies outside the band by more than `undecided_beyond` (a width check: the band's
    own width, `tol`; None: never), or has no standard error (one seed at two points): the
    test had no power to call it. `largest` is the robust
    violation of largest |slope|; on an INCONCLUSIVE, the undecided slope of largest excess;
    on a PASS, the slope nearest the band's edge (largest |slope|, counting only growth where
    shrinking is allowed). `p_holm` is that slope's Holm-adjusted p; `undecided` counts those
    slopes.
    """
    judged = judge(sl, tol, alpha)
    reach = _reach(judged)
    rows = []
    for param, g in judged.groupby("parameterization", sort=False):
        robust = g[g["status"] == "robust"]
        far = undecided(g, undecided_beyond)
        order = (robust["slope"].abs() if len(robust) else far["excess"] if len(far)
                 else reach[g.index]).sort_values(ascending=False).index
        r = g.loc[order[0]]
        rows.append({
            "parameterization": param,
            "verdict": "FAIL" if len(robust) else "INCONCLUSIVE" if len(far) else "PASS",
            "undecided": int(len(far)) if not len(robust) else 0,
            "largest": label(r), "slope": float(r["slope"]), "se": float(r["se"]),
            "df": float(r["df"]), "p_holm": float(r["p_holm"]),
            "robust": int(len(robust)), "borderline": int((g["status"] == "borderline").sum()),
            "checked": int(len(g)),
            "worst": "; ".join(f"{label(g.loc[i])} {_pm(g.loc[i])}" for i in order[:worst]
                               ) if len(robust) or len(far) else "",
            "seeds": seed_ranges(seeds) if seeds else f"{int(g['n_seeds'].max())} seeds",
        })
    return pd.DataFrame(rows)


def seed_ranges(seeds: list[int]) -> str:
    """[0, 1, 2, 3, 7] -> '0-3 7'."""
    out, run = [], []
    for s in sorted(set(seeds)):
        if run and s != run[-1] + 1:
            out.append(_run(run))
            run = []
        run.append(s)
    return " ".join(out + [_run(run)]) if run else ""


def _run(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def label(r) -> str:
    layer = {-1: "", LAST: "Llast."}.get(r["layer"], f"L{r['layer']}.")
    return f"{'Δ' if r['kind'] == 'dh' else ''}{layer}{r['quantity']}@t{r['step']}"


def _pm(r) -> str:
    return f"{r['slope']:+.2f}" + ("" if np.isnan(r["se"]) else f"±{r['se']:.2f}")


def strict_failures(v: pd.DataFrame, axis: str = "width") -> list[str]:
    """Parameterizations that break expectations: a feature-learning one FAILs, SP PASSes, or
    either is INCONCLUSIVE (the check could not confirm the expectation). Against depth the
    width is fixed, so sp claims nothing the others do not (at the base width it is their
    model): there any FAIL or INCONCLUSIVE breaks the expectation, and sp PASSing does not
    (`--strict` exited 1 on "sp PASSes" when a depth parameterization did its job)."""
    bad = []
    for r in v.itertuples():
        if r.verdict == "FAIL" and (axis != "width" or r.parameterization in FEATURE_LEARNING):
            bad.append(f"{r.parameterization} FAILs")
        if axis == "width" and r.parameterization == "sp" and r.verdict == "PASS":
            bad.append("sp PASSes")
        if r.verdict == "INCONCLUSIVE":
            bad.append(f"{r.parameterization} is INCONCLUSIVE")
    return bad


def verdict_text(judged: pd.DataFrame, v: pd.DataFrame, last_step: int,
                 tol: float = TOLERANCE, alpha: float = ALPHA, axis: str = "width") -> str:
    """What `coord-check` prints: the slopes at the last step, what the verdict measures, and
    the verdict per parameterization."""
    name = AXES[axis]
    return "\n".join([
        slope_table(judged, last_step, axis), "",
        "verdict: per activation h and update Δh (each layer and step), the slope of log2 RMS "
        f"against log2 {name}, flat when sizes",
        f"do not depend on {name}. FAIL: a slope outside ±{tol:g} by a t test (s.e.: seed spread "
        f"+ power-law fit) significant at family-wise {alpha:g}",
        "(Holm over each parameterization's slopes); borderline slopes are counted apart. "
        + ("sp is expected to FAIL" if axis == "width" else "At one width the "
           "parameterizations are one model: under a depth parameterization each is expected "
           "to PASS")
        + f". Read more: {DOCS}.", *_undecided_text(v, tol, name),
        format_verdicts(v)])


def _undecided_text(v: pd.DataFrame, tol: float, name: str = "width") -> list[str]:
    """What an INCONCLUSIVE means and what decides it (nothing when there is none)."""
    if "undecided" not in v or not (v["verdict"] == "INCONCLUSIVE").any():
        return []
    one_seed = v.loc[v["verdict"] == "INCONCLUSIVE", "se"].isna().any()
    why = (f"and with one seed at two {name}s nothing measures the noise" if one_seed else
           f"by more than {tol:g} and the test cannot tell it from noise at these seeds and "
           f"{name}s")
    return [f"INCONCLUSIVE: no violation, but a slope lies outside ±{tol:g} {why} "
            f"(undecided: how many); add seeds or {name}s"
            + (" (the defaults, 8 seeds at widths 64-1024, decide)." if name == "width" else
               ".")]


def format_verdicts(v: pd.DataFrame) -> str:
    """The verdict table: largest robust slope (or largest of all on a PASS) ± its s.e."""
    t = v.assign(slope=[f"{a:+.2f} ± {b:.2f}" for a, b in zip(v["slope"], v["se"])],
                 df=[f"{d:.1f}" for d in v["df"]], p_holm=[_p(p) for p in v["p_holm"]],
                 **{"robust/borderline/checked": [f"{a} / {b} / {c}" for a, b, c in zip(
                     v["robust"], v["borderline"], v["checked"])]})
    cols = ["parameterization", "verdict", "largest", "slope", "df", "p_holm",
            "robust/borderline/checked", "seeds"]
    if "undecided" in v and (v["verdict"] == "INCONCLUSIVE").any():
        cols.insert(-1, "undecided")
    return t[cols].to_string(index=False)


def _p(p: float) -> str:
    return "nan" if np.isnan(p) else ("<1e-6" if p < 1e-6 else f"{p:.2g}")


def slope_table(judged: pd.DataFrame, last_step: int, axis: str = "width") -> str:
    """Slopes at the last step, a row per quantity, a column per param x kind; `!` marks a
    robust violation and `?` a borderline one."""
    sub = judged[judged["step"] == last_step].copy()
    sub["quantity"] = [q if layer == -1 else f"{'Llast' if layer == LAST else f'L{layer}'}.{q}"
                       for layer, q in zip(sub["layer"], sub["quantity"])]
    mark = {"ok": "", "borderline": "?", "robust": "!"}
    sub["cell"] = [f"{x:+.2f}{mark[m]}" for x, m in zip(sub["slope"], sub["status"])]
    table = sub.pivot_table(index="quantity", columns=["parameterization", "kind"],
                            values="cell", aggfunc="first", sort=False)
    return (f"slopes of log2 RMS vs log2 {AXES[axis]} at step {last_step} (mean over seeds; "
            f"! robust violation, ? borderline):\n" + table.fillna("").to_string())
