"""Defaults of the analysis and of the coordinate check's verdict, with no heavy imports: the
CLI's option defaults and the sweep's transfer search read them here, so building the parser or
loading a sweep file does not import numpy or pandas (as the `mutransfer.analysis` package does).
What a coordinate check measures has its defaults in mutransfer/coord/settings.py."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

FIT_POINTS = 5      # LRs nearest the argmin in the quadratic fit
FIT_WINDOW = 2.5    # octaves: least half-width of the window the optimum is fitted in
MIN_NOISE_DF = 2    # degrees of freedom a noise estimate needs before it carries an interval
COORD_TOLERANCE = 0.2  # coordinate check: largest |slope of log2 RMS vs log2 width| that passes
# the config paths that set a trial's training tokens (the `tokens` scale axis)
TOKEN_SOURCES = ("train.steps", "train.tokens", "train.batch_size", "train.seq_len")
COORD_ALPHA = 0.05  # coordinate check: family-wise error rate of the violations (Holm, t test)
# LRs closer than this (relative) are one grid value to the analysis (analysis/groups.py), and
# so one LR to a sweep file (sweep/plan/axes.py refuses two such LRs in one list)
SAME_LR_RTOL = 1e-9


class AnalysisSection(BaseModel):
    """The `analysis:` section of a sweep file: what `mutransfer analyze` and `plot` report
    (mutransfer/analysis/choice.py; the command line's --target and --scale win). Here, below
    both the sweep file's model and the analysis, which reads it from the store's sweep.yaml."""

    model_config = ConfigDict(extra="forbid")

    target: str | None = Field(None, min_length=1, description=(
        "the hyperparameter whose optimum is found at each point of the scale axes: lr "
        "(default) or any swept numeric axis, e.g. param.overrides.ssm_B.lr_mult or "
        "train.weight_decay (fitted in log2 when every value is > 0, else linearly)"))
    scale: list[str] | None = Field(None, min_length=1, description=(
        "the scale axes (default: width, plus model.n_layer and tokens when the sweep varies "
        "them); each must vary; tokens = steps x batch_size x seq_len; the first is the x "
        "axis of the main tables"))
