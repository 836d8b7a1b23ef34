"""The sweep file and what it expands into, without running anything: the spec and its axes,
the cells (or adaptive groups) and their ids, the size guard, GPU packing, horizon planning
and the dry-run tables. Pure: no Ray, and no search strategy's code (mutransfer/sweep/search/
sits above it, mutransfer/sweep/run/ above both)."""
