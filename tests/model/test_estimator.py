"""``XmcClassifier``: fit / predict / evaluate / save / load from Python, the README example, and
the matrix path giving the very model the text path gives on the same features."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from tests.matrix_helpers import separable
from xmc_core import XmcClassifier
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.errors import InputError
from xmc_core.families.train import train_in_process, train_matrices_in_process
from xmc_core.features.matrices import MatrixFiles

README = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"  # (was README.md's)


def _readme_example() -> tuple[str, list[str]]:
    """The python block of the README's section on Python entry points, and what it says the
    block prints (the backquoted values of its "It prints" sentence)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## `XmcClassifier`") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    said = re.search(r"It prints `(.*?)` and `(.*?)`\.", section)
    assert code is not None and said is not None
    return code.group(1), [said.group(1), said.group(2)]


def test_readme_python_example_runs_and_prints_what_it_says(tmp_path: Path) -> None:
    code, said = _readme_example()
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})  # the documented example
    finally:
        os.chdir(cwd)
    assert out.getvalue().splitlines() == said
    assert said[0] == "[['cats', 'fish'], ['dogs', 'fish'], ['fish', 'cats']]" and said[1] == "1.0"
    loaded = XmcClassifier.load(tmp_path / "models" / "pets")
    assert loaded.model_.labels.names.to_pylist() == ["cats", "dogs", "fish"]


def test_fit_predict_on_separable_matrices() -> None:
    X, Y = separable(24, 4)
    clf = XmcClassifier(tree__max_leaf_size=2)
    assert clf.fit(X, Y) is clf
    top = clf.predict(X[:5], topk=1)
    assert [[name for name, _ in doc] for doc in top] == [["0"], ["1"], ["2"], ["3"], ["0"]]
    assert all(isinstance(score, float) and score > 0.5 for doc in top for _, score in doc)
    scores = clf.predict_scores(X[:5], topk=3)
    assert scores.shape == (5, 4) and np.diff(scores.indptr).tolist() == [3] * 5
    assert clf.predict(X.toarray()[:2], topk=1) == top[:2]  # a dense array is features too
    metrics = clf.evaluate(X, Y)
    assert metrics["P@1"] == 1.0 and metrics["R@3"] == 1.0
    assert clf.config_.tree.max_leaf_size == 2 and clf.model_.vectorizer.n_features == 6


def test_save_load_predict_is_identical(tmp_path: Path) -> None:
    X, Y = separable(24, 4)
    clf = XmcClassifier(tree__max_leaf_size=2, predict__beam_size=3).fit(
        X, Y, label_names=["w", "x", "y", "z"]
    )
    clf.save(tmp_path / "m")
    again = XmcClassifier.load(tmp_path / "m")
    a, b = clf.predict_scores(X), again.predict_scores(X)
    assert (a.indptr == b.indptr).all() and (a.indices == b.indices).all()
    assert (a.data == b.data).all()
    assert again.predict(X[:2], topk=2) == clf.predict(X[:2], topk=2)
    assert again.config_ == clf.config_ and again.config_.predict.beam_size == 3
    with pytest.raises(FileExistsError):
        clf.save(tmp_path / "m")


def test_fit_on_texts_and_label_lists() -> None:
    texts = ["red apple fruit", "green apple", "blue sky", "sky clouds blue", "fruit banana"]
    labels = [["fruit"], ["fruit"], ["sky"], ["sky"], ["fruit", "yellow"]]
    clf = XmcClassifier().fit(texts, labels)
    top = clf.predict(["an apple", "the blue sky"], topk=1)
    assert [doc[0][0] for doc in top] == ["fruit", "sky"]
    assert clf.evaluate(["an apple", "blue"], [["fruit"], ["sky", "unknown"]])["P@1"] == 1.0
    with pytest.raises(InputError, match=r"labels\[0\] is a string \('fruit'\)"):
        XmcClassifier().fit(["a doc"], ["fruit"])


def test_errors_are_clear() -> None:
    X, Y = separable(24, 4)
    with pytest.raises(InputError, match="this XmcClassifier is not fitted"):
        XmcClassifier().predict(X)
    with pytest.raises(InputError, match=r"tree\.nope"):
        XmcClassifier(tree__nope=1).fit(X, Y)
    clf = XmcClassifier(tree__max_leaf_size=2).fit(X, Y)
    with pytest.raises(InputError, match="no vectorizer: this model predicts from features only"):
        clf.predict(["a text"])
    with pytest.raises(InputError, match="5 columns \\(features\\), but the model takes 6"):
        clf.predict(X[:, :5])
    with pytest.raises(InputError, match="repeats line 1"):
        XmcClassifier().fit(X, Y, label_names=["a", "b", "a", "d"])
    with pytest.raises(InputError, match=r"model\.kind=xr_transformer needs raw text"):
        XmcClassifier(model__kind="xr_transformer").fit(X, Y)


def test_matrices_give_the_model_the_featurized_corpus_gives(tmp_path: Path) -> None:
    """The same X, Y and label names through ``--x`` as through featurization: the same tree,
    rankers and scores, bit for bit (one training graph, two sources). Zero-shot labels off:
    they come from label texts, which matrices do not have."""
    write_synthetic_dataset(tmp_path / "ds", SyntheticSpec().scaled(0.05))
    sets = [
        f"work_dir={tmp_path / 'work'}",
        "tree.max_leaf_size=8",
        "label_features.zero_shot=false",
    ]
    cfg = XmcConfig.load(None, sets)
    text = train_in_process(Corpus(tmp_path / "ds"), cfg)
    train, test = text["train"], text["test"]
    for name, m in {"X": train.X, "Y": train.Y, "Xt": test.X, "Yt": test.Y}.items():
        sp.save_npz(tmp_path / f"{name}.npz", m)
    names = tmp_path / "labels.txt"
    names.write_text("\n".join(text["label_index"].names.to_pylist()) + "\n", encoding="utf-8")
    files = MatrixFiles(
        tmp_path / "X.npz", tmp_path / "Y.npz", tmp_path / "Xt.npz", tmp_path / "Yt.npz", names
    )
    matrix = train_matrices_in_process(files, cfg)
    a = text["model"].predict_features(test.X)
    b = matrix["model"].predict_features(test.X)
    assert a.nnz > 0 and (a.indices == b.indices).all() and (a.data == b.data).all()
    got, want = matrix["evaluation"].values, text["evaluation"].values
    assert got == {k: want[k] for k in got}  # the text split also knows its labels outside
    assert set(want) - set(got) == {"P@1 seen", "P@5 seen", "R@5 unseen", "R@10 unseen"}
    assert matrix["label_index"].names.equals(pa.array(text["label_index"].names))
