"""Evaluation: the metric, cost accounting, the harness, its workers and grids, and reports.

Every reasoner is measured the same way here (docs/metrics.md): same store, same
questions, same normalisation, empty answers counted as wrong.
"""
