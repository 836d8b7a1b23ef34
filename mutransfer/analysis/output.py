"""The analysis as files (Parquet, CSV, Markdown) and as text for the terminal."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mutransfer.analysis import views
from mutransfer.analysis.core import Analysis
from mutransfer.analysis.sections import drift_section, header_lines, sections


def _parquet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding several Python types (an axis of numbers and "unset") become text,
    which Parquet can store; uniform columns keep their type."""
    out = df.copy()
    for col in out.columns:
        if not pd.api.types.is_object_dtype(out[col].dtype):
            continue
        kinds = {type(v) for v in out[col].dropna()}
        if len(kinds) > 1:
            out[col] = out[col].astype(str)
    return out


def write_table(df: pd.DataFrame, stem: Path) -> list[Path]:
    """`stem`.parquet and `stem`.csv (an empty table removes stale copies instead)."""
    paths = [stem.with_suffix(".parquet"), stem.with_suffix(".csv")]
    if df.empty:
        for p in paths:
            p.unlink(missing_ok=True)
        return []
    safe = _parquet_safe(df)
    pq.write_table(pa.Table.from_pandas(safe, preserve_index=False), paths[0])
    safe.to_csv(paths[1], index=False)
    return paths


def markdown(a: Analysis) -> str:
    parts = [f"# Transfer analysis: {a.name}", ""]
    parts += [f"- {line}" for line in header_lines(a)] + [""]
    for s in sections(a):
        parts += [f"## {s.title}", "", s.caption, ""]
        parts += [s.line if s.line else views.markdown_table(s.view), ""]
    return "\n".join(parts)


def write_analysis(analysis: Analysis, out_dir: str | Path) -> list[Path]:
    """Every table as Parquet and CSV, plus analysis.md, under `out_dir`; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for stem, df in analysis.tables().items():
        paths += write_table(df, out / stem)
    md = out / "analysis.md"
    md.write_text(markdown(analysis))
    return [*paths, md]


def summary_table(analysis: Analysis) -> str:
    """Compact text: best LR per width and parameterization, then drift per parameterization."""
    a = analysis
    lines = [f"optimal LR per width (95% interval from {a.n_boot} noise draws, noise: its "
             "source and df; edge: optimum on the grid edge, widen the LR range)",
             views.text_table(views.view_lr_opt(a, compact=True))]
    flagged = views.flagged_cells(a)
    if flagged:
        lines.append("LRs left out of lr* (some seeds diverged, or not run at that width):")
        lines += [f"  {line}" for line in flagged]
    drift = drift_section(a, compact=True)
    if drift.line:
        lines.append(drift.line)
    else:
        lines += ["drift: slope of log2 lr* against log2 width (transfer ~ 0)",
                  views.text_table(drift.view)]
    return "\n".join(lines)


def full_text(analysis: Analysis) -> str:
    """Every section as text, for `mutransfer analyze`."""
    parts = [*header_lines(analysis), ""]
    for s in sections(analysis):
        parts.append(s.title)
        parts.append(s.line if s.line else views.text_table(s.view))
        parts.append("")
    return "\n".join(parts).rstrip()
