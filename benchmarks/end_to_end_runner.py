"""One end-to-end run of one method, from the raw files of a ``lines`` dataset, in its own
process: read or ingest, featurize, train, featurize the test texts and predict, each step timed.

Usage (started by ``benchmarks/end_to_end.py``, with the interpreter that has the method)::

    python benchmarks/end_to_end_runner.py METHOD SRC OUTDIR

``METHOD`` is ``ours`` (the project venv) or ``pecos`` (the peers venv, libpecos). ``SRC`` is a
folder in the ``lines`` layout (``{split}_texts.txt``, ``{split}_labels.txt``, comma-separated
label names). Writes to ``OUTDIR``: ``pred.npz`` (csr (n_test, n_labels) of the top-``TOPK``
scores per test document, columns in the method's own label order), ``labels.json`` (the
label names of those columns) and ``result.json``: wall seconds of every step and stage and
their total, the CPU seconds of this process (all threads) in every step and their total, its
RSS after every step, and ``untimed_s``, the rest of the method's wall time: its imports.
Imports are not timed for either method; pandas is imported with ours (pyarrow would import it
on its first conversion, in the first step). The parent maps the columns to its label index by
name and computes every metric. Only numpy and scipy are imported at the top, so this file runs
in both environments.

Steps, named ``STAGE.step``; a stage's time is the sum of its steps (``STAGES``):

- ours: ``ingest.lines`` (``xmc ingest lines``: the validated Parquet dataset);
  ``featurize.count`` / ``.vocabulary`` / ``.label_index`` / ``.transform`` (the featurize
  graph's train side, one stage function per step, as ``xmc train`` runs it; ``.transform``
  also stacks the partitions); ``train.pifa`` / ``.tree`` / ``.fit`` / ``.assemble`` (PIFA by
  the pipeline's label-features stage, ``LabelTree.build``, ``XRLinearModel.fit``, the
  ``XmcModel``); ``predict.read_test`` / ``.featurize`` / ``.rank`` (the test texts from the
  dataset, then ``XmcModel.predict``'s body: the cap, TF-IDF, beam search).
- pecos: ``read.files`` (texts and label lists into Python lists, the train label matrix),
  ``featurize.vectorizer`` / ``.transform_train`` (``Vectorizer.train``, ``predict``),
  ``train.pifa`` / ``.tree`` / ``.fit`` (``LabelEmbeddingFactory.create``, ``Indexer.gen``,
  ``XLinearModel.train``), ``predict.featurize`` / ``.rank`` (``predict`` on the test texts,
  ``XLinearModel.predict``), all with their defaults but the TF-IDF settings below.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

TOPK = 20
SPLITS = ("train", "test")
STAGES = {"ours": ("ingest", "featurize", "train", "predict"),
          "pecos": ("read", "featurize", "train", "predict")}  # fmt: skip
PECOS_TFIDF = {
    "type": "tfidf",
    "kwargs": {
        "ngram_range": [1, 2],
        "max_feature": 200_000,
        "sublinear_tf": True,
        "norm": "l2",
        "smooth_idf": True,
        "add_one_idf": True,
    },
}
"""PECOS's C++ TF-IDF set as close to our default ``XmcConfig`` as it allows: word uni- and
bigrams, 200,000 features, ``1 + ln(tf)``, l2 rows, idf ``max(ln(n / (df + 1)), 0) + 1``
(``add_one_idf``; ours is ``ln((n + 1) / (df + 1)) + 1``). What stays different: PECOS splits
on spaces only and keeps case and punctuation (we lowercase and take runs of 2+ word
characters), and it keeps the features of highest document frequency (we: term frequency)."""


def rss_mb() -> float:
    """Resident set size of this process, in MiB (from /proc, no psutil needed)."""
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class Clock:
    """Wall seconds of named steps, in the order they ran, the CPU seconds of this process
    (every thread, user and system) in each, and its RSS in MiB after each."""

    def __init__(self) -> None:
        self.steps: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.rss: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the ``with`` block as step ``name`` (``STAGE.step``)."""
        t0, c0 = time.perf_counter(), time.process_time()
        yield
        self.steps[name] = time.perf_counter() - t0
        self.cpu[name] = time.process_time() - c0
        self.rss[name] = rss_mb()

    def stages(self, names: tuple[str, ...]) -> dict[str, float]:
        """Seconds per stage: the sum of its steps."""
        return {s: sum(v for k, v in self.steps.items() if k.split(".")[0] == s) for s in names}


