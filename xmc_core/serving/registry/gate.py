"""Evaluation from raw text, label names mapped into each model's own label index.

Two models trained on different data have different vocabularies and label indexes, so their
featurized test splits cannot be compared. Here each model featurizes the *same* raw documents
with its own vectorizer, and the true labels are looked up **by name** in its label index:

- A true label unknown to the model (not in its label index) is appended as an extra column of
  the truth matrix that the model never scores. Hence P@k is unchanged (denominator k), R@k
  counts it in the denominator (exactly ``metrics.recall_at_k`` with ``n_missing``, tested),
  and nDCG@k's ideal DCG counts it too (a model cannot reach nDCG 1 on a document whose labels
  it does not know).
- PSP@k uses propensities computed from the **evaluation dataset's train split** label counts
  (by name, zero for a label absent there) and its train document count, the same for every
  model evaluated on that dataset; the ideal ranking of its denominator includes the unknown
  labels. Without those counts (``evaluate_on_texts`` given None) PSP@k is omitted.

When every true label is known to the model and the model was trained on the dataset's train
split, the figures equal ``xmc_core.evaluation.metrics.evaluate`` on the model's featurized split.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from xmc_core.config import EvalConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.schema import SPLITS
from xmc_core.errors import InputError
from xmc_core.evaluation.metrics import evaluate
from xmc_core.features.labels import LabelIndex
from xmc_core.model.xmc_model import XmcModel

log = logging.getLogger(__name__)

LabelLists = Sequence[Sequence[str]] | pa.ListArray | pa.LargeListArray | pa.ChunkedArray


def evaluate_on_texts(
    model: XmcModel,
    texts: Sequence[str | None] | pa.Array | pa.ChunkedArray,
    label_lists: LabelLists,
    eval_cfg: EvalConfig,
    label_counts_by_name: dict[str, int] | None = None,
    n_train_docs: int | None = None,
    beam_size: int | None = None,
    topk: int | None = None,
) -> dict[str, float]:
    """P@k, nDCG@k, R@k (and PSP@k given the counts) of ``model`` on raw ``texts``.

    ``label_lists``: the true label names of each text (n_docs lists); names unknown to the
    model count as misses (see the module docstring). ``label_counts_by_name``: training
    documents per label name and ``n_train_docs`` (the propensity model of PSP@k); both or
    neither. Predictions go to depth max(``eval_cfg.ks``, the model's top-k).
    """
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    k = _depth(model, eval_cfg, topk)
    scores = model.predict(texts, topk=k, beam_size=beam_size)
    return evaluate_scores(
        model.labels, scores, label_lists, eval_cfg, label_counts_by_name, n_train_docs
    )


def evaluate_on_dataset(
    model_dir: Path,
    dataset: Path,
    split: str,
    eval_cfg: EvalConfig,
    beam_size: int | None = None,
    topk: int | None = None,
) -> dict[str, float]:
    """Metrics of the ``XmcModel`` folder ``model_dir`` on the raw texts of one ``split`` of the
    text dataset folder ``dataset``; PSP@k propensities from that dataset's train split."""
    corpus = Corpus(dataset)
    if corpus.kind != "text":
        raise InputError(
            dataset,
            f"a {corpus.kind} dataset has no raw text to evaluate models on",
            "give a text dataset, or compare models with `xmc evaluate` on their own features",
        )
    if split not in SPLITS:
        raise InputError(dataset, f"no split {split!r} (splits: {', '.join(SPLITS)})", "fix it")
    model = XmcModel.load(model_dir)
    k = _depth(model, eval_cfg, topk)
    labels, parts = [], []
    for ref in corpus.partitions(split):
        table = corpus.read_partition(ref, ["text", "labels"])
        parts.append(model.predict(table.column("text"), topk=k, beam_size=beam_size))
        labels.append(table.column("labels").combine_chunks())
    if not parts:
        raise InputError(dataset, f"the {split} split holds no documents", "re-ingest it")
    counts, n_train = train_label_counts(corpus)
    return evaluate_scores(
        model.labels,
        sp.vstack(parts, format="csr"),
        pa.chunked_array(labels),
        eval_cfg,
        counts,
        n_train,
    )


def evaluate_scores(
    labels: LabelIndex,
    scores: sp.csr_matrix,
    label_lists: LabelLists,
    eval_cfg: EvalConfig,
    label_counts_by_name: dict[str, int] | None = None,
    n_train_docs: int | None = None,
) -> dict[str, float]:
    """Metrics of predicted ``scores``: csr (n_docs, len(labels)) against true label names."""
    if (label_counts_by_name is None) != (n_train_docs is None):
        raise ValueError("give both label_counts_by_name and n_train_docs, or neither")
    Y_true, extra = truth_matrix(labels, label_lists)
    if Y_true.shape[0] != scores.shape[0] or scores.shape[1] != len(labels):
        raise ValueError(f"scores have shape {scores.shape}, truth {Y_true.shape[0]} documents")
    if extra:
        log.info("%d true label names are unknown to the model: counted as misses", len(extra))
    padded = sp.hstack([scores, sp.csr_matrix((scores.shape[0], len(extra)))], format="csr")
    counts = None
    if label_counts_by_name is not None:
        names = pa.concat_arrays([labels.names, pa.array(extra, type=pa.large_string())])
        counts = counts_of(names, label_counts_by_name)
    return evaluate(Y_true, padded, eval_cfg, counts, n_train_docs)


def truth_matrix(labels: LabelIndex, label_lists: LabelLists) -> tuple[sp.csr_matrix, list[str]]:
    """Binary csr (n_docs, len(labels) + n_unknown) of the true labels, and the unknown names.

    Column j < len(labels) is the model's label j; the unknown names (sorted) follow. Duplicate
    names within a document count once; null names are ignored.
    """
    lists = _as_list_array(label_lists)
    flat = pc.list_flatten(lists).cast(pa.large_string())
    rows = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    present = pc.is_valid(flat).to_numpy(zero_copy_only=False)
    flat, rows = flat.filter(pa.array(present)), rows[present]
    found = pc.index_in(flat, value_set=labels.names).fill_null(-1)
    ids = np.array(found.to_numpy(zero_copy_only=False), dtype=np.int64)
    unknown = ids < 0
    extra = sorted(set(flat.filter(pa.array(unknown)).to_pylist()))
    if extra:
        value_set = pa.array(extra, type=pa.large_string())
        extra_ids = pc.index_in(flat.filter(pa.array(unknown)), value_set=value_set)
        ids[unknown] = len(labels) + extra_ids.to_numpy(zero_copy_only=False)
    Y = sp.csr_matrix(
        (np.ones(len(ids), dtype=np.float32), (rows, ids)),
        shape=(len(lists), len(labels) + len(extra)),
    )
    Y.sum_duplicates()
    Y.data[:] = 1.0
    return Y, extra


def train_label_counts(corpus: Corpus) -> tuple[dict[str, int], int]:
    """Training documents per label name (a name repeated in a document counts once) and the
    number of training documents of ``corpus``."""
    tables, n_docs = [], 0
    for ref in corpus.partitions("train"):
        lists = corpus.read_partition(ref, ["labels"]).column("labels").combine_chunks()
        rows = pc.add(pc.list_parent_indices(lists).cast(pa.int64()), n_docs)
        tables.append(pa.table({"row": rows, "label": pc.list_flatten(lists)}))
        n_docs += len(lists)
    if not tables:
        return {}, 0
    grouped = (
        pa.concat_tables(tables)
        .filter(pc.is_valid(pc.field("label")))
        .group_by("label")
        .aggregate([("row", "count_distinct")])
    )
    names = grouped.column("label").to_pylist()
    counts = grouped.column("row_count_distinct").to_pylist()
    return dict(zip(names, counts, strict=True)), n_docs


def counts_of(names: pa.Array, counts_by_name: dict[str, int]) -> np.ndarray:
    """int64 (len(names),): each name's count in ``counts_by_name``, 0 when absent."""
    if not counts_by_name:
        return np.zeros(len(names), dtype=np.int64)
    keys = pa.array(list(counts_by_name), type=pa.large_string())
    values = np.fromiter(counts_by_name.values(), dtype=np.int64, count=len(counts_by_name))
    at = pc.index_in(names.cast(pa.large_string()), value_set=keys).fill_null(-1)
    at = at.to_numpy(zero_copy_only=False)
    return np.where(at >= 0, values[np.maximum(at, 0)], 0)


def _depth(model: XmcModel, eval_cfg: EvalConfig, topk: int | None) -> int:
    """Prediction depth, as ``pipeline.evaluate_model``: the largest cut-off or top-k."""
    return max([*eval_cfg.ks, topk or model.ranker.predict_cfg.topk])


def _as_list_array(label_lists: LabelLists) -> pa.ListArray | pa.LargeListArray:
    if isinstance(label_lists, pa.ChunkedArray):
        return label_lists.combine_chunks()
    if isinstance(label_lists, pa.ListArray | pa.LargeListArray):
        return label_lists
    return pa.array([list(names) for names in label_lists], type=pa.list_(pa.large_string()))
