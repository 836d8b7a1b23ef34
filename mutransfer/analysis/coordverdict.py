"""Coordinate check, judging part: log-log slopes against width, their noise, and a verdict.

Reads the table coord/measure.py writes (coord.parquet, docs/results-format.md); no torch.

A parameterization that claims feature learning must keep the RMS of every activation h and
of its update Δh flat in width: |slope of log2 RMS against log2 width| <= tolerance, at every
step. One exception, as in the mup library's own checks: the logits only need to stay O(1) at
init, so for `logits` h may shrink (slope <= tolerance, no lower bound); their Δh must be flat.

Noise model: each seed (its own init and its own training batches) gives its own slope per
(layer, quantity, step, kind); the estimate is their mean (equal to the slope of the seeds'
geometric-mean RMS). Its standard error has two parts: the spread of the per-seed slopes
(/√seeds), and the OLS error of a power law fitted over the widths to the seed-mean curve,
which no number of seeds removes where the log-log curve bends. A slope is a *violation* only
when it lies outside the tolerance by more than `margin` standard errors (robust); one outside
by less is *borderline*: reported, not counted. With one seed and two widths there is no
standard error and every slope outside the tolerance counts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.analysis.slopes import rowwise_slopes
from mutransfer.analysis_defaults import COORD_MARGIN_SE as MARGIN
from mutransfer.analysis_defaults import COORD_TOLERANCE as TOLERANCE
from mutransfer.param.config import PARAMETERIZATIONS

FEATURE_LEARNING = tuple(p for p in PARAMETERIZATIONS if p != "sp")  # SP does not claim it
DOCS = 'docs/parameterizations.md, "The coordinate check and its noise model"'
SHRINK_ALLOWED = ("logits",)
KEYS = ["parameterization", "layer", "quantity", "step"]


def _log_sizes(coord: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Per kind (h, dh): log2 RMS with a row per (param, layer, quantity, step, seed) and a
    column per width. Δh at step 0 (zero by definition) is left out."""
    out = []
    for kind, col in (("h", "rms"), ("dh", "drms")):
        rows = coord if kind == "h" else coord[coord["step"] > 0]
        wide = rows.pivot_table(index=KEYS + ["seed"], columns="width", values=col,
                                aggfunc="first", sort=True)
        if wide.shape[1] >= 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                out.append((kind, np.log2(wide)))
    return out


def seed_slopes(coord: pd.DataFrame) -> pd.DataFrame:
    """Slope of log2 RMS vs log2 width per (param, layer, quantity, step, kind, seed).

    A seed whose RMS is zero or non-finite at some width gets an infinite slope (it cannot be
    flat).
    """
    out = []
    for kind, logs in _log_sizes(coord):
        y = logs.to_numpy(float)
        s = rowwise_slopes(np.log2(logs.columns.to_numpy(float)), y)
        s[~np.isfinite(y).all(axis=1)] = np.inf
        out.append(logs.index.to_frame(index=False).assign(kind=kind, slope=s))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=KEYS + ["seed", "kind", "slope"])


def fit_errors(coord: pd.DataFrame) -> pd.DataFrame:
    """OLS standard error of the slope fitted to the seed-mean log2 RMS, per (…, kind): how
    far the curve is from a power law over these widths (NaN with fewer than 3 widths)."""
    out = []
    for kind, logs in _log_sizes(coord):
        mean = logs.groupby(level=KEYS, sort=True).mean()
        x = np.log2(mean.columns.to_numpy(float))
        y = mean.to_numpy(float)
        xc = x - x.mean()
        slope = rowwise_slopes(x, y)
        with np.errstate(invalid="ignore", divide="ignore"):  # non-finite rows: NaN
            resid = y - y.mean(axis=1, keepdims=True) - slope[:, None] * xc
            se = np.sqrt((resid**2).sum(axis=1) / (len(x) - 2) / (xc**2).sum())
        out.append(mean.index.to_frame(index=False).assign(kind=kind, se_fit=se))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=KEYS + ["kind", "se_fit"])


def slopes(coord: pd.DataFrame) -> pd.DataFrame:
    """Per (param, layer, quantity, step, kind): the mean slope over seeds, its standard error
    `se` = √(se_seeds² + se_fit²), its two parts and the number of seeds.

    se_seeds is the spread of the per-seed slopes / √seeds (NaN with one seed); se_fit the
    OLS error of the power law fitted to the seed-mean curve (see `fit_errors`), which also
    holds what seed noise is left in that mean, so the sum errs on the wide side.
    """
    per_seed = seed_slopes(coord)
    g = per_seed.groupby(KEYS + ["kind"], sort=True)["slope"]
    out = g.agg(slope="mean", sd="std", n_seeds="count").reset_index()
    out = out.merge(fit_errors(coord), on=KEYS + ["kind"], how="left")
    with np.errstate(invalid="ignore"):
        out["se_seeds"] = np.where(out["n_seeds"] > 1, out["sd"] / np.sqrt(out["n_seeds"]),
                                   np.nan)
    out["se"] = np.sqrt(out["se_seeds"] ** 2 + out["se_fit"].fillna(0.0) ** 2)
    out.loc[~np.isfinite(out["slope"]), ["se", "se_seeds", "se_fit"]] = np.nan
    return out.drop(columns="sd")[KEYS + ["kind", "slope", "se", "se_seeds", "se_fit",
                                          "n_seeds"]]


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


