"""The small featurized dataset of the XR-Linear tests, shared with the model tests."""

from tests.linear.conftest import small_dataset, small_features

__all__ = ["small_dataset", "small_features"]
