"""Compile the numba kernels once, into numba's on-disk cache, so that no later process pays for
it: ``make install`` runs ``python -m xmc_core.app.compile_kernels`` after installing.

The kernels (label features, the label tree, the solver, beam search) are compiled on their
first call and cached beside their sources (``__pycache__``, or ``NUMBA_CACHE_DIR``). With an
empty cache, every process that starts before it is written compiles them itself, about a
minute of CPU each: the first ``make train`` (its Dask workers too), and, at the start of
``make test``, the test workers and every flow, CLI and Dask process they spawn. This trains a
tiny XR-Linear model on a synthetic corpus in a temporary folder and predicts with it, through
the default family's path, so the kernels are compiled with the types the pipeline passes them.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from xmc_core.corpus.synthetic_spec import SyntheticSpec

SPEC = SyntheticSpec(n_train=160, n_test=40, n_domains=2, topics_per_domain=2, labels_per_topic=6)
"""A corpus of 24 labels: a tree of several levels with the settings below."""
SETTINGS = ("tree.branching=2", "tree.max_leaf_size=2", "tracking.enabled=false")


def compile_kernels() -> float:
    """Train and predict the tiny model (the kernels compiled, or loaded from the cache);
    returns the wall seconds it took."""
    from xmc_core.config import XmcConfig
    from xmc_core.corpus import Corpus
    from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
    from xmc_core.families.train import train_in_process

    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="xmc-compile-") as tmp:
        write_synthetic_dataset(Path(tmp) / "corpus", SPEC, rows_per_group=100)
        corpus = Corpus(Path(tmp) / "corpus")
        cfg = XmcConfig.load(None, [f"work_dir={tmp}/work", *SETTINGS])
        outputs = train_in_process(corpus, cfg)
        texts = corpus.read_split("test", ["text"]).column("text").to_pylist()
        outputs["model"].predict(texts, topk=5)
    return time.perf_counter() - began


def main() -> int:
    seconds = compile_kernels()
    print(f"numba kernels compiled and cached ({seconds:.0f} s; a later process loads them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
