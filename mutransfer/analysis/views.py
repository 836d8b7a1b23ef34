"""Human-readable views of the analysis tables (strings), which render.py lays out as text,
Markdown or HTML.

The stored tables keep raw numbers; these views choose columns, round, and name the headers.
"""

from __future__ import annotations

import math

import pandas as pd

from mutransfer.analysis.cells import NOT_RUN, PARTIAL
from mutransfer.analysis.core import Analysis
from mutransfer.analysis.groups import as_key, axis_values, compact_cells, family_label
from mutransfer.analysis.optimum import lr_ranges, lr_text

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
    """Three decimals, or the missing mark (the law's Birge ratio and misses)."""
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
    return _columns(a, df, a.family_cols)


def _columns(a: Analysis, df: pd.DataFrame, cols: list[str]) -> dict[str, list[str]]:
    """The family columns `cols` of `df` as text, headed by their names; a JSON object's
    value (a `param` axis of whole entries) by the entries that differ among the store's
    values (`depth=completep`; groups.compact_cells): the stored tables keep the whole."""
    names = a.column_names()
    texts = {c: compact_cells(v) for c, v in axis_values(a.cells, cols).items()}
    return {names.get(c, c): [texts.get(c, {}).get(v, str(v)) for v in df[c]] for c in cols}


def _w(a: Analysis) -> str:
    """The header of the width role: `width` unless another scale axis is first."""
    return a.scale_name("width")


def _t(a: Analysis) -> str:
    """How headers name the target: `lr`, or its name (`train.weight_decay`)."""
    return a.choice.target_label


def _ws(a: Analysis) -> str:
    """The header of a list of the width role's values: `widths`, or `model.n_layer values`."""
    return "widths" if _w(a) == "width" else f"{_w(a)} values"


def _shift(octaves: float, flag: bool, log: bool = True) -> str:
    """The most one LR moves lr* (octaves; a linear target's own units where not `log`), '!'
    where that exceeds the interval's half-width."""
    if not _finite(octaves):
        return MISSING
    return (f"{octaves:.2f}" if log else f"{octaves:.3g}") + (" !" if flag else "")


def _source(method: str, df: int) -> str:
    return f"{method}, df {int(df)}" if method else MISSING


def _stopped_column(df: pd.DataFrame) -> dict:
    """LRs stopped early (search.stop) per row, where any row has one (absent in stored
    tables of before)."""
    if "n_lrs_stopped" not in df or not (df["n_lrs_stopped"].fillna(0) > 0).any():
        return {}
    return {"stopped early": df["n_lrs_stopped"].fillna(0).astype(int).astype(str).tolist()}


def view_lr_opt(a: Analysis, compact: bool = False) -> pd.DataFrame:
    df = a.lr_opt
    out = {**_family(a, df), _w(a): df["width"].astype(str).tolist(),
           a.choice.opt_label: [fmt_lr(v) for v in df["lr_opt"]],
           "95% interval": [fmt_interval(lo, hi, fmt_lr)
                            for lo, hi in zip(df["ci_low"], df["ci_high"])],
           "from": [_source(m, d) for m, d in zip(df["ci_method"], df["ci_df"])],
           "best loss": [fmt_loss(v) for v in df["best_loss"]],
           "edge": df["edge_side"].tolist()}
    if not compact:
        out.update({
            "fit": df["method"].tolist(),
            "one-LR shift": [_shift(v, flag, a.choice.log)
                             for v, flag in zip(df["one_lr_shift"], df["one_lr_flag"])],
            f"argmin {a.choice.target_label}": [fmt_lr(v) for v in df["lr_argmin"]],
            f"{a.choice.target_label} values trained" if a.choice.target != "lr"
            else "LRs trained": df["n_lrs"].astype(str).tolist(),
            "partial": df["n_lrs_partial"].astype(str).tolist(),
            "diverged": df["n_lrs_diverged"].astype(str).tolist(),
            "not run": df["n_lrs_not_run"].astype(str).tolist(), **_stopped_column(df),
            "seeds": df["n_seeds"].astype(str).tolist(), "note": df["note"].tolist()})
    return pd.DataFrame(out)


def _ols(lo: float, hi: float, df: int) -> str:
    text = fmt_interval(lo, hi, fmt_slope)
    return MISSING if text == MISSING else f"{text} df {int(df)}"


