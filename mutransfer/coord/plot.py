"""The coordinate-check figure: a row per parameterization, RMS against width per quantity."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def plot_coord(coord: pd.DataFrame, path: str | Path, verdicts: pd.DataFrame | None = None) -> Path:
    """Columns: h at init, h at the last step, Δh at the last step; a line per quantity."""
    params = list(dict.fromkeys(coord["parameterization"]))
    last = int(coord["step"].max())
    panels = [("rms", 0, "h at init"), ("rms", last, f"h after {last} steps"),
              ("drms", last, f"Δh after {last} steps")]
    quantities = list(dict.fromkeys(coord["quantity"]))
    colors = {q: plt.cm.tab20(i % 20) for i, q in enumerate(quantities)}
    fig, axes = plt.subplots(len(params), 3, figsize=(13, 3.2 * len(params)), squeeze=False)
    mean = coord.groupby(["parameterization", "step", "layer", "quantity", "width"],
                         as_index=False)[["rms", "drms"]].mean()
    verdict = {} if verdicts is None else dict(zip(verdicts.parameterization, verdicts.verdict))
    for i, param in enumerate(params):
        for j, (col, step, title) in enumerate(panels):
            ax = axes[i][j]
            sub = mean[(mean.parameterization == param) & (mean.step == step)]
            for (layer, q), g in sub.groupby(["layer", "quantity"]):
                g = g.sort_values("width")
                ax.plot(g["width"], g[col], marker="o", ms=3, color=colors[q],
                        ls="-" if layer <= 0 else "--", label=q if layer <= 0 else None)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{param} ({verdict.get(param, '')}): {title}", fontsize=9)
            ax.set_xlabel("width (d_model)")
            ax.set_ylabel("RMS per coordinate")
            ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8,
               title="quantity (solid: layer 0 / model, dashed: deeper layers)")
    fig.suptitle(f"Coordinate check ({coord['optimizer'].iloc[0]}): flat lines = width-stable",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 0.97))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
