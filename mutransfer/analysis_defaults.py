"""Defaults of the analysis and of the coordinate check's verdict, with no heavy imports: the
CLI's option defaults and the sweep's transfer search read them here, so building the parser or
loading a sweep file does not import numpy or pandas (as the `mutransfer.analysis` package does).
What a coordinate check measures has its defaults in mutransfer/coord/settings.py."""

FIT_POINTS = 5      # LRs nearest the argmin in the quadratic fit
FIT_WINDOW = 2.5    # octaves: half-width of the window the optimum is fitted in
MIN_NOISE_DF = 2    # degrees of freedom a noise estimate needs before it carries an interval
COORD_TOLERANCE = 0.2  # coordinate check: largest |slope of log2 RMS vs log2 width| that passes
COORD_ALPHA = 0.05  # coordinate check: family-wise error rate of the violations (Holm, t test)
