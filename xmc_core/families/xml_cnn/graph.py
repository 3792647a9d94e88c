"""XML-CNN (Liu et al. 2017): word ids of the first ``max_length`` words -> a CNN with dynamic
max pooling and a bottleneck, trained with binary cross-entropy (:mod:`xmc_core.families.xml_cnn`).

Two placements (``xml_cnn.placement``; ``auto``: flat up to ``flat_max_labels`` labels):

- ``flat``, the paper's: one sigmoid output per label. The model's encoder is the CNN up to its
  bottleneck, its ranker the output layer
  (:class:`~xmc_core.families.xml_cnn.parts.CnnOutputRanker`).
- ``xr``: the CNN is the matcher of an XR tree, trained on the clusters of the tree level with
  at most ``xr_max_clusters`` nodes; XR-Linear ranks on ``[TF-IDF, weight * unit CNN
  features]`` over a tree refined on PIFA(TF-IDF) ⊕ PIFA(CNN features), with the CNN's top
  ``beam_size`` clusters as matcher-aware negatives, as in XR-Transformer.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xmc_core.config import PredictConfig, RankerConfig, TokenizerConfig, XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.schema import SPLITS
from xmc_core.evaluation.ranking import top_k_dense
from xmc_core.families.common import TREE, level_ranker, ranker_levels
from xmc_core.families.xml_cnn import NAME
from xmc_core.families.xml_cnn.checkpoint import CnnCheckpoint
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.families.xml_cnn.embeddings import WordVectors, initial_embeddings
from xmc_core.families.xml_cnn.network import encode
from xmc_core.families.xml_cnn.parts import CnnFeatures, CnnOutputRanker, unit_rows
from xmc_core.families.xml_cnn.trainer import train_network
from xmc_core.families.xml_cnn.vocab import Vocabulary, partition_ids, vocabulary
from xmc_core.families.xr_transformer.graph import RANKER_FEATURES, TOKENS_SPLIT
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.linear.model import LevelRankers
from xmc_core.linear.negatives import MatcherShortlists
from xmc_core.linear.tree import LabelTree
from xmc_core.model.contract import label_counts
from xmc_core.model.xmc_model import XmcModel
from xmc_core.neural import resolve_device, torch_threads
from xmc_core.stages.graph import Runner, Stage
from xmc_core.transformer.ranker import EmbeddedSplit, concat_features, matcher_parent_shortlists
from xmc_core.transformer.tokens import TokenizedTexts

log = logging.getLogger(__name__)


def placement(cfg: XmlCnnConfig, n_labels: int) -> tuple[str, str]:
    """(``flat`` or ``xr``, why) for a corpus of ``n_labels`` labels."""
    if cfg.placement != "auto":
        return cfg.placement, f"xml_cnn.placement={cfg.placement}"
    limit = f"xml_cnn.flat_max_labels={cfg.flat_max_labels:,}"
    if n_labels <= cfg.flat_max_labels:
        return "flat", f"{n_labels:,} labels <= {limit}: one output per label"
    return "xr", f"{n_labels:,} labels > {limit}: the CNN is the matcher of an XR tree"


def cluster_level(tree: LabelTree, max_clusters: int) -> int:
    """The finest tree level with at most ``max_clusters`` nodes (none: the coarsest)."""
    fitting = [t for t, k in enumerate(tree.level_sizes()) if k <= max_clusters]
    return fitting[-1] if fitting else 0


def cluster_targets(Y: sp.csr_matrix, tree: LabelTree, level: int) -> sp.csr_matrix:
    """Binary csr (n, K) of the level's clusters holding each document's labels."""
    of = tree.label_to_cluster(level)
    K = tree.level_sizes()[level]
    A = sp.csr_matrix((np.ones(len(of), np.float32), (np.arange(len(of)), of)), (len(of), K))
    Yc = sp.csr_matrix(sp.csr_matrix(Y, dtype=np.float32) @ A)
    Yc.data[:] = 1.0
    return Yc


def word_vectors(vocab: Vocabulary, corpus: Corpus, xml_cnn: XmlCnnConfig) -> WordVectors:
    """The initial embeddings of the vocabulary (``corpus``: from the training texts)."""
    texts = None
    if xml_cnn.embedding_init == "corpus":
        texts = corpus.read_split("train", ["text"]).column("text").to_pylist()
    return WordVectors(initial_embeddings(vocab.words, xml_cnn, texts, vocab.tokenizer))


def train_cnn(
    tokens: TokenizedTexts, train: SplitFeatures, init: WordVectors, tree: LabelTree | None,
    xml_cnn: XmlCnnConfig, out: Path,
) -> None:  # fmt: skip
    """Train the CNN on the labels (``tree`` None: flat) or on the clusters of the tree level
    with at most ``xr_max_clusters`` nodes; writes its checkpoint into ``out``."""
    Y = train.Y
    if tree is not None:
        level = cluster_level(tree, xml_cnn.xr_max_clusters)
        log.info("%s: trained on tree level %d (%s clusters)", NAME, level,
                 f"{tree.level_sizes()[level]:,}")  # fmt: skip
        Y = cluster_targets(Y, tree, level)
    train_network(tokens, Y, init.vectors, xml_cnn, out)


def features(
    checkpoint: CnnCheckpoint, vocab: Vocabulary, mode: str, device: str = "auto"
) -> CnnFeatures:
    """The trained CNN as the model's encoder."""
    cfg = checkpoint.cfg
    return CnnFeatures(vocab, cfg, checkpoint.network(), mode, cfg.embedding_weight, device)  # type: ignore[arg-type]


