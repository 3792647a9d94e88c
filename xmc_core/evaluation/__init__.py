"""Evaluation: ranking, metrics, diagnostics, plots and the run report."""
