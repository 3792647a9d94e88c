"""XR-Transformer (Zhang et al. 2021): a transformer matcher fine-tuned coarse to fine over a
label tree (one resumable checkpoint per level), then XR-Linear on ``[TF-IDF, weight *
embedding]`` over a tree refined on the concatenated label features, with the matcher's top
clusters as extra (matcher-aware) negatives. Its encoder is the fine-tuned transformer."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xmc_core.config import EncoderConfig, MatcherConfig, PredictConfig, RankerConfig, XmcConfig
from xmc_core.corpus import Corpus, PartitionRef
from xmc_core.corpus.schema import SPLITS
from xmc_core.families.common import TREE, ZERO_SHOT, level_ranker, ranker_levels
from xmc_core.families.warm import TREE_WARM, WarmHandles, start_record
from xmc_core.families.xr_transformer import NAME
from xmc_core.families.xr_transformer.reuse import kept_levels, problem_digest
from xmc_core.families.xr_transformer.warm import matcher_start, states_root, warm_matcher_cfg
from xmc_core.families.xr_transformer.zero_shot import (
    label_texts,
    text_features,
    with_zero_shot,
    zero_shot_inputs,
)
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.linear.model import LevelRankers, XRLinearModel
from xmc_core.linear.negatives import MatcherShortlists
from xmc_core.linear.tree import LabelTree
from xmc_core.model.contract import label_counts
from xmc_core.model.xmc_model import XmcModel
from xmc_core.neural import resolve_device
from xmc_core.stages.graph import Runner, Stage
from xmc_core.stages.keys import key_part
from xmc_core.transformer import matcher as matcher_lib
from xmc_core.transformer import tokens as token_lib
from xmc_core.transformer.champion import ChampionEncoder
from xmc_core.transformer.encoder import (
    TextEncoder,
    default_encoder_path,
    encoder_fingerprint,
    load_tokenizer,
)
from xmc_core.transformer.matcher import MatcherCheckpoint
from xmc_core.transformer.ranker import (
    EmbeddedSplit,
    EmbeddingFeatures,
    concat_features,
    matcher_parent_shortlists,
    ranker_label_features,
)
from xmc_core.transformer.shortlist import level_choices, matcher_levels, top_clusters
from xmc_core.transformer.states import embed_final
from xmc_core.transformer.tokens import TokenizedTexts

log = logging.getLogger(__name__)
key_part.register(EncoderConfig, encoder_fingerprint)  # an encoder is keyed by its files


def tokenize(corpus: Corpus, ref: PartitionRef, encoder: EncoderConfig) -> TokenizedTexts:
    """Subword ids of one partition's texts, by the configured encoder's tokenizer."""
    tokenizer = load_tokenizer(encoder.path or default_encoder_path())
    return token_lib.tokenize_partition(corpus, ref, tokenizer, encoder.max_length)


def stack_tokens(parts: list[TokenizedTexts], split: str) -> TokenizedTexts:
    """A split's tokenized partitions in corpus order (``split`` names it in the key)."""
    return TokenizedTexts.concat(parts)


def train_matcher_level(
    tokens: TokenizedTexts, train: SplitFeatures, tree: LabelTree, level: int,
    previous: MatcherCheckpoint | None, encoder: EncoderConfig, matcher: MatcherConfig,
    out: Path, start: ChampionEncoder | None = None, base_docs: int = 0,
    states_root: str | None = None,
) -> None:  # fmt: skip
    """Fine-tune the encoder and the head of tree level ``level`` from the previous level's
    checkpoint (None: the pretrained encoder, or a warm start's champion encoder ``start``,
    trained for the warm budget: :func:`~.warm.warm_matcher_cfg`, the champion having been
    trained on ``base_docs`` documents); writes the checkpoint into ``out``.
    ``states_root``: the encoder-state cache (:mod:`~xmc_core.transformer.states`), or None."""
    begin = None
    if start is not None:
        matcher = warm_matcher_cfg(matcher, tokens.n_docs, base_docs)
        begin = start.encoder_dir
    matcher_lib.train_matcher_level(
        tokens, train.Y, tree, level, previous, encoder, matcher, out, begin, states_root
    )