def hidden(checkpoint: CnnCheckpoint, tokens: TokenizedTexts, logits: bool = False) -> np.ndarray:
    """The network's features (``logits``: outputs) float32 of tokenized documents."""
    cfg = checkpoint.cfg
    net = checkpoint.network()
    device = resolve_device(cfg.device)
    with torch_threads(cfg.threads):
        return encode(
            net.to(device), tokens.input_ids, tokens.lengths, cfg.eval_batch_size, device, logits
        )


def encode_split(
    split: SplitFeatures, tokens: TokenizedTexts, checkpoint: CnnCheckpoint, mode: str,
    name: str,
) -> EmbeddedSplit:  # fmt: skip
    """A split as the model's input: ``hidden`` (flat) X = the CNN features; ``concat`` (xr)
    X = ``[X_tfidf, weight * unit features]``; E: the unit features (``name``: the split)."""
    E = unit_rows(H := hidden(checkpoint, tokens))
    X = sp.csr_matrix(H) if mode == "hidden" else (
        concat_features(split.X, E, checkpoint.cfg.embedding_weight)
    )  # fmt: skip
    return EmbeddedSplit(X, split.Y, split.doc_ids, split.unknown_labels, E)


def shortlists(
    checkpoint: CnnCheckpoint, tokens: TokenizedTexts, matcher_tree: LabelTree,
    ranker_tree: LabelTree,
) -> MatcherShortlists:  # fmt: skip
    """The CNN's top ``beam_size`` clusters of every training document, as the extra parents
    of each ranker level."""
    cfg = checkpoint.cfg
    scores = hidden(checkpoint, tokens, logits=True)
    cols, _ = top_k_dense(scores, cfg.beam_size)
    n, k = cols.shape
    P = sp.csr_matrix(
        (np.ones(n * k, np.float32), cols.ravel(), np.arange(0, n * k + 1, k)), scores.shape
    )
    level = cluster_level(matcher_tree, cfg.xr_max_clusters)
    extra = matcher_parent_shortlists(P, matcher_tree, level, ranker_tree, cfg.beam_size)
    return MatcherShortlists(extra, level)


def assemble_flat(
    vectorizer: TfidfVectorizer, labels: LabelIndex, checkpoint: CnnCheckpoint,
    vocab: Vocabulary, train: SplitFeatures, predict: PredictConfig,
) -> XmcModel:  # fmt: skip
    """Vectorizer + labels + the CNN (encoder) + its output layer (ranker)."""
    encoder = features(checkpoint, vocab, "hidden")
    ranker = CnnOutputRanker(checkpoint.cfg, predict).set_output(*encoder.net.output_arrays())
    n = train.X.shape[0]
    return XmcModel(NAME, vectorizer, labels, encoder, ranker, label_counts(train.Y), n)


