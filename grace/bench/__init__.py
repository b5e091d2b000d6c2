"""The benchmark runner behind the paper's Figures 10 and 11: ``python -m grace.bench``.

Each (workload, mode) runs in its own worker process (:mod:`grace.bench.worker`), so modes
cannot share compiled state, and :mod:`grace.bench.runner` interleaves the workers' timed
iterations round by round, so clock and thermal drift hits every mode alike.
"""
