"""Design-space exploration: sweeps over run options and what-if chip specs, Pareto fronts,
and the sensitivity of a workload to each figure of a chip.

A sweep is a grid (grid.py) of points, each one `xpusim run`; points are costed in chunks on
a local process pool or on Ray (executor.py), streamed to a results file that lets an
interrupted sweep resume (store.py), and summarized by their Pareto fronts (pareto.py).
"""