def view_drift(a: Analysis, compact: bool = False) -> pd.DataFrame:
    df = a.drift
    out = {**_family(a, df), _ws(a): df["widths"].tolist(),
           "slope": [fmt_slope(v) for v in df["slope"]],
           "95% interval": [fmt_interval(lo, hi, fmt_slope)
                            for lo, hi in zip(df["ci_low"], df["ci_high"])]}
    if not compact:
        out["from"] = [_source(m, d) for m, d in zip(df["ci_method"], df["ci_df"])]
        out["OLS 95% (t)"] = [_ols(lo, hi, d)
                              for lo, hi, d in zip(df["ols_low"], df["ols_high"], df["df"])]
    out["note"] = df["note"].tolist()
    return pd.DataFrame(out)


def view_stability(a: Analysis) -> pd.DataFrame:
    df = a.stability
    return pd.DataFrame({
        **_family(a, df), _w(a): df["width"].astype(str).tolist(),
        "largest trained": [fmt_lr(v) for v in df["largest_trained"]],
        "first diverged (any seed)": [fmt_lr(v) for v in df["smallest_any_diverged"]],
        "boundary": [fmt_lr(v) for v in df["boundary"]],
        "first diverged (all seeds)": [fmt_lr(v) for v in df["smallest_all_diverged"]],
        "boundary (all seeds)": [fmt_lr(v) for v in df["boundary_all"]],
        "partial": df["n_lrs_partial"].astype(str).tolist(),
        "not run": df["n_lrs_not_run"].astype(str).tolist(),
        **_stopped_column(df),
        "unstable but trained from": [fmt_lr(v) for v in _col(df, "smallest_unstable")],
        "unstable LRs": [_count(v) for v in _col(df, "n_lrs_unstable")],
        "max excursion": [MISSING if not _finite(v) else f"{v:.2f}"
                          for v in _col(df, "max_excursion")],
        "note": df["note"].tolist()})


def _col(df: pd.DataFrame, name: str) -> list:
    """A column's values, NaN for each row when the table has no such column."""
    return df[name].tolist() if name in df else [math.nan] * len(df)


def _count(x: object) -> str:
    return MISSING if not _finite(x) else str(int(float(x)))


def view_stability_slope(a: Analysis) -> pd.DataFrame:
    df = a.stability_slope
    return pd.DataFrame({
        **_family(a, df), _ws(a): df["widths"].tolist(),
        "slope": [fmt_slope(v) for v in df["slope"]],
        "95% interval": [fmt_interval(lo, hi, fmt_slope)
                         for lo, hi in zip(_col(df, "ci_low"), _col(df, "ci_high"))],
        "lines through brackets": [fmt_interval(lo, hi, fmt_slope) for lo, hi in
                                   zip(_col(df, "feasible_low"), _col(df, "feasible_high"))],
        "scatter": [MISSING if not _finite(v) else f"{v:.2f}" for v in _col(df, "scatter")],
        "OLS 95% (t)": [_ols(lo, hi, d)
                        for lo, hi, d in zip(df["ols_low"], df["ols_high"], df["df"])],
        "slope (all seeds)": [fmt_slope(v) for v in df["slope_all"]],
        "note": df["note"].tolist()})


def view_regret(a: Analysis) -> pd.DataFrame:
    df = a.regret
    if df.empty:
        return df
    return pd.DataFrame({
        **_family(a, df), _w(a): df["width"].astype(str).tolist(),
        f"{_t(a)} used": [fmt_lr(v) for v in df["lr_used"]],
        f"{'octaves' if a.choice.log else 'distance'} from {a.choice.opt_label}":
            [MISSING if not _finite(v) else f"{v:.2f}" for v in df["lr_gap_log2"]],
        "loss": [fmt_loss(v) for v in df["loss_used"]],
        f"best {_t(a)}": [fmt_lr(v) for v in df["best_lr"]],
        "best loss": [fmt_loss(v) for v in df["best_loss"]],
        "regret": [fmt_loss(r) if t == "trained" else t
                   for r, t in zip(df["regret"], df["transfer"])],
        "note": df["note"].tolist()})


def view_monotonicity(a: Analysis) -> pd.DataFrame:
    df = a.monotonicity
    if df.empty:
        return df
    return pd.DataFrame({
        **_family(a, df), _ws(a): df["widths"].tolist(),
        f"best loss per {_w(a)}": df["best_losses"].tolist(),
        f"improves with {_w(a)}": [MISSING if n < 2 else "yes" if m else "no"
                                for m, n in zip(df["monotone"], df["n_widths"])],
        "worst step": df["worst_step"].tolist(), "note": df["note"].tolist()})