def assemble_xr(
    vectorizer: TfidfVectorizer, labels: LabelIndex, tree: LabelTree, levels: list[LevelRankers],
    train: SplitFeatures, checkpoint: CnnCheckpoint, vocab: Vocabulary, ranker: RankerConfig,
    predict: PredictConfig,
) -> XmcModel:  # fmt: skip
    """Vectorizer + labels + the CNN (encoder of ``[TF-IDF, CNN]``) + XR-Linear's levels."""
    model = level_ranker(tree, levels, train, ranker, predict)
    encoder = features(checkpoint, vocab, "concat")
    n = train.X.shape[0]
    return XmcModel(NAME, vectorizer, labels, encoder, model, label_counts(train.Y), n)


VOCAB = Stage(
    "cnn-vocabulary", vocabulary, Vocabulary, {"corpus": Corpus},
    describe=lambda v: f"{len(v):,} words, documents cut to {v.max_length} words",
)  # fmt: skip
WORD_IDS = Stage(
    "cnn-word-ids", partition_ids, TokenizedTexts, {"corpus": Corpus, "vocab": Vocabulary},
    frozenset({"corpus"}), on_dask=True,
    describe=lambda t: f"{t.n_docs} docs, mean length {float(t.lengths.mean()):.1f} words",
)  # fmt: skip
INIT = Stage(
    "cnn-word-vectors", word_vectors, WordVectors, {"vocab": Vocabulary, "corpus": Corpus},
    describe=lambda w: f"initial embeddings {w.vectors.shape}",
)  # fmt: skip
TRAIN = Stage(
    "cnn-network", train_cnn, CnnCheckpoint,
    {"tokens": TokenizedTexts, "train": SplitFeatures, "init": WordVectors, "tree": LabelTree},
    writes_folder=True, describe=lambda c: c.describe(),
)  # fmt: skip
ENCODE = Stage(
    "cnn-encoded", encode_split, EmbeddedSplit,
    {"split": SplitFeatures, "tokens": TokenizedTexts, "checkpoint": CnnCheckpoint},
    describe=lambda s: f"X {s.X.shape}",
)  # fmt: skip
SHORTLISTS = Stage(
    "cnn-shortlists", shortlists, MatcherShortlists,
    {"checkpoint": CnnCheckpoint, "tokens": TokenizedTexts, "matcher_tree": LabelTree,
     "ranker_tree": LabelTree},
    describe=lambda s: f"(doc, parent) pairs per ranker level "
    f"{[0 if m is None else m.nnz for m in s.levels]}",
)  # fmt: skip
MODEL_FLAT = Stage(
    "cnn-flat-model", assemble_flat, XmcModel,
    {"vectorizer": TfidfVectorizer, "labels": LabelIndex, "checkpoint": CnnCheckpoint,
     "vocab": Vocabulary, "train": SplitFeatures},
    describe=lambda m: f"{len(m.labels)} labels, flat",
)  # fmt: skip
MODEL_XR = Stage(
    "cnn-xr-model", assemble_xr, XmcModel,
    {"vectorizer": TfidfVectorizer, "labels": LabelIndex, "tree": LabelTree,
     "levels": LevelRankers, "train": SplitFeatures, "checkpoint": CnnCheckpoint,
     "vocab": Vocabulary},
    describe=lambda m: f"{len(m.labels)} labels, tree {m.ranker.tree_.level_sizes()}",
)  # fmt: skip


def word_ids(run: Runner, corpus: Any, vocab: Any) -> dict[str, Any]:
    """Each split's word ids: one task per partition, then stacked."""
    refs = {s: run.value(corpus).partitions(s) for s in SPLITS}
    parts = {
        s: run.map(
            WORD_IDS, {"ref": refs[s]}, [f"word-ids-{s}-{r.row_group}" for r in refs[s]],
            corpus=corpus, vocab=vocab,
        )
        for s in SPLITS
    }  # fmt: skip
    return {
        s: run(TOKENS_SPLIT, label=f"assemble-word-ids-{s}", parts=parts[s], split=s)
        for s in SPLITS
    }


