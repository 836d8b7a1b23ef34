"""Search strategies behind one seam: which trials a sweep runs.

The seam is mutransfer/sweep/search/base.py (`SearchStrategy`, an abc.ABC); the registry,
keyed by `search.kind`, is mutransfer/sweep/search/registry.py (`strategy_for(kind)`). Shared
by the strategies: the families of a grid (families.py), the early-stopping rule
(stopping.py), the objective adaptive search minimizes (objective.py) and Ray Tune's
searcher base (searcher.py). Each strategy is whole in its own module or folder: grid.py,
optuna/, transfer/. Adding one: docs/search-strategies.md.
"""