# ---------------------------------------------------------------- ours (project venv)
def run_ours(src: Path, outdir: Path, clock: Clock) -> tuple[sp.csr_matrix, list[str]]:
    """Ingest, featurize, train XR-Linear with the default ``XmcConfig``, predict the test
    texts; returns the scores and the label names of their columns."""
    from xmc_core.config import XmcConfig
    from xmc_core.corpus import Corpus
    from xmc_core.corpus.importers import IngestOptions, ingest
    from xmc_core.corpus.schema import Policies

    with contextlib.suppress(ImportError):  # pyarrow imports it on its first conversion
        import pandas  # noqa: F401  (an import: untimed, as every method's imports)
    cfg = XmcConfig()
    with clock.step("ingest.lines"):
        options = IngestOptions(policies=Policies(on_unlabeled="keep"))
        ingest("lines", src, outdir / "corpus", options)
    corpus = Corpus(outdir / "corpus")
    feats = _ours_featurize(corpus, cfg, clock)
    model = _ours_train(feats, cfg, clock)
    with clock.step("predict.read_test"):
        texts = corpus.read_split("test", ["text"]).column("text")
    with clock.step("predict.featurize"):
        texts = model.capped(texts)
        X_test = model.features(model.vectorizer.transform(texts), texts)
    with clock.step("predict.rank"):
        pred = model.predict_features(X_test, topk=TOPK)
    return pred, model.labels.names.to_pylist()


def _ours_featurize(corpus: Any, cfg: Any, clock: Clock) -> dict[str, Any]:
    """The train side of the featurize graph (``families/featurize.py``), stage by stage:
    ``vectorizer``, ``index``, ``parts`` (the train partitions' ``SplitFeatures``) and
    ``train`` (them stacked)."""
    from xmc_core.features import stages
    from xmc_core.features.split_features import SplitFeatures

    refs = corpus.partitions("train")
    with clock.step("featurize.count"):
        counts = [stages.count_partition(corpus, ref, cfg.tokenizer) for ref in refs]
    with clock.step("featurize.vocabulary"):
        vectorizer = stages.fit_vectorizer(counts, cfg.tfidf, cfg.tokenizer)
    with clock.step("featurize.label_index"):
        index = stages.fit_label_index(corpus)
    with clock.step("featurize.transform"):
        parts = [
            stages.featurize_partition(corpus, ref, c, vectorizer, index)
            for ref, c in zip(refs, counts, strict=True)
        ]
        train = SplitFeatures.concat(parts)
    return {"vectorizer": vectorizer, "index": index, "parts": parts, "train": train}


def _ours_train(feats: dict[str, Any], cfg: Any, clock: Clock) -> Any:
    """PIFA, label tree, XR-Linear fit, the deployable ``XmcModel`` (as ``xr_linear.assemble``)."""
    from xmc_core.families.xr_linear import NAME
    from xmc_core.features import stages
    from xmc_core.linear.model import XRLinearModel
    from xmc_core.linear.tree import LabelTree
    from xmc_core.model.contract import label_counts
    from xmc_core.model.xmc_model import TfidfEncoder, XmcModel

    vectorizer, index, parts, train = (feats[k] for k in ("vectorizer", "index", "parts", "train"))
    with clock.step("train.pifa"):
        z = stages.build_label_features(parts, cfg.label_features, vectorizer, index, None)
    with clock.step("train.tree"):
        tree = LabelTree.build(z.z, cfg.tree)
    with clock.step("train.fit"):
        ranker = XRLinearModel(cfg.ranker, cfg.predict).fit(train.X, train.Y, tree)
    with clock.step("train.assemble"):
        counts = label_counts(train.Y)
        model = XmcModel(NAME, vectorizer, index, TfidfEncoder(), ranker, counts, train.X.shape[0])
    return model


