"""The model families, one folder each (``<name>/``: its ``FAMILY`` and config section in
``__init__``, its stages and graph in ``graph.py``, its parts beside them), found through the
``xmc.families`` entry points (:mod:`xmc_core.model.registry`); and the frame every family
shares: ``featurize`` (the graph every family starts from), ``matrices`` (the same from feature
matrices), ``common`` (shared stages) and ``train`` (a whole training run in-process)."""
