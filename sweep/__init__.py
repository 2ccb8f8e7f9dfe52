"""``pyard sweep``: design-space sweeps (array shape, dtype, cores, memories) over workloads, cached
per point, run serially or on Dask, with a results table, plots and a Markdown report (docs/sweep.md)."""
