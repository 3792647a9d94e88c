"""The model families: each one module declaring its stages, its graph and its ``FAMILY``
(listed in :mod:`xmc_core.model.registry`); ``featurize`` is the graph every family starts
from."""
