"""Evaluation: the metric, cost accounting, the harness and its reports.

Every reasoner is measured the same way here (docs/metrics.md): same store, same
questions, same normalisation, empty answers counted as wrong.
"""
