"""Transfer search (`search.kind: transfer`): the decisions (decisions.py, pure), the
strategy behind the seam (strategy.py), Ray Tune's searcher (searcher.py) and the dry-run
table (listing.py)."""
