"""Plain-text summaries of pipeline outputs for logs and the terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xmc_core.corpus import Corpus, Manifest
from xmc_core.storage.artifacts import read_meta


def corpus_line(manifest: Manifest) -> str:
    """``6000 train / 1500 test docs, 957 labels`` from a dataset's manifest."""
    train, test = manifest.splits["train"].rows, manifest.splits["test"].rows
    return f"{train} train / {test} test docs, {manifest.n_labels} labels"


def features_summary(outputs: dict[str, str]) -> str:
    """Dataset and feature shapes of a featurization run, one line each."""
    lines = []
    if "corpus" in outputs:
        m = Corpus(outputs["corpus"]).manifest
        lines.append(
            f"corpus: {corpus_line(m)} ({m.unseen_test_labels} test labels unseen in train)"
        )
    vec = read_meta(Path(outputs["vectorizer"]), "TfidfVectorizer", verify=False)
    lines.append(f"vocabulary: {vec['n_features']} features from {vec['n_docs']} documents")
    z = read_meta(Path(outputs["label_features"]), "LabelFeatures", verify=False)
    lines.append(f"label features ({z['kind']}): {z['shape'][0]} x {z['shape'][1]}")
    for split in ("train", "test"):
        meta = read_meta(Path(outputs[split]), "SplitFeatures", verify=False)
        lines.append(
            f"{split}: X {meta['n_docs']} x {meta['n_features']} ({meta['nnz']} nonzeros), "
            f"Y {meta['n_docs']} x {meta['n_labels']}"
        )
    return "\n".join(lines)


def read_json(path: Path) -> Any:
    """A JSON file written by the pipeline (e.g. ``metrics.json``)."""
    return json.loads(path.read_text(encoding="utf-8"))
