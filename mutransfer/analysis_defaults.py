"""Defaults of the analysis and of the coordinate check's verdict, with no heavy imports: the
CLI's option defaults and the sweep's transfer search read them here, so building the parser or
loading a sweep file does not import numpy or pandas (as the `mutransfer.analysis` package does).
What a coordinate check measures has its defaults in mutransfer/coord/settings.py."""

N_BOOT = 1000       # bootstrap resamples of the seeds
BOOT_SEED = 0       # RNG seed of the bootstrap
FIT_POINTS = 5      # LRs nearest the argmin in the quadratic fit
MIN_NOISE_DF = 3    # degrees of freedom a noise estimate needs before it carries an interval
MIN_SEEDS_BOOT = 5  # seeds the seed bootstrap needs (126 distinct resamples; 2 seeds have 3)
COORD_TOLERANCE = 0.2  # coordinate check: largest |slope of log2 RMS vs log2 width| that passes
COORD_MARGIN_SE = 2.0  # a slope violates only when outside the tolerance by > this many s.e.