def flagged_cells(a: Analysis) -> list[str]:
    """One line per group with LRs left out of lr*: partially diverged, or not run there."""
    lines = []
    among = axis_values(a.cells, a.axes)  # the store's values: one label rule for every line
    # the cells' values are in the target's units by now: a linear one's 0.25 is no 2^-2
    text = lr_text if a.choice.log else (lambda v: f"{v:.3g}")
    for key, c in a.cells.groupby(a.group_cols, sort=True, dropna=False):
        key = as_key(key)
        c = c.sort_values("lr")
        lrs, status = c["lr"].to_numpy(), c["status"].to_numpy()
        stopped = c["stopped"].to_numpy(bool)
        masks = ((status == PARTIAL, "partially diverged"),
                 (stopped, "stopped early (search.stop)"),
                 ((status == NOT_RUN) & ~stopped, "not run"))
        parts = [f"{what} {lr_ranges(lrs, mask, text)}" for mask, what in masks if mask.any()]
        if parts:
            lines.append(f"{family_label(key[:-1], a.axes, among=among)}, {_w(a)} "
                         f"{key[-1]}: " + "; ".join(parts))
    return lines


def _pool(a: Analysis, df: pd.DataFrame) -> dict[str, list[str]]:
    return _columns(a, df, a.prepared.pool_cols)


def _others(a: Analysis, df: pd.DataFrame) -> list[str]:
    """Per row of a per-scale-axis table: the other scale axes' values, as text."""
    out = []
    for _, row in df.iterrows():
        parts = [f"{a.scale_name(c)}={int(row[c])}" for c in a.prepared.scale_cols
                 if a.scale_name(c) != row["scale"] and _finite(row[c])]
        out.append(", ".join(parts))
    return out


def view_scale_drift(a: Analysis) -> pd.DataFrame:
    df = a.scale_drift
    return pd.DataFrame({
        **_pool(a, df), "scale axis": df["scale"].tolist(), "at": _others(a, df),
        "values": df["points"].tolist(), "slope": [fmt_slope(v) for v in df["slope"]],
        "95% interval": [fmt_interval(lo, hi, fmt_slope)
                         for lo, hi in zip(df["ci_low"], df["ci_high"])],
        "from": [_source(m, d) for m, d in zip(df["ci_method"], df["ci_df"])],
        "note": df["note"].tolist()})


def view_scale_regret(a: Analysis) -> pd.DataFrame:
    df = a.scale_regret
    value = [int(row[next(c for c in a.prepared.scale_cols
                          if a.scale_name(c) == row["scale"])])
             for _, row in df.iterrows()]
    return pd.DataFrame({
        **_pool(a, df), "scale axis": df["scale"].tolist(), "at": _others(a, df),
        "value": [str(v) for v in value], "tuned at": df["tuned_at"].astype(str).tolist(),
        f"{a.choice.target_label} used": [fmt_lr(v) for v in df["lr_used"]],
        "loss": [fmt_loss(v) for v in df["loss_used"]],
        "best loss": [fmt_loss(v) for v in df["best_loss"]],
        "regret": [fmt_loss(r) if t == "trained" else t
                   for r, t in zip(df["regret"], df["transfer"])],
        "note": df["note"].tolist()})


def view_law(a: Analysis) -> pd.DataFrame:
    df = a.law.coef
    return pd.DataFrame({
        **_pool(a, df), "term": df["term"].tolist(), "points": df["n_points"].astype(str),
        "estimate": [fmt_slope(v) for v in df["estimate"]],
        "95% interval": [fmt_interval(lo, hi, fmt_slope)
                         for lo, hi in zip(df["ci_low"], df["ci_high"])],
        "df": df["df"].astype(str).tolist(),
        "Birge ratio": [fmt_stderr(v) for v in df["birge_ratio"]],
        "fit": df["method"].tolist(), "note": df["note"].tolist()})


def view_law_holdout(a: Analysis) -> pd.DataFrame:
    df = a.law.holdout
    return pd.DataFrame({
        **_pool(a, df), "held out": df["held_out"].tolist(),
        "fitted on": df["n_fit"].astype(str).tolist(),
        "predicted": df["n_held"].astype(str).tolist(),
        "miss": [fmt_slope(v) for v in df["miss"]],
        "95% interval": [fmt_interval(lo, hi, fmt_slope)
                         for lo, hi in zip(df["ci_low"], df["ci_high"])],
        "largest |miss|": [fmt_stderr(v) for v in df["max_abs_miss"]],
        "note": df["note"].tolist()})
