"""Retraining intake: corpus drops in a landing folder -> validated, merged training corpora."""