def matcher_predictions(ckpt: MatcherCheckpoint, E: np.ndarray, beam_size: int) -> sp.csr_matrix:
    """The matcher level's top ``beam_size`` clusters for embeddings ``E`` (n, h)."""
    W, b = ckpt.head().arrays()
    return top_clusters(E, W, b, beam_size)


def final_embeddings(
    ckpt: MatcherCheckpoint, encoder: TextEncoder, tokens: TokenizedTexts, cfg: MatcherConfig,
    states_root: str | None = None,
) -> np.ndarray:  # fmt: skip
    """Embeddings float32 (n, h) of every training document by the last level's encoder: the
    checkpoint already holds those of the matcher's documents; the rest are computed (through
    the encoder-state cache ``states_root``, when there is one)."""
    rows, E, _ = ckpt.state(tokens.n_docs)
    missing = np.setdiff1d(np.arange(tokens.n_docs), rows)
    if missing.size:
        device = resolve_device(cfg.device)
        what = "embedding the other training documents"
        E[missing] = embed_final(encoder, tokens.take(missing), device, cfg, states_root, what)
    return E


def embed_split(
    split: SplitFeatures, tokens: TokenizedTexts, checkpoint: MatcherCheckpoint, name: str,
    matcher: MatcherConfig, states_root: str | None = None,
) -> EmbeddedSplit:  # fmt: skip
    """A featurized split with the fine-tuned embeddings appended (``states_root``: the
    encoder-state cache, :mod:`~xmc_core.transformer.states`, or None)."""
    encoder, _ = checkpoint.encoder()
    if name == "train":  # the checkpoint holds the matcher documents' embeddings
        E = final_embeddings(checkpoint, encoder, tokens, matcher, states_root)
    else:
        device = resolve_device(matcher.device)
        what = f"embedding {name}"
        E = embed_final(encoder, tokens, device, matcher, states_root, what)
    X = concat_features(split.X, E, matcher.embedding_weight)
    return EmbeddedSplit(X, split.Y, split.doc_ids, split.unknown_labels, E)


def ranker_features(
    train: SplitFeatures, embedded: EmbeddedSplit, label_features: LabelFeatures | None = None,
    corpus: Corpus | None = None, index: LabelIndex | None = None,
    checkpoint: MatcherCheckpoint | None = None, matcher: MatcherConfig | None = None,
    states_root: str | None = None,
) -> LabelFeatures:  # fmt: skip
    """PIFA over TF-IDF ⊕ PIFA over the embeddings, for the ranker's refined tree; with
    zero-shot labels (``label_features`` has them; ``corpus``, ``index``, ``checkpoint`` and
    ``matcher`` then given), their rows from their texts (:mod:`.zero_shot`, ``states_root``)."""
    assert embedded.E is not None
    z = ranker_label_features(train.X, embedded.E, train.Y)
    if label_features is None or label_features.text is None or not label_features.zero_shot.size:
        return LabelFeatures(z, "pifa_concat")
    assert corpus is not None and index is not None and checkpoint is not None and matcher
    texts = label_texts(corpus, index)
    text = text_features(label_features, texts, checkpoint, matcher, states_root)
    return with_zero_shot(z, label_features, text, "pifa_concat")


def shortlists(
    checkpoint: MatcherCheckpoint, embedded: EmbeddedSplit, matcher_tree: LabelTree,
    ranker_tree: LabelTree, beam_size: int,
) -> MatcherShortlists:  # fmt: skip
    """The matcher's top ``beam_size`` clusters of every training document, as the extra
    parents of each ranker level."""
    assert embedded.E is not None
    P = matcher_predictions(checkpoint, embedded.E, beam_size)
    extra = matcher_parent_shortlists(P, matcher_tree, checkpoint.level, ranker_tree, beam_size)
    return MatcherShortlists(extra, checkpoint.level)


