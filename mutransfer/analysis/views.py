"""Human-readable views of the analysis tables (strings), rendered as text, Markdown or HTML.

The stored tables keep raw numbers; these views choose columns, round, and name the headers.
"""

from __future__ import annotations

import math

import pandas as pd

from mutransfer.analysis.core import Analysis

MISSING = "-"


def fmt_lr(x: float) -> str:
    return MISSING if not _finite(x) else f"{x:.2e}"


def fmt_loss(x: float) -> str:
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return MISSING if not _finite(x) else f"{x:.4f}"


def fmt_slope(x: float) -> str:
    return MISSING if not _finite(x) else f"{x:+.3f}"


def fmt_stderr(x: float) -> str:
    return MISSING if not _finite(x) else f"{x:.3f}"


def fmt_interval(lo: float, hi: float, fmt) -> str:
    if not (_finite(lo) and _finite(hi)):
        return MISSING
    return f"[{fmt(lo)}, {fmt(hi)}]"


def _finite(x: object) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _family(a: Analysis, df: pd.DataFrame) -> dict[str, list[str]]:
    return {c: [str(v) for v in df[c]] for c in a.family_cols}


def view_lr_opt(a: Analysis, compact: bool = False) -> pd.DataFrame:
    df = a.lr_opt
    out = {**_family(a, df), "width": df["width"].astype(str).tolist(),
           "lr*": [fmt_lr(v) for v in df["lr_opt"]],
           "95% interval": [fmt_interval(lo, hi, fmt_lr)
                            for lo, hi in zip(df["ci_low"], df["ci_high"])],
           "best loss": [fmt_loss(v) for v in df["best_loss"]],
           "edge": df["edge_side"].tolist()}
    if not compact:
        out.update({"fit": df["method"].tolist(), "argmin lr": [fmt_lr(v) for v in df["lr_argmin"]],
                    "LRs trained": df["n_lrs"].astype(str).tolist(),
                    "LRs diverged": df["n_lrs_diverged"].astype(str).tolist(),
                    "seeds": df["n_seeds"].astype(str).tolist(), "note": df["note"].tolist()})
    return pd.DataFrame(out)


def view_drift(a: Analysis) -> pd.DataFrame:
    df = a.drift
    return pd.DataFrame({
        **_family(a, df), "widths": df["widths"].tolist(),
        "slope": [fmt_slope(v) for v in df["slope"]],
        "95% interval": [fmt_interval(lo, hi, fmt_slope)
                         for lo, hi in zip(df["ci_low"], df["ci_high"])],
        "OLS s.e.": [fmt_stderr(v) for v in df["stderr"]],
        "note": df["note"].tolist()})


def view_stability(a: Analysis) -> pd.DataFrame:
    df = a.stability
    return pd.DataFrame({
        **_family(a, df), "width": df["width"].astype(str).tolist(),
        "largest trained": [fmt_lr(v) for v in df["largest_trained"]],
        "smallest diverged": [fmt_lr(v) for v in df["smallest_diverged"]],
        "boundary": [fmt_lr(v) for v in df["boundary"]],
        "note": df["note"].tolist()})


def view_stability_slope(a: Analysis) -> pd.DataFrame:
    df = a.stability_slope
    return pd.DataFrame({
        **_family(a, df), "widths": df["widths"].tolist(),
        "slope": [fmt_slope(v) for v in df["slope"]],
        "OLS s.e.": [fmt_stderr(v) for v in df["stderr"]],
        "note": df["note"].tolist()})


def view_regret(a: Analysis) -> pd.DataFrame:
    df = a.regret
    if df.empty:
        return df
    return pd.DataFrame({
        **_family(a, df), "width": df["width"].astype(str).tolist(),
        "lr used": [fmt_lr(v) for v in df["lr_used"]],
        "loss": [fmt_loss(v) for v in df["loss_used"]],
        "best lr": [fmt_lr(v) for v in df["best_lr"]],
        "best loss": [fmt_loss(v) for v in df["best_loss"]],
        "regret": [("diverged" if t == "diverged" else fmt_loss(r))
                   for r, t in zip(df["regret"], df["transfer"])]})


def view_monotonicity(a: Analysis) -> pd.DataFrame:
    df = a.monotonicity
    if df.empty:
        return df
    return pd.DataFrame({
        **_family(a, df), "widths": df["widths"].tolist(),
        "best loss per width": df["best_losses"].tolist(),
        "improves with width": [MISSING if n < 2 else "yes" if m else "no"
                                for m, n in zip(df["monotone"], df["n_widths"])],
        "worst step": df["worst_step"].tolist(), "note": df["note"].tolist()})


def text_table(df: pd.DataFrame, indent: str = "  ") -> str:
    """Left-aligned columns separated by two spaces; empty trailing columns trimmed."""
    cols = [c for c in df.columns if df[c].astype(str).str.len().any()]
    cells = [[str(c) for c in cols]] + [[str(v) for v in row] for row in df[cols].to_numpy()]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cols))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(indent + line for line in lines)


def markdown_table(df: pd.DataFrame) -> str:
    def esc(v: object) -> str:
        return str(v).replace("|", "\\|")

    head = "| " + " | ".join(esc(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(esc(v) for v in row) + " |" for row in df.to_numpy()]
    return "\n".join([head, rule, *body])
