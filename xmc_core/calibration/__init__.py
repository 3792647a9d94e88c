"""Calibrated probabilities: monotone maps from a model's scores to the chance that a predicted
label is relevant, fitted on a validation carve of the training split, and the metrics that say
how well they hold (ECE@k, reliability bins, F1 at a threshold)."""
