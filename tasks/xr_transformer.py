"""XR-Transformer tasks: tokenize per partition, one matcher task per tree level, embeddings,
the final ranker's label features, matcher shortlists and levels, model assembly.

The ranker reuses the XR-Linear tasks where nothing changes (label tree, evaluation): an
embedded split is a ``SplitFeatures`` folder whose X is ``[TF-IDF, weight * embedding]``.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import numpy as np
from prefect import get_run_logger, task

from tasks.caching import artifact_dir, cache_key, fp, produce, stage_key
from tasks.featurize import ref_id
from xmc_core.artifacts import (
    load_arrays,
    read_meta,
    save_arrays,
    save_csr,
    sha256_file,
    write_meta,
)
from xmc_core.config import EncoderConfig, MatcherConfig, PredictConfig, RankerConfig
from xmc_core.corpus import Corpus, PartitionRef
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.fingerprint import closure_fingerprint, combine
from xmc_core.linear.model import XRLinearModel, load_level
from xmc_core.linear.tree import LabelTree
from xmc_core.pipeline import label_counts
from xmc_core.text_model import XmcModel
from xmc_core.transformer import matcher as matcher_lib
from xmc_core.transformer import tokens as token_lib
from xmc_core.transformer.encoder import default_encoder_path, embed, load_tokenizer, resolve_device
from xmc_core.transformer.matcher import MatcherCheckpoint
from xmc_core.transformer.pipeline import final_embeddings, matcher_predictions
from xmc_core.transformer.ranker import (
    EmbeddingFeatures,
    concat_features,
    matcher_parent_shortlists,
    ranker_label_features,
)
from xmc_core.transformer.tokens import TokenizedTexts

TASK_OPTIONS = {"persist_result": True, "result_serializer": "json"}
EMBEDDINGS_FILE = "embeddings.npz"


def encoder_fp(cfg: EncoderConfig) -> str:
    """Fingerprint of the encoder's files (weights, tokenizer) and settings, not its path."""
    folder = Path(cfg.path) if cfg.path is not None else default_encoder_path()
    files = tuple(
        (p.name, p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
        if p.is_file()
    )
    return combine(
        _files_digest(str(folder.resolve()), files), cfg.model_dump(mode="json", exclude={"path"})
    )


@functools.cache
def _files_digest(folder: str, files: tuple[tuple[str, int, int], ...]) -> str:
    """sha256 of every file (memoized on name, size and mtime: big weights hash once)."""
    return combine([(name, sha256_file(Path(folder) / name)) for name, _, _ in files])


def _tokens_key(corpus_dir: str, ref: PartitionRef, encoder: EncoderConfig, work_dir: str) -> str:
    return stage_key(
        "tokens", ref_id(corpus_dir, ref), encoder_fp(encoder), code=closure_fingerprint(__name__)
    )


@task(
    name="tokenize-partition",
    task_run_name="tokenize-{ref.split}-{ref.row_group}",
    cache_key_fn=cache_key("tokens", _tokens_key),
    **TASK_OPTIONS,
)
def tokenize_partition(
    corpus_dir: str, ref: PartitionRef, encoder: EncoderConfig, work_dir: str
) -> str:
    """Subword ids of one partition's texts -> ``TokenizedTexts`` folder."""
    log = get_run_logger()
    key = _tokens_key(corpus_dir, ref, encoder, work_dir)
    with produce(work_dir, "tokens", key, log) as tmp:
        if tmp is not None:
            tokenizer = load_tokenizer(encoder.path or default_encoder_path())
            tokens = token_lib.tokenize_partition(
                Corpus(corpus_dir), ref, tokenizer, encoder.max_length
            )
            tokens.save(tmp)
            log.info(
                "tokenized %s partition %d: %d docs, mean length %.1f",
                ref.split, ref.row_group, tokens.n_docs, float(tokens.lengths.mean()),
            )  # fmt: skip
    return str(artifact_dir(work_dir, "tokens", key))


def _tokens_split_key(part_dirs: list[str], split: str, work_dir: str) -> str:
    return stage_key(
        "tokens-split", split, [fp(d) for d in part_dirs], code=closure_fingerprint(__name__)
    )


@task(
    name="assemble-tokens",
    task_run_name="assemble-tokens-{split}",
    cache_key_fn=cache_key("tokens-split", _tokens_split_key),
    **TASK_OPTIONS,
)
def assemble_tokens(part_dirs: list[str], split: str, work_dir: str) -> str:
    """Stack a split's tokenized partitions, in corpus order -> one ``TokenizedTexts`` folder."""
    log = get_run_logger()
    key = _tokens_split_key(part_dirs, split, work_dir)
    with produce(work_dir, "tokens-split", key, log) as tmp:
        if tmp is not None:
            tokens = TokenizedTexts.concat([TokenizedTexts.load(d) for d in part_dirs])
            tokens.save(tmp)
            log.info("%s tokens: %s", split, tokens.input_ids.shape)
    return str(artifact_dir(work_dir, "tokens-split", key))


def _matcher_key(
    tokens_dir: str, train_dir: str, tree_dir: str, level: int, previous_dir: str | None,
    encoder: EncoderConfig, matcher: MatcherConfig, work_dir: str,
) -> str:  # fmt: skip
    previous = None if previous_dir is None else fp(previous_dir)
    return stage_key(
        "matcher-level", fp(tokens_dir), fp(train_dir), fp(tree_dir), level, previous,
        encoder_fp(encoder), matcher.fingerprint(), code=closure_fingerprint(__name__),
    )  # fmt: skip


@task(
    name="matcher-level",
    task_run_name="matcher-level-{level}",
    cache_key_fn=cache_key("matcher-level", _matcher_key),
    **TASK_OPTIONS,
)
def train_matcher_level(
    tokens_dir: str, train_dir: str, tree_dir: str, level: int, previous_dir: str | None,
    encoder: EncoderConfig, matcher: MatcherConfig, work_dir: str,
) -> str:  # fmt: skip
    """Fine-tune the encoder and the head of tree level ``level``, starting from the previous
    level's checkpoint (None: the pretrained encoder) -> ``MatcherLevel`` checkpoint folder."""
    log = get_run_logger()
    key = _matcher_key(
        tokens_dir, train_dir, tree_dir, level, previous_dir, encoder, matcher, work_dir
    )
    with produce(work_dir, "matcher-level", key, log) as tmp:
        if tmp is not None:
            previous = None if previous_dir is None else MatcherCheckpoint.open(previous_dir)
            ckpt = matcher_lib.train_matcher_level(
                TokenizedTexts.load(tokens_dir), SplitFeatures.load(train_dir).Y,
                LabelTree.load(tree_dir), level, previous, encoder, matcher, tmp,
            )  # fmt: skip
            meta = read_meta(tmp, "MatcherLevel", verify=False)
            records = meta["history"]["records"]
            log.info(
                "matcher level %d: %d clusters on %s in %.1f s, last record %s",
                level, ckpt.n_clusters, meta["device"], meta["seconds"],
                records[-1] if records else None,
            )  # fmt: skip
    return str(artifact_dir(work_dir, "matcher-level", key))


def _embed_key(
    split_dir: str, tokens_dir: str, checkpoint_dir: str, split: str, matcher: MatcherConfig,
    work_dir: str,
) -> str:  # fmt: skip
    return stage_key(
        "embedded", fp(split_dir), fp(tokens_dir), fp(checkpoint_dir), split,
        matcher.fingerprint(), code=closure_fingerprint(__name__),
    )  # fmt: skip


@task(
    name="embed-split",
    task_run_name="embed-{split}",
    cache_key_fn=cache_key("embedded", _embed_key),
    **TASK_OPTIONS,
)
def embed_split(
    split_dir: str, tokens_dir: str, checkpoint_dir: str, split: str, matcher: MatcherConfig,
    work_dir: str,
) -> str:  # fmt: skip
    """A featurized split with the fine-tuned embeddings appended -> ``SplitFeatures`` folder
    with X csr (n, d + h) = ``[X_tfidf, embedding_weight * E]`` and ``embeddings.npz`` (E float32
    (n, h), unit rows)."""
    log = get_run_logger()
    key = _embed_key(split_dir, tokens_dir, checkpoint_dir, split, matcher, work_dir)
    with produce(work_dir, "embedded", key, log) as tmp:
        if tmp is not None:
            start = time.perf_counter()
            ckpt = MatcherCheckpoint.open(checkpoint_dir)
            encoder, _ = ckpt.encoder()
            device = resolve_device(matcher.device)
            tokens = TokenizedTexts.load(tokens_dir)
            if split == "train":  # the checkpoint holds the matcher documents' embeddings
                E = final_embeddings(ckpt, encoder, tokens, matcher)
            else:
                what = f"embedding {split}"
                E = embed(encoder, tokens, device, matcher.embed_batch_size, matcher.bf16, what)
            feats = SplitFeatures.load(split_dir)
            X = concat_features(feats.X, E, matcher.embedding_weight)
            save_arrays(tmp / EMBEDDINGS_FILE, E=E)
            SplitFeatures(X, feats.Y, feats.doc_ids, feats.unknown_labels).save(tmp)
            log.info(
                "embedded %s: %d docs on %s in %.1f s, X %s",
                split, E.shape[0], device, time.perf_counter() - start, X.shape,
            )  # fmt: skip
    return str(artifact_dir(work_dir, "embedded", key))


def load_embeddings(embedded_dir: str | Path) -> np.ndarray:
    """E float32 (n, h) of a folder written by :func:`embed_split` (checksums verified)."""
    read_meta(embedded_dir, "SplitFeatures")
    return load_arrays(Path(embedded_dir) / EMBEDDINGS_FILE)["E"]


def _ranker_z_key(train_dir: str, embedded_dir: str, work_dir: str) -> str:
    return stage_key(
        "ranker-label-features", fp(train_dir), fp(embedded_dir), code=closure_fingerprint(__name__)
    )


@task(
    name="ranker-label-features",
    task_run_name="ranker-label-features",
    cache_key_fn=cache_key("ranker-label-features", _ranker_z_key),
    **TASK_OPTIONS,
)
def ranker_features(train_dir: str, embedded_dir: str, work_dir: str) -> str:
    """PIFA over TF-IDF (``train_dir``) ⊕ PIFA over the embeddings (``embedded_dir``) ->
    ``LabelFeatures`` folder (kind ``pifa_concat``) for the ranker's refined tree."""
    log = get_run_logger()
    key = _ranker_z_key(train_dir, embedded_dir, work_dir)
    with produce(work_dir, "ranker-label-features", key, log) as tmp:
        if tmp is not None:
            train = SplitFeatures.load(train_dir)
            z = ranker_label_features(train.X, load_embeddings(embedded_dir), train.Y)
            LabelFeatures(z, "pifa_concat").save(tmp)
            log.info("ranker label features: Z %s, %d nonzeros", z.shape, z.nnz)
    return str(artifact_dir(work_dir, "ranker-label-features", key))


def _shortlist_key(
    checkpoint_dir: str, embedded_dir: str, matcher_tree_dir: str, ranker_tree_dir: str,
    beam_size: int, work_dir: str,
) -> str:  # fmt: skip
    return stage_key(
        "shortlists", fp(checkpoint_dir), fp(embedded_dir), fp(matcher_tree_dir),
        fp(ranker_tree_dir), beam_size, code=closure_fingerprint(__name__),
    )  # fmt: skip


@task(
    name="matcher-shortlists",
    task_run_name="matcher-shortlists",
    cache_key_fn=cache_key("shortlists", _shortlist_key),
    **TASK_OPTIONS,
)
def matcher_shortlists(
    checkpoint_dir: str, embedded_dir: str, matcher_tree_dir: str, ranker_tree_dir: str,
    beam_size: int, work_dir: str,
) -> str:  # fmt: skip
    """The last matcher level's top ``beam_size`` clusters of every training document, as the
    extra parents of each ranker level -> folder of ``level-<t>.npz`` (csr (n_docs, K_t)
    binary, none for level 0) and ``meta.json``."""
    log = get_run_logger()
    key = _shortlist_key(
        checkpoint_dir, embedded_dir, matcher_tree_dir, ranker_tree_dir, beam_size, work_dir
    )
    with produce(work_dir, "shortlists", key, log) as tmp:
        if tmp is not None:
            ckpt = MatcherCheckpoint.open(checkpoint_dir)
            P = matcher_predictions(ckpt, load_embeddings(embedded_dir), beam_size)
            matcher_tree, ranker_tree = (
                LabelTree.load(matcher_tree_dir),
                LabelTree.load(ranker_tree_dir),
            )
            extra = matcher_parent_shortlists(P, matcher_tree, ckpt.level, ranker_tree, beam_size)
            levels = [t for t, m in enumerate(extra) if m is not None]
            for t in levels:
                save_csr(tmp / f"level-{t}.npz", extra[t])
            nnz = [int(extra[t].nnz) for t in levels]
            write_meta(
                tmp, "MatcherShortlists",
                {"levels": levels, "nnz": nnz, "n_docs": P.shape[0], "matcher_level": ckpt.level},
            )  # fmt: skip
            log.info("matcher shortlists: (doc, parent) pairs per ranker level %s", nnz)
    return str(artifact_dir(work_dir, "shortlists", key))


def _model_key(
    vocab_dir: str, index_dir: str, tree_dir: str, level_dirs: list[str], train_dir: str,
    checkpoint_dir: str, ranker: RankerConfig, predict: PredictConfig, matcher: MatcherConfig,
    work_dir: str,
) -> str:  # fmt: skip
    return stage_key(
        "transformer-model", fp(vocab_dir), fp(index_dir), fp(tree_dir),
        [fp(d) for d in level_dirs], fp(train_dir), fp(checkpoint_dir), ranker.fingerprint(),
        predict.fingerprint(), matcher.fingerprint(), code=closure_fingerprint(__name__),
    )  # fmt: skip


@task(
    name="assemble-transformer-model",
    task_run_name="assemble-model",
    cache_key_fn=cache_key("transformer-model", _model_key),
    **TASK_OPTIONS,
)
def assemble_model(
    vocab_dir: str, index_dir: str, tree_dir: str, level_dirs: list[str], train_dir: str,
    checkpoint_dir: str, ranker: RankerConfig, predict: PredictConfig, matcher: MatcherConfig,
    work_dir: str,
) -> str:  # fmt: skip
    """Vectorizer + label index + refined tree + level rankers + the last matcher level's
    encoder -> a deployable XR-Transformer ``XmcModel`` folder."""
    log = get_run_logger()
    key = _model_key(
        vocab_dir, index_dir, tree_dir, level_dirs, train_dir, checkpoint_dir, ranker, predict,
        matcher, work_dir,
    )  # fmt: skip
    with produce(work_dir, "transformer-model", key, log) as tmp:
        if tmp is not None:
            train, tree = SplitFeatures.load(train_dir), LabelTree.load(tree_dir)
            weights = [load_level(d) for d in level_dirs]
            ranker_model = XRLinearModel(ranker, predict).set_levels(
                tree, weights, train.X.shape[1]
            )
            encoder, tokenizer = MatcherCheckpoint.open(checkpoint_dir).encoder()
            embedding = EmbeddingFeatures(
                encoder, tokenizer, matcher.embedding_weight, matcher.embed_batch_size,
                matcher.device, bf16=matcher.bf16,
            )  # fmt: skip
            model = XmcModel(
                TfidfVectorizer.load(vocab_dir), LabelIndex.load(index_dir), ranker_model,
                label_counts(train.Y), train.X.shape[0], embedding,
            )  # fmt: skip
            model.save(tmp)
    return str(artifact_dir(work_dir, "transformer-model", key))
