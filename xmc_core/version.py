"""The version of xmc, recorded in every saved artifact and in the cache keys."""

__version__ = "0.1.0"
