"""Featurization tasks: count terms per partition, fit the vocabulary, featurize partitions,
assemble splits."""

from __future__ import annotations

import time

from prefect import get_run_logger, task

from tasks.caching import artifact_dir, cache_key, fp, produce, stage_key
from xmc_core.config import TfidfConfig, TokenizerConfig
from xmc_core.corpus import Corpus, PartitionRef
from xmc_core.corpus.reader import partition_fingerprint
from xmc_core.features import stages
from xmc_core.features.counts import TermCounts
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.fingerprint import closure_fingerprint

TASK_OPTIONS = {"persist_result": True, "result_serializer": "json"}


def _count_key(
    corpus_dir: str, ref: PartitionRef, tokenizer: TokenizerConfig, work_dir: str
) -> str:
    return stage_key(
        "count",
        ref_id(corpus_dir, ref),
        tokenizer.fingerprint(),
        code=closure_fingerprint(__name__),
    )


def ref_id(corpus_dir: str, ref: PartitionRef) -> list[object]:
    """What a partition's artifacts depend on: its split and its rows' content (not where the
    row group sits, nor the rest of the corpus), so unchanged partitions of a grown corpus
    reuse their cached results."""
    return [ref.split, partition_fingerprint(ref)]


@task(
    name="count-terms",
    task_run_name="count-{ref.split}-{ref.row_group}",
    cache_key_fn=cache_key("count", _count_key),
    **TASK_OPTIONS,
)
def count_terms(
    corpus_dir: str, ref: PartitionRef, tokenizer: TokenizerConfig, work_dir: str
) -> str:
    """Tokenize and count one partition -> ``TermCounts`` folder."""
    log = get_run_logger()
    key = _count_key(corpus_dir, ref, tokenizer, work_dir)
    with produce(work_dir, "count", key, log) as tmp:
        if tmp is not None:
            start = time.perf_counter()
            counts = stages.count_partition(Corpus(corpus_dir), ref, tokenizer)
            counts.save(tmp)
            secs = time.perf_counter() - start
            log.info(
                "counted %s partition %d: %d docs, %d distinct terms in %.2f s (%.0f docs/s)",
                ref.split,
                ref.row_group,
                ref.rows,
                len(counts.terms),
                secs,
                ref.rows / max(secs, 1e-9),
            )
    return str(artifact_dir(work_dir, "count", key))


def _vocab_key(
    count_dirs: list[str], tfidf: TfidfConfig, tokenizer: TokenizerConfig, work_dir: str
) -> str:
    return stage_key(
        "vocabulary",
        [fp(d) for d in count_dirs],
        tfidf.fingerprint(),
        tokenizer.fingerprint(),
        code=closure_fingerprint(__name__),
    )


@task(
    name="fit-vocabulary",
    task_run_name="fit-vocabulary",
    cache_key_fn=cache_key("vocabulary", _vocab_key),
    **TASK_OPTIONS,
)
def fit_vocabulary(
    count_dirs: list[str], tfidf: TfidfConfig, tokenizer: TokenizerConfig, work_dir: str
) -> str:
    """Merge the training partitions' counts; select vocabulary, compute idf."""
    log = get_run_logger()
    key = _vocab_key(count_dirs, tfidf, tokenizer, work_dir)
    with produce(work_dir, "vocabulary", key, log) as tmp:
        if tmp is not None:
            vec = stages.fit_vectorizer((TermCounts.load(d) for d in count_dirs), tfidf, tokenizer)
            vec.save(tmp)
            log.info("vocabulary: %d features from %d documents", vec.n_features, vec.n_docs_)
    return str(artifact_dir(work_dir, "vocabulary", key))


def _part_key(
    corpus_dir: str,
    ref: PartitionRef,
    count_dir: str,
    vocab_dir: str,
    index_dir: str,
    work_dir: str,
) -> str:
    return stage_key(
        "partition",
        ref_id(corpus_dir, ref),
        fp(count_dir),
        fp(vocab_dir),
        fp(index_dir),
        code=closure_fingerprint(__name__),
    )


@task(
    name="featurize-partition",
    task_run_name="featurize-{ref.split}-{ref.row_group}",
    cache_key_fn=cache_key("partition", _part_key),
    **TASK_OPTIONS,
)
def featurize_partition(
    corpus_dir: str,
    ref: PartitionRef,
    count_dir: str,
    vocab_dir: str,
    index_dir: str,
    work_dir: str,
) -> str:
    """TF-IDF and label rows of one partition -> ``SplitFeatures`` folder."""
    log = get_run_logger()
    key = _part_key(corpus_dir, ref, count_dir, vocab_dir, index_dir, work_dir)
    with produce(work_dir, "partition", key, log) as tmp:
        if tmp is not None:
            start = time.perf_counter()
            part = stages.featurize_partition(
                Corpus(corpus_dir),
                ref,
                TermCounts.load(count_dir),
                TfidfVectorizer.load(vocab_dir),
                LabelIndex.load(index_dir),
            )
            part.save(tmp)
            secs = time.perf_counter() - start
            log.info(
                "featurized %s partition %d: %d docs, %d nonzeros in %.2f s (%.0f docs/s)",
                ref.split,
                ref.row_group,
                ref.rows,
                part.X.nnz,
                secs,
                ref.rows / max(secs, 1e-9),
            )
    return str(artifact_dir(work_dir, "partition", key))


def _assemble_key(part_dirs: list[str], split: str, work_dir: str) -> str:
    return stage_key("split", split, [fp(d) for d in part_dirs], code=closure_fingerprint(__name__))


@task(
    name="assemble-split",
    task_run_name="assemble-{split}",
    cache_key_fn=cache_key("split", _assemble_key),
    **TASK_OPTIONS,
)
def assemble_split(part_dirs: list[str], split: str, work_dir: str) -> str:
    """Stack a split's partitions -> one ``SplitFeatures`` folder (X.npz, Y.npz, doc ids)."""
    log = get_run_logger()
    key = _assemble_key(part_dirs, split, work_dir)
    with produce(work_dir, "split", key, log) as tmp:
        if tmp is not None:
            feats = SplitFeatures.concat([SplitFeatures.load(d) for d in part_dirs])
            feats.save(tmp)
            log.info(
                "%s: X %s (%d nonzeros), Y %s, %d label assignments outside the label index",
                split,
                feats.X.shape,
                feats.X.nnz,
                feats.Y.shape,
                feats.unknown_labels,
            )
    return str(artifact_dir(work_dir, "split", key))
