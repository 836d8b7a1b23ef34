"""Adaptive search with Optuna (`search.kind: optuna`): the strategy behind the seam
(strategy.py), each group's space and sampler (space.py) and Ray Tune's searcher over the
groups' studies (studies.py).

`import optuna` in these modules is the Optuna package (imports are absolute)."""