def assemble(
    vectorizer: TfidfVectorizer, labels: LabelIndex, tree: LabelTree, levels: list[LevelRankers],
    train: SplitFeatures, checkpoint: MatcherCheckpoint, label_features: LabelFeatures,
    ranker: RankerConfig, predict: PredictConfig, matcher: MatcherConfig,
    base_tree: LabelTree | None = None, matcher_tree: LabelTree | None = None,
    start: dict[str, Any] | None = None,
) -> XmcModel:  # fmt: skip
    """Vectorizer + label index + refined tree + level rankers + the last matcher level's
    encoder -> a deployable model, its ranker recording its training problem's digest
    (``label_features``: the ranker's, :mod:`.reuse`); ``base_tree``, ``matcher_tree`` and
    ``start``: a warm start's champion ranker tree, this run's matcher tree and the start
    record (what was reused is added to it)."""
    model = level_ranker(tree, levels, train, ranker, predict)
    model.train_digest_ = problem_digest(train, label_features, ranker, predict, matcher)
    if start is not None and base_tree is not None and matcher_tree is not None:
        scale = start.get("leaf_cost_scale")
        kept = {"ranker_levels_kept": int(start.get("ranker_levels_kept", 0))}
        start = {k: v for k, v in start.items() if k != "ranker_levels_kept"}
        start = start_record(start, vectorizer, labels, tree, base_tree, scale)
        n_docs = train.X.shape[0]
        start["reused"] |= matcher_start(matcher_tree, matcher, n_docs, start["base_docs"]) | kept
    return transformer_model(NAME, vectorizer, labels, model, train, checkpoint, matcher, start)


def transformer_model(
    family: str, vectorizer: TfidfVectorizer, labels: LabelIndex, ranker: XRLinearModel,
    train: SplitFeatures, checkpoint: MatcherCheckpoint, matcher: MatcherConfig,
    start: dict[str, Any] | None = None,
) -> XmcModel:  # fmt: skip
    """A deployable model of family ``family``: the ranker on ``[TF-IDF, weight * e]``, its
    encoder the matcher ``checkpoint``'s fine-tuned transformer (``EmbeddingFeatures``);
    ``start``: its warm start's record."""
    encoder, tokenizer = checkpoint.encoder()
    features = EmbeddingFeatures(
        encoder, tokenizer, matcher.embedding_weight, matcher.embed_batch_size, matcher.device,
        matcher.bf16, matcher.predict_runtime,
    )  # fmt: skip
    return XmcModel(
        family,
        vectorizer,
        labels,
        features,
        ranker,
        label_counts(train.Y),
        train.X.shape[0],
        start,
    )


TOKENS = Stage(
    "tokens", tokenize, TokenizedTexts, {"corpus": Corpus}, frozenset({"corpus"}), on_dask=True,
    describe=lambda t: f"{t.n_docs} docs, mean length {float(t.lengths.mean()):.1f}",
)  # fmt: skip
TOKENS_SPLIT = Stage(
    "tokens-split", stack_tokens, TokenizedTexts, {"parts": TokenizedTexts}, on_dask=True,
    describe=lambda t: f"tokens {t.input_ids.shape}",
)  # fmt: skip
MATCHER_LEVEL = Stage(
    "matcher-level", train_matcher_level, MatcherCheckpoint,
    {"tokens": TokenizedTexts, "train": SplitFeatures, "tree": LabelTree,
     "previous": MatcherCheckpoint, "start": ChampionEncoder},
    writes_folder=True, describe=lambda c: f"level {c.level}: {c.n_clusters} clusters",
)  # fmt: skip
EMBED = Stage(
    "embedded", embed_split, EmbeddedSplit,
    {"split": SplitFeatures, "tokens": TokenizedTexts, "checkpoint": MatcherCheckpoint},
    describe=lambda s: f"X {s.X.shape}",
)  # fmt: skip
RANKER_FEATURES = Stage(
    "ranker-label-features", ranker_features, LabelFeatures,
    {"train": SplitFeatures, "embedded": EmbeddedSplit, "label_features": LabelFeatures,
     "corpus": Corpus, "index": LabelIndex, "checkpoint": MatcherCheckpoint},
    describe=lambda z: f"Z {z.z.shape}, {z.z.nnz} nonzeros",
)  # fmt: skip
SHORTLISTS = Stage(
    "shortlists", shortlists, MatcherShortlists,
    {"checkpoint": MatcherCheckpoint, "embedded": EmbeddedSplit, "matcher_tree": LabelTree,
     "ranker_tree": LabelTree},
    describe=lambda s: f"(doc, parent) pairs per ranker level "
    f"{[0 if m is None else m.nnz for m in s.levels]}",
)  # fmt: skip
MODEL = Stage(
    "transformer-model", assemble, XmcModel,
    {"vectorizer": TfidfVectorizer, "labels": LabelIndex, "tree": LabelTree,
     "levels": LevelRankers, "train": SplitFeatures, "checkpoint": MatcherCheckpoint,
     "label_features": LabelFeatures, "base_tree": LabelTree, "matcher_tree": LabelTree},
    describe=lambda m: f"{len(m.labels)} labels",
)  # fmt: skip