# ---------------------------------------------------------------- pecos (peers venv)
def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 file as our importer reads them: split on ``\\n`` only (as PECOS's
    C++ file reader splits them too), without their ``\\n`` or ``\\r\\n``."""
    with open(path, encoding="utf-8", newline="\n") as fh:
        text = fh.read()
    lines = text.split("\n")
    lines = lines[:-1] if lines and lines[-1] == "" else lines
    if "\r\n" in text:
        lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    return lines


def label_lists(lines: list[str]) -> list[list[str]]:
    """Comma-separated label names per line: stripped, empty ones and repeats dropped."""
    return [list(dict.fromkeys(s for s in (x.strip() for x in ln.split(",")) if s)) for ln in lines]


def label_matrix(lists: list[list[str]], column: dict[str, int]) -> sp.csr_matrix:
    """csr (n_docs, len(column)) float32, 1 where a document has a label of ``column``."""
    rows = [[column[name] for name in names if name in column] for names in lists]
    indptr = np.cumsum([0, *map(len, rows)])
    indices = np.fromiter((c for r in rows for c in r), dtype=np.int32, count=indptr[-1])
    data = np.ones(len(indices), dtype=np.float32)
    Y = sp.csr_matrix((data, indices, indptr), shape=(len(rows), len(column)))
    Y.sort_indices()
    return Y


def run_pecos(src: Path, outdir: Path, clock: Clock) -> tuple[sp.csr_matrix, list[str]]:
    """PECOS's own pipeline on the raw files: its C++ TF-IDF (``PECOS_TFIDF``), PIFA,
    ``Indexer.gen``, ``XLinearModel`` with defaults (beam 10, top 20)."""
    from pecos.utils.featurization.text.vectorizers import Vectorizer
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    with clock.step("read.files"):
        texts = {s: read_lines(src / f"{s}_texts.txt") for s in SPLITS}
        labels = {s: label_lists(read_lines(src / f"{s}_labels.txt")) for s in SPLITS}
        names = sorted({name for names in labels["train"] for name in names})
        Y = label_matrix(labels["train"], {name: i for i, name in enumerate(names)})
    with clock.step("featurize.vectorizer"):
        vectorizer = Vectorizer.train(texts["train"], json.loads(json.dumps(PECOS_TFIDF)))
    with clock.step("featurize.transform_train"):
        X = vectorizer.predict(texts["train"])
    with clock.step("train.pifa"):
        Z = LabelEmbeddingFactory.create(Y, X, method="pifa")
    with clock.step("train.tree"):
        C = Indexer.gen(Z)
    with clock.step("train.fit"):
        model = XLinearModel.train(X, Y, C=C)
    with clock.step("predict.featurize"):
        X_test = vectorizer.predict(texts["test"])
    with clock.step("predict.rank"):
        pred = model.predict(X_test)
    return sp.csr_matrix(pred), names


METHODS = {"ours": run_ours, "pecos": run_pecos}


def main(argv: list[str]) -> int:
    """``METHOD SRC OUTDIR``: run, write ``pred.npz``, ``labels.json``, ``result.json``."""
    if len(argv) != 3 or argv[0] not in METHODS:
        print(f"usage: end_to_end_runner.py {{{','.join(METHODS)}}} SRC OUTDIR", file=sys.stderr)
        return 2
    method, src, outdir = argv[0], Path(argv[1]), Path(argv[2])
    outdir.mkdir(parents=True, exist_ok=True)
    clock = Clock()
    t0 = time.perf_counter()
    pred, names = METHODS[method](src, outdir, clock)
    wall = time.perf_counter() - t0
    stages = clock.stages(STAGES[method])
    sp.save_npz(outdir / "pred.npz", sp.csr_matrix(pred, dtype=np.float32), compressed=False)
    (outdir / "labels.json").write_text(json.dumps(names) + "\n", encoding="utf-8")
    result = {
        "method": method, "stages_s": stages, "steps_s": clock.steps, "steps_cpu_s": clock.cpu,
        "total_s": sum(stages.values()), "total_cpu_s": sum(clock.cpu.values()),
        "untimed_s": wall - sum(stages.values()), "rss_after_steps_mb": clock.rss,
        "n_test": pred.shape[0], "rss_end_mb": rss_mb(),
    }  # fmt: skip
    (outdir / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
