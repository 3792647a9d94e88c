"""Label tasks: the label index and the label features (PIFA / label text) used by the tree."""

from __future__ import annotations

from prefect import get_run_logger, task

from tasks.caching import artifact_dir, cache_key, fp, produce, stage_key
from xmc_core.config import LabelFeaturesConfig
from xmc_core.corpus import Corpus
from xmc_core.features import stages
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.fingerprint import closure_fingerprint

TASK_OPTIONS = {"persist_result": True, "result_serializer": "json"}


def _label_index_key(corpus_dir: str, work_dir: str) -> str:
    return stage_key("label-index", fp(corpus_dir), code=closure_fingerprint(__name__))


@task(
    name="label-index",
    task_run_name="label-index",
    cache_key_fn=cache_key("label-index", _label_index_key),
    **TASK_OPTIONS,
)
def label_index(corpus_dir: str, work_dir: str) -> str:
    """Every training label -> ``LabelIndex`` folder."""
    log = get_run_logger()
    key = _label_index_key(corpus_dir, work_dir)
    with produce(work_dir, "label-index", key, log) as tmp:
        if tmp is not None:
            index = stages.fit_label_index(Corpus(corpus_dir))
            index.save(tmp)
            log.info("label index: %d labels", len(index))
    return str(artifact_dir(work_dir, "label-index", key))


def _label_features_key(
    part_dirs: list[str],
    vocab_dir: str,
    index_dir: str,
    corpus_dir: str,
    cfg: LabelFeaturesConfig,
    work_dir: str,
) -> str:
    text_fp = fp(corpus_dir) if cfg.kind != "pifa" else None
    return stage_key(
        "label-features",
        [fp(d) for d in part_dirs],
        fp(vocab_dir),
        fp(index_dir),
        text_fp,
        cfg.fingerprint(),
        code=closure_fingerprint(__name__),
    )


@task(
    name="label-features",
    task_run_name="label-features",
    cache_key_fn=cache_key("label-features", _label_features_key),
    **TASK_OPTIONS,
)
def label_features(
    part_dirs: list[str],
    vocab_dir: str,
    index_dir: str,
    corpus_dir: str,
    cfg: LabelFeaturesConfig,
    work_dir: str,
) -> str:
    """PIFA summed over the training partitions (and/or label-text TF-IDF) -> ``LabelFeatures``."""
    log = get_run_logger()
    key = _label_features_key(part_dirs, vocab_dir, index_dir, corpus_dir, cfg, work_dir)
    with produce(work_dir, "label-features", key, log) as tmp:
        if tmp is not None:
            feats = stages.build_label_features(
                (SplitFeatures.load(d) for d in part_dirs),
                cfg,
                TfidfVectorizer.load(vocab_dir),
                LabelIndex.load(index_dir),
                Corpus(corpus_dir).label_texts(),
            )
            feats.save(tmp)
            log.info("label features (%s): Z %s, %d nonzeros", cfg.kind, feats.z.shape, feats.z.nnz)
    return str(artifact_dir(work_dir, "label-features", key))