def matcher_graph(
    run: Runner, tokens: Any, train: Any, tree: Any, encoder: EncoderConfig,
    matcher: MatcherConfig, start: Any = None, base_docs: int = 0,
    states_root: str | None = None,
) -> list[Any]:  # fmt: skip
    """The matcher levels, coarse to fine, each resuming from the previous one's checkpoint;
    returns their handles (the last one is the fine-tuned matcher). ``start``: a warm start's
    champion encoder (a ``ChampionEncoder`` handle; its model was trained on ``base_docs``
    documents): only the finest level is trained, from it (:mod:`.warm`). ``states_root``:
    the encoder-state cache (:func:`.warm.states_root`), or None."""
    checkpoints: list[Any] = []
    for line in level_choices(run.value(tree), matcher):
        log.info("%s", line)
    levels = matcher_levels(run.value(tree), matcher)
    warm: dict[str, Any] = {}
    if start is not None:
        levels, warm = levels[-1:], {"start": start, "base_docs": base_docs}
        log.info("matcher: warm start, level %d only, from the champion's encoder", levels[0])
    for level in levels:
        checkpoints.append(
            run(
                MATCHER_LEVEL, label=f"matcher-level-{level}", tokens=tokens, train=train,
                tree=tree, level=level, previous=checkpoints[-1] if checkpoints else None,
                encoder=encoder, matcher=matcher, states_root=states_root, **warm,
            )
        )  # fmt: skip
    return checkpoints


def tokenize_splits(run: Runner, corpus: Any, encoder: EncoderConfig) -> dict[str, Any]:
    """The subword ids of every split: one TOKENS call per partition, then one TOKENS_SPLIT
    per split; returns ``{split: handle}``."""
    refs = {s: run.value(corpus).partitions(s) for s in SPLITS}
    parts = {
        s: run.map(
            TOKENS, {"ref": refs[s]}, [f"tokenize-{s}-{r.row_group}" for r in refs[s]],
            corpus=corpus, encoder=encoder,
        )
        for s in SPLITS
    }  # fmt: skip
    return {
        s: run(TOKENS_SPLIT, label=f"assemble-tokens-{s}", parts=parts[s], split=s) for s in SPLITS
    }


