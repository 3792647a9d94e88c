"""xmc: extreme multi-label text classification (XR-Transformer / XR-Linear), the pure library."""

__version__ = "0.1.0"
