"""The paper's Figures 10 and 11, drawn from a benchmark run's rows: ``python -m grace.report``.

Kept apart from :mod:`grace.bench` so that figures can be (re)drawn on any machine from
``results/raw/<experiment>/<run_id>/rows.jsonl`` alone: no GPU, no torch, only matplotlib.
See :mod:`grace.report.figures`.
"""
