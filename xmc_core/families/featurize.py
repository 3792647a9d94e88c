"""The featurize graph, shared by every family: per-partition term counts, the TF-IDF
vocabulary, the label index, per-partition features, the label features and the stacked splits.

``xmc train`` runs it in-process and the ``featurize`` / ``train`` flows as cached tasks (one per
partition on Dask); see :mod:`xmc_core.stages.graph`.
"""

from __future__ import annotations

from typing import Any

from xmc_core.config import LabelFeaturesConfig, XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.schema import SPLITS
from xmc_core.families.warm import LABEL_INDEX_WARM, VOCABULARY_WARM, WarmHandles
from xmc_core.features import stages
from xmc_core.features.counts import TermCounts
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.model import registry
from xmc_core.stages.graph import Runner, Stage


def _label_features(
    parts: list[SplitFeatures],
    vectorizer: TfidfVectorizer,
    index: LabelIndex,
    corpus: Corpus | None,
    cfg: LabelFeaturesConfig,
    zero_shot: bool = False,
) -> LabelFeatures:
    """PIFA summed over the training partitions and/or label-text TF-IDF (``corpus``: given
    only when the label texts are used); ``zero_shot``: with the zero-shot labels' features."""
    texts = None if corpus is None else corpus.label_texts()
    return stages.build_label_features(parts, cfg, vectorizer, index, texts, zero_shot)


def zero_shot_on(cfg: XmcConfig, corpus: Corpus) -> bool:
    """Whether labels with a text but no training document join the model: asked for
    (``label_features.zero_shot``), possible for the family, and the corpus has label texts."""
    family = registry.family(cfg.model.kind)
    return cfg.label_features.zero_shot and family.zero_shot and corpus.manifest.has_label_texts


def _stack(parts: list[SplitFeatures], split: str) -> SplitFeatures:
    """A split's partitions stacked in corpus order (``split`` names it in the key)."""
    return SplitFeatures.concat(parts)


COUNT = Stage(
    "count", stages.count_partition, TermCounts, {"corpus": Corpus}, frozenset({"corpus"}),
    on_dask=True, describe=lambda c: f"{len(c.terms)} distinct terms",
)  # fmt: skip
VOCABULARY = Stage(
    "vocabulary", stages.fit_vectorizer, TfidfVectorizer, {"counts": TermCounts}, on_dask=True,
    describe=lambda v: f"{v.n_features} features from {v.n_docs_} documents",
)  # fmt: skip
LABEL_INDEX = Stage(
    "label-index", stages.fit_label_index, LabelIndex, {"corpus": Corpus}, on_dask=True,
    describe=lambda i: f"{len(i)} labels",
)  # fmt: skip
PARTITION = Stage(
    "partition", stages.featurize_partition, SplitFeatures,
    {"corpus": Corpus, "counts": TermCounts, "vectorizer": TfidfVectorizer, "index": LabelIndex},
    frozenset({"corpus"}), on_dask=True,
    describe=lambda p: f"{p.X.shape[0]} docs, {p.X.nnz} nonzeros",
)  # fmt: skip
LABEL_FEATURES = Stage(
    "label-features", _label_features, LabelFeatures,
    {"parts": SplitFeatures, "vectorizer": TfidfVectorizer, "index": LabelIndex,
     "corpus": Corpus},
    on_dask=True, describe=lambda z: f"{z.kind}: Z {z.z.shape}, {z.z.nnz} nonzeros",
)  # fmt: skip
SPLIT = Stage(
    "split", _stack, SplitFeatures, {"parts": SplitFeatures}, on_dask=True,
    describe=lambda s: (
        f"X {s.X.shape} ({s.X.nnz} nonzeros), Y {s.Y.shape}, {s.unknown_labels} label "
        "assignments outside the label index"
    ),
)  # fmt: skip


def featurize_graph(
    run: Runner, corpus: Any, cfg: XmcConfig, warm: WarmHandles | None = None
) -> dict[str, Any]:
    """Every featurization stage of the dataset behind handle ``corpus``; returns the handles
    ``vectorizer``, ``label_index``, ``label_features``, ``train``, ``test``. ``warm``: the
    champion a warm start extends the vocabulary and label index of (:mod:`.warm`)."""
    refs = {s: run.value(corpus).partitions(s) for s in SPLITS}
    names = {s: [f"{s}-{r.row_group}" for r in refs[s]] for s in SPLITS}
    counts = {
        s: run.map(
            COUNT, {"ref": refs[s]}, [f"count-{n}" for n in names[s]], corpus=corpus,
            cfg=cfg.tokenizer,
        )
        for s in SPLITS
    }  # fmt: skip
    settings = {"counts": counts["train"], "tfidf": cfg.tfidf, "tokenizer": cfg.tokenizer}
    zero = {"zero_shot": True} if zero_shot_on(cfg, run.value(corpus)) else {}
    texts = {"label_texts": True} if zero else {}
    if warm is None:
        vectorizer = run(VOCABULARY, label="fit-vocabulary", **settings)
        index = run(LABEL_INDEX, corpus=corpus, **texts)
    else:
        vectorizer = run(VOCABULARY_WARM, label="extend-vocabulary", base=warm.vectorizer,
                         **settings)  # fmt: skip
        index = run(LABEL_INDEX_WARM, label="extend-label-index", corpus=corpus,
                    base=warm.labels, **texts)  # fmt: skip
    parts = {
        s: run.map(
            PARTITION, {"ref": refs[s], "counts": counts[s]},
            [f"featurize-{n}" for n in names[s]], corpus=corpus, vectorizer=vectorizer,
            index=index,
        )
        for s in SPLITS
    }  # fmt: skip
    with_texts = None if cfg.label_features.kind == "pifa" and not zero else corpus
    z = run(
        LABEL_FEATURES, parts=parts["train"], vectorizer=vectorizer, index=index,
        corpus=with_texts, cfg=cfg.label_features, **zero,
    )  # fmt: skip
    splits = {s: run(SPLIT, label=f"assemble-{s}", parts=parts[s], split=s) for s in SPLITS}
    return {"vectorizer": vectorizer, "label_index": index, "label_features": z, **splits}
