"""Train a family from features already computed in the test (the stage graph in-process)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus, DatasetWriter
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.families.train import check_corpus, family_graph, featurize_in_process
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.model.xmc_model import XmcModel
from xmc_core.stages.graph import Held, InProcessRunner
from xmc_core.storage.artifacts import sha256_file
from xmc_core.storage.atomic import write_json

SMALL_CORPUS = SyntheticSpec(n_train=300, n_test=80, n_domains=2, topics_per_domain=3)
"""The families' tests' corpus: 300 train / 80 test documents on 6 topics (seconds to train)."""


def write_small_corpus(dest: Path) -> Path:
    """:data:`SMALL_CORPUS` written as a dataset folder at ``dest``."""
    write_synthetic_dataset(dest, SMALL_CORPUS, rows_per_group=150)
    return dest


def split_texts(dataset: Path, split: str = "test", n: int = 30) -> list[str | None]:
    """The first ``n`` texts of a dataset's split."""
    return Corpus(dataset).read_split(split, ["text"]).column("text").to_pylist()[:n]


@dataclass(frozen=True)
class Featurized:
    """What the featurize graph produces for one dataset."""

    vectorizer: TfidfVectorizer
    labels: LabelIndex
    label_features: LabelFeatures
    train: SplitFeatures
    test: SplitFeatures


def featurize(corpus: Corpus, cfg: XmcConfig) -> Featurized:
    out = featurize_in_process(corpus, cfg)
    return Featurized(
        out["vectorizer"], out["label_index"], out["label_features"], out["train"], out["test"]
    )


def train_outputs(feats: Featurized, cfg: XmcConfig, corpus: Corpus) -> dict[str, Any]:
    """The configured family's graph on ``feats``, in-process: every output object."""
    check_corpus(corpus, cfg)
    run = InProcessRunner(str(cfg.work_dir))
    given = {
        "vectorizer": feats.vectorizer, "label_index": feats.labels,
        "label_features": feats.label_features, "train": feats.train, "test": feats.test,
    }  # fmt: skip
    handles: dict[str, Any] = {k: Held(v, f"given-{k}-{id(v)}") for k, v in given.items()}
    handles["corpus"] = run.source(Corpus, str(corpus.path))
    out = family_graph(run, handles, cfg)
    return {
        k: [run.value(h) for h in v] if isinstance(v, list) else run.value(v)
        for k, v in out.items()
    }


def train_model(feats: Featurized, cfg: XmcConfig, corpus: Corpus) -> XmcModel:
    """The trained model of :func:`train_outputs`."""
    return train_outputs(feats, cfg, corpus)["model"]


def write_bow_dataset(dest: Path) -> Path:
    """A two-document bag-of-words dataset folder (4 features)."""
    feats = (np.array([3, 0], dtype=np.int32), np.array([0.5, 2.0], dtype=np.float32))
    with DatasetWriter(dest, kind="bow", source={"t": 1}, n_features=4) as ds:
        ds.split("train").add("d1", None, ["x"], "f", 1, features=feats)
        ds.close_split("train", "f")
        ds.split("test").add("t1", None, ["x"], "g", 1, features=feats)
        ds.close_split("test", "g")
    return dest


def reseal(folder: Path, changed: Path) -> None:
    """Rewrite the checksums that cover ``changed``, up to ``folder``'s ``meta.json``: the
    artifact is then consistent but wrong, as a buggy writer would leave it."""
    owner = changed.parent
    while True:
        meta_path = owner / "meta.json"
        meta = json.loads(meta_path.read_text())
        if changed.name in meta.get("files", {}):
            meta["files"][changed.name] = sha256_file(changed)
        elif changed.name in meta.get("parts", {}):
            meta["parts"][changed.name] = sha256_file(changed / "meta.json")
        write_json(meta_path, meta)
        if owner == folder:
            return
        changed, owner = owner, owner.parent
