"""Coordinate check, judging part: log-log slopes against width and a PASS/FAIL verdict.

A parameterization that claims feature learning must keep the RMS of every activation h and
of its update Δh flat in width: |slope of log2 RMS against log2 width| <= tolerance, at every
step. One exception, as in the mup library's own checks: the logits only need to stay O(1) at
init, so for `logits` h may shrink (slope <= tolerance, no lower bound); their Δh must be flat.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.analysis.slopes import ols
from mutransfer.analysis_defaults import COORD_TOLERANCE as TOLERANCE

FEATURE_LEARNING = ("mup", "spectral", "mup_ssm")  # SP does not claim it
SHRINK_ALLOWED = ("logits",)


def slopes(coord: pd.DataFrame) -> pd.DataFrame:
    """Slope of log2 RMS (seed-averaged) vs log2 width per (param, layer, quantity, step, kind)."""
    keys = ["parameterization", "layer", "quantity", "step"]
    logs = coord.assign(rms=_log2(coord["rms"]), drms=_log2(coord["drms"]))
    # geometric mean over seeds: seed noise is multiplicative, and an arithmetic mean of
    # w^+a and w^-a noise would itself grow with width
    mean = logs.groupby(keys + ["width"], as_index=False)[["rms", "drms"]].mean()
    out = []
    for key, g in mean.groupby(keys):
        x = np.log2(g["width"].to_numpy(float))
        for kind, col in (("h", "rms"), ("dh", "drms")):
            y = g[col].to_numpy(float)
            if kind == "dh" and key[3] == 0:
                continue  # Δh is zero at init
            if len(x) < 2:
                slope = float("nan")
            elif not np.all(np.isfinite(y)):
                slope = float("inf")  # a zero or non-finite RMS: cannot be flat
            else:
                slope = ols(x, y).slope
            out.append(dict(zip(keys, key), kind=kind, slope=slope))
    return pd.DataFrame(out)


def _log2(values: pd.Series) -> np.ndarray:
    v = values.to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(v > 0, np.log2(v), np.nan)


def _violation(row, tol: float) -> float:
    """How far a slope is outside the allowed band (0 when inside)."""
    s = row["slope"]
    if not np.isfinite(s):
        return float("inf")
    if row["kind"] == "h" and row["quantity"] in SHRINK_ALLOWED:
        return max(0.0, s - tol)
    return max(0.0, abs(s) - tol)


def verdicts(sl: pd.DataFrame, tol: float = TOLERANCE, worst: int = 3) -> pd.DataFrame:
    """One row per parameterization: PASS/FAIL, the largest |slope|, the worst quantities."""
    sl = sl.assign(violation=sl.apply(_violation, axis=1, tol=tol))
    rows = []
    for param, g in sl.groupby("parameterization", sort=False):
        bad = g[g["violation"] > 0].sort_values("violation", ascending=False)
        names = [f"{_label(r)} {r.slope:+.2f}" for r in bad.head(worst).itertuples()]
        rows.append({"parameterization": param,
                     "verdict": "PASS" if bad.empty else "FAIL",
                     "max_abs_slope": float(g["slope"].abs().max()),
                     "n_violations": int(len(bad)), "n_checked": int(len(g)),
                     "worst": "; ".join(names)})
    return pd.DataFrame(rows)


def _label(r) -> str:
    layer = "" if r.layer < 0 else f"L{r.layer}."
    return f"{'Δ' if r.kind == 'dh' else ''}{layer}{r.quantity}@t{r.step}"


def strict_failures(v: pd.DataFrame) -> list[str]:
    """Parameterizations that break expectations: a feature-learning one FAILs, or SP PASSes."""
    bad = []
    for r in v.itertuples():
        if r.parameterization in FEATURE_LEARNING and r.verdict == "FAIL":
            bad.append(f"{r.parameterization} FAILs")
        if r.parameterization == "sp" and r.verdict == "PASS":
            bad.append("sp PASSes")
    return bad
