"""A family that lives only in the tests: nearest label centroid on TF-IDF.

It proves the contract: one module, one entry point (``toy_centroid =
tests.model.toy_family:FAMILY`` in a distribution's ``xmc.families`` group, installed by
``tests/model/plugin_dist.py``), one config section (``plugins.toy_centroid``), and every
command (train, predict, serve, the flows, the pyfunc) takes it without a branch on its name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from pydantic import Field

from xmc_core.config import PredictConfig, Section, XmcConfig
from xmc_core.evaluation.ranking import top_k
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.model.contract import Family, label_counts
from xmc_core.model.xmc_model import TfidfEncoder, XmcModel
from xmc_core.stages.graph import Runner, Stage
from xmc_core.storage.artifacts import load_csr, meta_fields, read_meta, save_csr, write_meta

NAME = "toy_centroid"


class ToyConfig(Section):
    """The toy family's own section: ``plugins.toy_centroid`` in the config."""

    shrink: float = Field(0.0, ge=0, description="subtracted from every centroid weight")


class CentroidRanker:
    """Scores each label by the cosine of a document with the label's centroid."""

    def __init__(self, cfg: ToyConfig, predict: PredictConfig) -> None:
        self.cfg = cfg
        self.predict_cfg = predict

    @property
    def n_labels(self) -> int:
        return self.centroids_.shape[0]

    def fit(
        self, X: sp.csr_matrix, Y: sp.csr_matrix, index: Any = None, negatives: Any = None
    ) -> CentroidRanker:
        C = sp.csr_matrix(Y.T @ X, dtype=np.float32)
        C.data = np.maximum(C.data - self.cfg.shrink, 0)
        C.eliminate_zeros()
        norms = np.sqrt(np.asarray(C.multiply(C).sum(axis=1)).ravel())
        self.centroids_ = sp.csr_matrix(sp.diags(1 / np.maximum(norms, 1e-12)) @ C)
        return self

    def predict(
        self, X: sp.csr_matrix, beam_size: int | None = None, topk: int | None = None
    ) -> sp.csr_matrix:
        scores = sp.csr_matrix(X @ self.centroids_.T)
        best = top_k(scores, topk or self.predict_cfg.topk).indicator()
        return sp.csr_matrix(scores.multiply(best))

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_csr(folder / "centroids.npz", self.centroids_)
        fields = {
            "toy": self.cfg.model_dump(mode="json"),
            "predict": self.predict_cfg.model_dump(mode="json"),
        }
        write_meta(folder, "CentroidRanker", fields)

    @classmethod
    def load(cls, folder: str | Path) -> CentroidRanker:
        meta = read_meta(folder, "CentroidRanker")
        with meta_fields(Path(folder)):
            ranker = cls(ToyConfig(**meta["toy"]), PredictConfig(**meta["predict"]))
        ranker.centroids_ = load_csr(Path(folder) / "centroids.npz")
        return ranker


def fit_centroids(train: SplitFeatures, toy: ToyConfig, predict: PredictConfig) -> CentroidRanker:
    return CentroidRanker(toy, predict).fit(train.X, train.Y)


def assemble(
    vectorizer: TfidfVectorizer, labels: LabelIndex, ranker: CentroidRanker, train: SplitFeatures
) -> XmcModel:
    return XmcModel(
        NAME, vectorizer, labels, TfidfEncoder(), ranker, label_counts(train.Y), train.X.shape[0]
    )


CENTROIDS = Stage("toy-centroids", fit_centroids, CentroidRanker, {"train": SplitFeatures})
MODEL = Stage(
    "toy-model", assemble, XmcModel,
    {"vectorizer": TfidfVectorizer, "labels": LabelIndex, "ranker": CentroidRanker,
     "train": SplitFeatures},
)  # fmt: skip


def toy_config(cfg: XmcConfig) -> ToyConfig:
    section = cfg.plugin(NAME)
    assert isinstance(section, ToyConfig)
    return section


def graph(run: Runner, feats: dict[str, Any], cfg: XmcConfig) -> dict[str, Any]:
    ranker = run(CENTROIDS, train=feats["train"], toy=toy_config(cfg), predict=cfg.predict)
    model = run(
        MODEL, vectorizer=feats["vectorizer"], labels=feats["label_index"], ranker=ranker,
        train=feats["train"],
    )  # fmt: skip
    return {
        "model": model,
        "model_train": feats["train"], "model_test": feats["test"],
    }  # fmt: skip


FAMILY = Family(
    name=NAME,
    graph=graph,
    description="nearest label centroid (tests only)",
    section=ToyConfig,
    sections=("tokenizer", "tfidf", "predict", "eval"),
    parts={"CentroidRanker": "tests.model.toy_family:CentroidRanker"},
    contract_settings=("plugins.toy_centroid.shrink=0.01",),
)
