"""xmc: extreme multi-label text classification (XR-Transformer / XR-Linear), the pure library.

``from xmc_core import XmcClassifier``: fit / predict / evaluate from Python
(:mod:`xmc_core.model.estimator`, imported on first use).
"""

from typing import Any

from xmc_core.version import __version__

__all__ = ["XmcClassifier", "__version__"]


def __getattr__(name: str) -> Any:
    """``XmcClassifier`` on first use (it imports the numba kernels; ``import xmc_core`` not)."""
    if name == "XmcClassifier":
        from xmc_core.model.estimator import XmcClassifier

        return XmcClassifier
    raise AttributeError(f"module 'xmc_core' has no attribute {name!r}")
