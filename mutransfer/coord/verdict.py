"""Coordinate check, judging part: log-log slopes against width, their noise, and a verdict.

A parameterization that claims feature learning must keep the RMS of every activation h and
of its update Δh flat in width: |slope of log2 RMS against log2 width| <= tolerance, at every
step. One exception, as in the mup library's own checks: the logits only need to stay O(1) at
init, so for `logits` h may shrink (slope <= tolerance, no lower bound); their Δh must be flat.

Noise model: each seed (its own init and its own training batches) gives its own slope per
(layer, quantity, step, kind); the estimate is their mean (equal to the slope of the seeds'
geometric-mean RMS) and its standard error is their standard deviation / √seeds. A slope is a
*violation* only when it lies outside the tolerance by more than `margin` standard errors
(robust); one outside by less is *borderline*: reported, not counted. With one seed there is
no standard error and every slope outside the tolerance counts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.analysis.slopes import rowwise_slopes
from mutransfer.analysis_defaults import COORD_MARGIN_SE as MARGIN
from mutransfer.analysis_defaults import COORD_TOLERANCE as TOLERANCE

FEATURE_LEARNING = ("mup", "spectral", "mup_ssm")  # SP does not claim it
SHRINK_ALLOWED = ("logits",)
KEYS = ["parameterization", "layer", "quantity", "step"]


def seed_slopes(coord: pd.DataFrame) -> pd.DataFrame:
    """Slope of log2 RMS vs log2 width per (param, layer, quantity, step, kind, seed).

    A seed whose RMS is zero or non-finite at some width gets an infinite slope (it cannot be
    flat); Δh at step 0 (zero by definition) is not judged.
    """
    out = []
    for kind, col in (("h", "rms"), ("dh", "drms")):
        rows = coord if kind == "h" else coord[coord["step"] > 0]
        wide = rows.pivot_table(index=KEYS + ["seed"], columns="width", values=col,
                                aggfunc="first", sort=True)
        if wide.shape[1] < 2:
            continue
        x = np.log2(wide.columns.to_numpy(float))
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.log2(wide.to_numpy(float))
        s = rowwise_slopes(x, y)
        s[~np.isfinite(y).all(axis=1)] = np.inf
        out.append(wide.index.to_frame(index=False).assign(kind=kind, slope=s))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=KEYS + ["seed", "kind", "slope"])


def slopes(coord: pd.DataFrame) -> pd.DataFrame:
    """Mean slope over seeds, its standard error and the seed count, per (…, step, kind)."""
    per_seed = seed_slopes(coord)
    g = per_seed.groupby(KEYS + ["kind"], sort=True)["slope"]
    out = g.agg(slope="mean", sd="std", n_seeds="count").reset_index()
    with np.errstate(invalid="ignore"):
        out["se"] = np.where(out["n_seeds"] > 1, out["sd"] / np.sqrt(out["n_seeds"]), np.nan)
    out.loc[~np.isfinite(out["slope"]), "se"] = np.nan
    return out.drop(columns="sd")


def excess(sl: pd.DataFrame, tol: float = TOLERANCE) -> pd.Series:
    """How far each slope lies outside the allowed band (0 when inside)."""
    s = sl["slope"].to_numpy(float)
    one_sided = (sl["kind"] == "h").to_numpy() & sl["quantity"].isin(SHRINK_ALLOWED).to_numpy()
    with np.errstate(invalid="ignore"):
        out = np.where(one_sided, s - tol, np.abs(s) - tol)
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
    |slope| (on a PASS: the largest |slope| of all, for how close it came).
    """
    judged = judge(sl, tol, margin)
    rows = []
    for param, g in judged.groupby("parameterization", sort=False):
        robust = g[g["status"] == "robust"]
        pick = robust if len(robust) else g
        top = pick.loc[pick["slope"].abs().sort_values(ascending=False).index]
        r = top.iloc[0]
        rows.append({
            "parameterization": param, "verdict": "FAIL" if len(robust) else "PASS",
            "largest": label(r), "slope": float(r["slope"]), "se": float(r["se"]),
            "robust": int(len(robust)), "borderline": int((g["status"] == "borderline").sum()),
            "checked": int(len(g)),
            "worst": "; ".join(f"{label(x)} {_pm(x)}" for _, x in top.head(worst).iterrows()
                               ) if len(robust) else "",
            "seeds": " ".join(map(str, seeds)) if seeds else str(int(g["n_seeds"].max())),
        })
    return pd.DataFrame(rows)


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
