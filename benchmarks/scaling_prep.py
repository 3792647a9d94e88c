"""One preparation step of the scaling benchmark, in its own process (so that its peak RSS is
sampled alone): write a synthetic corpus, or featurize it into the shared features.

Usage (started by ``benchmarks/scaling.py``, with the project venv)::

    python benchmarks/scaling_prep.py generate SPEC_JSON DATASET_DIR RESULT_JSON
    python benchmarks/scaling_prep.py featurize DATASET_DIR WORKDIR RESULT_JSON

``generate`` builds the world of the ``SyntheticSpec`` given as JSON (timed: ``world_s``), then
writes both splits and the label texts as a dataset folder (``write_s``; ``docs_per_s`` counts
train and test documents). ``featurize`` runs our featurization with the default config on that
folder and writes ``{X,Y}_{train,test}.npz`` and ``labels.json`` to ``WORKDIR``
(``bench_common.write_features``, timed: ``featurize_s``, after PIFA's numba kernels are
compiled or loaded from numba's cache). Each writes its figures to
``RESULT_JSON`` (through a temporary name) and logs its progress (the dataset writer's and the
featurize stages' lines).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from bench_common import write_features  # benchmarks/ (the script's folder) is on sys.path

from xmc_core.corpus import synthetic_batch
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.features.pifa import concat_label_features, pifa, pifa_partial

STEPS = ("generate", "featurize")


def generate(spec_json: Path, dest: Path) -> dict[str, Any]:
    """Write the corpus of the spec in ``spec_json`` to ``dest``; timings and label counts."""
    spec = SyntheticSpec(**json.loads(spec_json.read_text(encoding="utf-8")))
    t0 = time.perf_counter()
    if spec.vectorized:
        synthetic_batch.build_world(spec)  # cached: the writer reuses it
    world_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    manifest = write_synthetic_dataset(dest, spec)
    write_s = time.perf_counter() - t1
    n_docs = spec.n_train + spec.n_test
    return {
        "world_s": world_s,
        "write_s": write_s,
        "docs_per_s": n_docs / write_s,
        "spec_labels": spec.n_labels,
        "train_labels": manifest.n_labels,
        "label_assignments_train": manifest.splits["train"].label_assignments,
        "unseen_test_labels": manifest.unseen_test_labels,
        "dataset_mb": sum(f.stat().st_size for f in dest.rglob("*") if f.is_file()) / 2**20,
    }


def warm_numba() -> None:
    """Compile PIFA's numba kernels (or load them from numba's on-disk cache) on a 2x2 problem,
    so that ``featurize_s`` never includes a first compilation (as the ``ours`` runner's
    warm-up does for training)."""
    x = sp.csr_matrix(np.array([[1.0, 0.0], [0.5, 2.0]], dtype=np.float32))
    concat_label_features([pifa([pifa_partial(x, sp.identity(2, format="csr"))])], [1.0])


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """``data`` as JSON at ``path``, through a temporary name in the same folder."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    """``generate SPEC_JSON DATASET_DIR RESULT_JSON`` or ``featurize DATASET_DIR WORKDIR
    RESULT_JSON``."""
    if len(argv) != 4 or argv[0] not in STEPS:
        print(f"usage: scaling_prep.py {{{','.join(STEPS)}}} IN OUT RESULT_JSON", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    step, src, dest, result_path = argv[0], Path(argv[1]), Path(argv[2]), Path(argv[3])
    if step == "generate":
        result = generate(src, dest)
    else:
        dest.mkdir(parents=True, exist_ok=True)
        warm_numba()
        result = write_features(src, dest, check_pifa=False)
    write_json_atomically(result_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
