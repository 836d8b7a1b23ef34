"""report.html of `mutransfer check`: the verdict, the culprit, the slopes, the drift, and
links to the coordinate plot and the transfer search's own report."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd


def _table(df: pd.DataFrame) -> str:
    return df.to_html(index=False, border=0, float_format=lambda x: f"{x:+.3f}")


def write_report(out: Path, spec, v, judged: pd.DataFrame) -> Path:
    """Write OUT/report.html (self-contained but for the linked figures) and return its path."""
    from mutransfer.analysis.coordplot import plot_coord_check

    coord = pd.read_parquet(out / "coord.parquet").drop(columns="order")
    figure = ""
    try:
        png = plot_coord_check(coord, out / "coord_check.png")
        figure = f'<img src="{png.name}" style="max-width:100%">'
    except Exception as exc:  # the report must not depend on the figure
        figure = f"<p>(coordinate plot failed: {html.escape(str(exc))})</p>"
    last = int(judged["step"].max())
    params = judged[judged["test"] == "parameter"] if "test" in judged else judged.iloc[:0]
    acts = judged.drop(index=params.index)
    shown = acts[(acts["step"] == last) | (acts["status"] != "ok")]
    cols = ["layer", "quantity", "step", "kind", "slope", "se", "status"]
    pshown = params[(params["step"] <= 1) | (params["status"] != "ok")]
    pcols = ["quantity", "role", "kind", "step", "slope", "se", "expected", "status"]
    sweep_report = out / "sweep" / "analysis" / "report.html"
    link = ('<p>Transfer search: <a href="sweep/analysis/report.html">its report</a> '
            '(lr* per width, loss curves).</p>' if sweep_report.exists() else "")
    colour = {"PASS": "#1a7f37", "FAIL": "#cf222e", "INCONCLUSIVE": "#9a6700"}[v.verdict]
    advice = "".join(f"<li>{html.escape(a)}</li>" for a in v.advice)
    body = f"""<!doctype html><html><head><meta charset="utf-8">
<title>mutransfer check: {html.escape(spec.name)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}
td,th{{padding:2px 8px;text-align:right}}</style></head><body>
<h1>mutransfer check: {html.escape(spec.name)}</h1>
<p>{html.escape(str(spec.model.get('arch', 'mamba')))} under
{html.escape(str(spec.param.get('name', 'sp')))}, widths {spec.check.widths}</p>
<h2 style="color:{colour}">{v.verdict}</h2>
<p>{html.escape(v.reason)}</p><ul>{advice}</ul>
<p>lr* drift: {html.escape(v.drift_text())}; coordinate slopes: {v.robust} robust,
{v.borderline} borderline of {v.checked}.</p>
{link}
<h2>Coordinate check</h2>{figure}
<h3>Slopes of log2 RMS against log2 width (last step, and every non-ok one)</h3>
{_table(shown[cols])}
<h3>Parameter tensors: exponent of log2 init RMS (kind init) and of the relative update
‖ΔW‖/‖W‖ (update; a vector's, or a zero-init tensor's, update RMS) against log2 width,
and the rule's</h3>
{_table(pshown[pcols]) if len(pshown) else "<p>(none measured)</p>"}
</body></html>"""
    path = out / "report.html"
    path.write_text(body, encoding="utf-8")
    return path