def judge(sl: pd.DataFrame, tol: float = TOLERANCE, margin: float = MARGIN) -> pd.DataFrame:
    """`sl` with `excess` and `status`: ok, borderline (outside by <= margin·se) or robust."""
    ex = excess(sl, tol)
    se = sl["se"].fillna(0.0)
    status = np.where(ex <= 0, "ok", np.where(ex > margin * se, "robust", "borderline"))
    return sl.assign(excess=ex, status=status)


def verdicts(sl: pd.DataFrame, tol: float = TOLERANCE, margin: float = MARGIN,
             worst: int = 3, seeds: list[int] | None = None) -> pd.DataFrame:
    """One row per parameterization: PASS/FAIL, the largest robust slope with its s.e., counts.

    FAIL when any slope is a robust violation. `largest` is the robust violation of largest
    |slope|; on a PASS, the slope nearest the band's edge (largest |slope|, counting only
    growth where shrinking is allowed).
    """
    judged = judge(sl, tol, margin)
    reach = _reach(judged)
    rows = []
    for param, g in judged.groupby("parameterization", sort=False):
        robust = g[g["status"] == "robust"]
        order = (robust["slope"].abs() if len(robust) else reach[g.index]).sort_values(
            ascending=False).index
        r = g.loc[order[0]]
        rows.append({
            "parameterization": param, "verdict": "FAIL" if len(robust) else "PASS",
            "largest": label(r), "slope": float(r["slope"]), "se": float(r["se"]),
            "robust": int(len(robust)), "borderline": int((g["status"] == "borderline").sum()),
            "checked": int(len(g)),
            "worst": "; ".join(f"{label(g.loc[i])} {_pm(g.loc[i])}" for i in order[:worst]
                               ) if len(robust) else "",
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
    layer = "" if r["layer"] < 0 else f"L{r['layer']}."
    return f"{'Δ' if r['kind'] == 'dh' else ''}{layer}{r['quantity']}@t{r['step']}"


def _pm(r) -> str:
    return f"{r['slope']:+.2f}" + ("" if np.isnan(r["se"]) else f"±{r['se']:.2f}")


def strict_failures(v: pd.DataFrame) -> list[str]:
    """Parameterizations that break expectations: a feature-learning one FAILs, or SP PASSes."""
    bad = []
    for r in v.itertuples():
        if r.parameterization in FEATURE_LEARNING and r.verdict == "FAIL":
            bad.append(f"{r.parameterization} FAILs")
        if r.parameterization == "sp" and r.verdict == "PASS":
            bad.append("sp PASSes")
    return bad


def verdict_text(judged: pd.DataFrame, v: pd.DataFrame, last_step: int,
                 tol: float = TOLERANCE, margin: float = MARGIN) -> str:
    """What `coord-check` prints: the slopes at the last step, what the verdict measures, and
    the verdict per parameterization."""
    return "\n".join([
        slope_table(judged, last_step), "",
        "verdict: per activation h and update Δh (each layer and step), the slope of log2 RMS "
        "against log2 width, flat when sizes",
        f"do not depend on width. FAIL: a slope outside ±{tol:g} by more than {margin:g} standard "
        "errors (seed spread + power-law fit);",
        f"borderline slopes are counted apart. sp is expected to FAIL. Read more: {DOCS}.",
        format_verdicts(v)])


def format_verdicts(v: pd.DataFrame) -> str:
    """The verdict table: largest robust slope (or largest of all on a PASS) ± its s.e."""
    t = v.assign(slope=[f"{a:+.2f} ± {b:.2f}" for a, b in zip(v["slope"], v["se"])],
                 **{"robust/borderline/checked": [f"{a} / {b} / {c}" for a, b, c in zip(
                     v["robust"], v["borderline"], v["checked"])]})
    cols = ["parameterization", "verdict", "largest", "slope", "robust/borderline/checked",
            "seeds"]
    return t[cols].to_string(index=False)


def slope_table(judged: pd.DataFrame, last_step: int) -> str:
    """Slopes at the last step, a row per quantity, a column per param x kind; `!` marks a
    robust violation and `?` a borderline one."""
    sub = judged[judged["step"] == last_step].copy()
    sub["quantity"] = [q if layer < 0 else f"L{layer}.{q}"
                       for layer, q in zip(sub["layer"], sub["quantity"])]
    mark = {"ok": "", "borderline": "?", "robust": "!"}
    sub["cell"] = [f"{x:+.2f}{mark[m]}" for x, m in zip(sub["slope"], sub["status"])]
    table = sub.pivot_table(index="quantity", columns=["parameterization", "kind"],
                            values="cell", aggfunc="first", sort=False)
    return (f"slopes of log2 RMS vs log2 width at step {last_step} (mean over seeds; "
            f"! robust violation, ? borderline):\n" + table.fillna("").to_string())