def graph(
    run: Runner, feats: dict[str, Any], cfg: XmcConfig, warm: WarmHandles | None = None
) -> dict[str, Any]:
    """Tokens (per partition), matcher tree and levels, embeddings, refined tree, matcher
    shortlists, ranker levels, model. ``warm``: a champion's parts (:mod:`.warm`): its
    encoder starts the matcher's finest level, its ranker tree is grown, and its rankers are
    kept when the training problem is theirs (:mod:`.reuse`)."""
    tokens = tokenize_splits(run, feats["corpus"], cfg.encoder)
    matcher_tree = run(
        TREE, label="matcher-tree", label_features=feats["label_features"], cfg=cfg.tree
    )
    started = {} if warm is None else {"start": warm.encoder,
                                       "base_docs": int(warm.start["base_docs"])}  # fmt: skip
    root = states_root(cfg.matcher, cfg.work_dir)
    checkpoints = run.handoff(
        "matcher", matcher_graph, tokens=tokens["train"], train=feats["train"],
        tree=matcher_tree, encoder=cfg.encoder, matcher=cfg.matcher, states_root=root, **started,
    )  # fmt: skip
    last = checkpoints[-1]
    embedded = {
        s: run(
            EMBED, label=f"embed-{s}", split=feats[s], tokens=tokens[s], checkpoint=last,
            name=s, matcher=cfg.matcher, states_root=root,
        )
        for s in SPLITS
    }  # fmt: skip
    zero = zero_shot_inputs(run, feats, cfg, last)
    z = run(RANKER_FEATURES, train=feats["train"], embedded=embedded["train"], **zero)
    tree, kept = ranker_tree(run, z, cfg, warm, matcher_tree)
    levels = None
    if warm is not None:
        levels = kept_levels(run, warm, embedded["train"], z, tree, cfg)
        kept["start"]["ranker_levels_kept"] = 0 if levels is None else len(levels)
    if levels is None:
        levels = trained_levels(
            run, embedded["train"], z, tree, cfg, warm, last, matcher_tree, bool(zero)
        )
    model = run(
        MODEL, label="assemble-model", vectorizer=feats["vectorizer"],
        labels=feats["label_index"], tree=tree, levels=levels, train=embedded["train"],
        checkpoint=last, label_features=z, ranker=cfg.ranker, predict=cfg.predict,
        matcher=cfg.matcher, **kept,
    )  # fmt: skip
    return {
        "tokens_train": tokens["train"], "tokens_test": tokens["test"],
        "matcher_tree": matcher_tree, "matcher": last, "matcher_levels": checkpoints,
        "embedded_train": embedded["train"], "embedded_test": embedded["test"],
        "tree": tree, "model": model,
        "model_train": embedded["train"], "model_test": embedded["test"],
    }  # fmt: skip


def trained_levels(
    run: Runner, train: Any, z: Any, tree: Any, cfg: XmcConfig, warm: WarmHandles | None,
    checkpoint: Any, matcher_tree: Any, zero_shot: bool,
) -> list[Any]:  # fmt: skip
    """The ranker levels trained on ``train`` over ``tree``, the ``checkpoint``'s top clusters
    as extra negatives, then (``zero_shot``) the zero-shot labels' leaf rankers from ``z``."""
    extra = run(
        SHORTLISTS, label="matcher-shortlists", checkpoint=checkpoint, embedded=train,
        matcher_tree=matcher_tree, ranker_tree=tree, beam_size=cfg.matcher.beam_size,
    )  # fmt: skip
    scale = None if warm is None else warm.leaf_scale
    levels = ranker_levels(run, train, tree, cfg, extra, "ranker", scale)
    if zero_shot:
        levels[-1] = run(
            ZERO_SHOT, label="zero-shot-rankers", train=train, tree=tree, level=levels[-1],
            label_features=z, ranker=cfg.ranker,
        )  # fmt: skip
    return levels


def ranker_tree(
    run: Runner, z: Any, cfg: XmcConfig, warm: WarmHandles | None, matcher_tree: Any
) -> tuple[Any, dict[str, Any]]:
    """The ranker's tree on the label features ``z`` (the champion's, grown, when ``warm``)
    and what the model's assembly needs to record a warm start."""
    if warm is None:
        return run(TREE, label="ranker-tree", label_features=z, cfg=cfg.tree), {}
    tree = run(TREE_WARM, label="grow-ranker-tree", label_features=z, base=warm.tree,
               cfg=cfg.tree)  # fmt: skip
    start = {**warm.start, "leaf_cost_scale": warm.leaf_scale}
    return tree, {"base_tree": warm.tree, "matcher_tree": matcher_tree, "start": start}


def runtime_requirements(cfg: XmcConfig) -> tuple[str, ...]:
    """The int8 encoder's runtime, when ``matcher.predict_runtime`` asks for it."""
    return ("onnxruntime",) if cfg.matcher.predict_runtime == "onnx-int8" else ()