def graph(run: Runner, feats: dict[str, Any], cfg: XmcConfig) -> dict[str, Any]:
    """Vocabulary, word ids, initial embeddings, then the flat or the xr placement."""
    c, corpus = cfg.xml_cnn, feats["corpus"]
    tok: TokenizerConfig = cfg.tokenizer
    vocab = run(
        VOCAB, corpus=corpus, tokenizer=tok, vocab_size=c.vocab_size, min_count=c.min_count,
        max_length=c.max_length,
    )  # fmt: skip
    tokens = word_ids(run, corpus, vocab)
    init = run(INIT, vocab=vocab, corpus=corpus, xml_cnn=c)
    where, why = placement(c, len(run.value(feats["label_index"])))
    log.info("%s: placement %s (%s)", NAME, where, why)
    place = flat_graph if where == "flat" else xr_graph
    out = place(run, feats, cfg, vocab, tokens, init)
    return {"vocabulary": vocab, "tokens_train": tokens["train"], **out}


def flat_graph(
    run: Runner, feats: dict[str, Any], cfg: XmcConfig, vocab: Any, tokens: dict[str, Any],
    init: Any,
) -> dict[str, Any]:  # fmt: skip
    """The paper's XML-CNN: one output per label."""
    network = run(
        TRAIN, label="cnn-network", tokens=tokens["train"], train=feats["train"], init=init,
        tree=None, xml_cnn=cfg.xml_cnn,
    )  # fmt: skip
    encoded = {
        s: run(ENCODE, label=f"cnn-encode-{s}", split=feats[s], tokens=tokens[s],
               checkpoint=network, mode="hidden", name=s)
        for s in SPLITS
    }  # fmt: skip
    model = run(
        MODEL_FLAT, label="assemble-model", vectorizer=feats["vectorizer"],
        labels=feats["label_index"], checkpoint=network, vocab=vocab, train=feats["train"],
        predict=cfg.predict,
    )  # fmt: skip
    return {
        "network": network, "model": model,
        "model_train": encoded["train"], "model_test": encoded["test"],
    }  # fmt: skip


def xr_graph(
    run: Runner, feats: dict[str, Any], cfg: XmcConfig, vocab: Any, tokens: dict[str, Any],
    init: Any,
) -> dict[str, Any]:  # fmt: skip
    """The CNN as the matcher of an XR tree, XR-Linear on ``[TF-IDF, CNN]`` on top."""
    matcher_tree = run(
        TREE, label="matcher-tree", label_features=feats["label_features"], cfg=cfg.tree
    )
    network = run(
        TRAIN, label="cnn-network", tokens=tokens["train"], train=feats["train"], init=init,
        tree=matcher_tree, xml_cnn=cfg.xml_cnn,
    )  # fmt: skip
    embedded = {
        s: run(ENCODE, label=f"cnn-encode-{s}", split=feats[s], tokens=tokens[s],
               checkpoint=network, mode="concat", name=s)
        for s in SPLITS
    }  # fmt: skip
    z = run(RANKER_FEATURES, train=feats["train"], embedded=embedded["train"])
    tree = run(TREE, label="ranker-tree", label_features=z, cfg=cfg.tree)
    extra = run(
        SHORTLISTS, label="cnn-shortlists", checkpoint=network, tokens=tokens["train"],
        matcher_tree=matcher_tree, ranker_tree=tree,
    )  # fmt: skip
    levels = ranker_levels(run, embedded["train"], tree, cfg, extra, prefix="ranker")
    model = run(
        MODEL_XR, label="assemble-model", vectorizer=feats["vectorizer"],
        labels=feats["label_index"], tree=tree, levels=levels, train=embedded["train"],
        checkpoint=network, vocab=vocab, ranker=cfg.ranker, predict=cfg.predict,
    )  # fmt: skip
    return {
        "matcher_tree": matcher_tree, "network": network, "tree": tree, "model": model,
        "model_train": embedded["train"],
        "model_test": embedded["test"],
    }  # fmt: skip
