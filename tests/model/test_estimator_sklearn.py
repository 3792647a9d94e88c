"""``XmcClassifier`` as a scikit-learn estimator: ``get_params`` / ``set_params`` over the config's
keys, ``__repr__``, ``score``, and sklearn's own ``clone``, ``Pipeline`` and ``GridSearchCV`` on
it (sklearn is a test dependency only: the library never imports it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline

from tests.matrix_helpers import separable
from xmc_core import XmcClassifier
from xmc_core.config import XmcConfig
from xmc_core.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def _same(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    """The same sparse scores, bit for bit."""
    return bool(
        (a.indptr == b.indptr).all() and (a.indices == b.indices).all() and (a.data == b.data).all()
    )


def test_get_params_are_the_arguments_and_every_config_key(tmp_path: Path) -> None:
    clf = XmcClassifier(tree__max_leaf_size=4)
    assert clf.get_params(deep=False) == {
        "config": None,
        "work_dir": None,
        "tree__max_leaf_size": 4,
    }
    params = clf.get_params()
    assert params["tree__max_leaf_size"] == 4 and params["tree__branching"] == 16
    assert params["ranker__loss"] == "squared_hinge" and params["eval__ks"] == [1, 3, 5]
    assert params["registry__metric"] == "P@1" and params["data__dataset"] is None
    assert params["work_dir"] is None and "work_dir" in params and "tree" not in params
    yaml = tmp_path / "c.yaml"
    yaml.write_text("tree:\n  branching: 8\nranker:\n  max_iter: 3\n", encoding="utf-8")
    from_file = XmcClassifier(yaml, tree__branching=4).get_params()
    assert (from_file["tree__branching"], from_file["ranker__max_iter"]) == (4, 3)
    assert from_file["config"] == yaml


def test_set_params_changes_keys_and_refuses_bad_ones_whole() -> None:
    clf = XmcClassifier(tree__max_leaf_size=4)
    assert clf.set_params(tree__branching=4, ranker__threshold=0.2) is clf
    assert clf.get_params(deep=False) == {
        "config": None, "work_dir": None,
        "tree__max_leaf_size": 4, "tree__branching": 4, "ranker__threshold": 0.2,
    }  # fmt: skip
    with pytest.raises(InputError, match=r"tree\.nope"):
        clf.set_params(tree__max_leaf_size=8, tree__nope=1)
    with pytest.raises(InputError, match=r"tree\.branching=3 must be a power of two"):
        clf.set_params(tree__branching=3)
    assert clf.get_params()["tree__max_leaf_size"] == 4 and clf.get_params()["tree__branching"] == 4
    clf.set_params(work_dir="runs", config=XmcConfig.load(None, ["tree.max_leaf_size=8"]))
    assert clf.get_params()["work_dir"] == "runs" and clf.get_params()["tree__max_leaf_size"] == 4


def test_repr_shows_what_differs_from_the_defaults(tmp_path: Path) -> None:
    assert repr(XmcClassifier()) == "XmcClassifier()"
    assert repr(XmcClassifier(tree__branching=16)) == "XmcClassifier()"  # the default
    assert (
        repr(XmcClassifier(tree__max_leaf_size=4, ranker__loss="logistic"))
        == "XmcClassifier(tree__max_leaf_size=4, ranker__loss='logistic')"
    )
    cfg = XmcConfig.load(None, ["tree.max_leaf_size=8", "eval.ks=[1, 2]"])
    assert (
        repr(XmcClassifier(cfg, work_dir=tmp_path / "w"))
        == f"XmcClassifier(config=XmcConfig(tree__max_leaf_size=8, eval__ks=[1, 2]), "
        f"work_dir='{tmp_path / 'w'}')"
    )
    # with a YAML file an override equal to the default still says something: it is shown
    assert (
        repr(XmcClassifier("configs/x.yaml", tree__branching=16))
        == "XmcClassifier(config='configs/x.yaml', tree__branching=16)"
    )


def test_clone_is_unfitted_and_refits_to_the_same_model() -> None:
    X, Y = separable(24, 4)
    clf = XmcClassifier(tree__max_leaf_size=2, predict__beam_size=3).fit(X, Y)
    twin = clone(clf)
    assert twin is not clf and not hasattr(twin, "model_")
    assert twin.get_params() == clf.get_params() and repr(twin) == repr(clf)
    twin.fit(X, Y)
    assert _same(twin.predict_scores(X), clf.predict_scores(X))
    assert twin.predict(X[:3], topk=2) == clf.predict(X[:3], topk=2)
    given = XmcClassifier(XmcConfig.load(None, ["tree.max_leaf_size=2"]), ranker__max_iter=5)
    copied = clone(given)  # the config is copied (sklearn deep-copies non-estimator arguments)
    assert copied.config == given.config and copied.config is not given.config
    assert (
        repr(copied)
        == repr(given)
        == ("XmcClassifier(config=XmcConfig(tree__max_leaf_size=2), ranker__max_iter=5)")
    )


def test_score_is_p_at_1_by_default_and_any_metric_on_demand() -> None:
    X, Y = separable(24, 4)
    clf = XmcClassifier(tree__max_leaf_size=2).fit(X, Y)
    assert clf.score(X, Y) == 1.0 and clf.score(X, Y, metric="R@3") == 1.0
    pruned = XmcClassifier(tree__max_leaf_size=2, ranker__threshold=100.0).fit(X, Y)
    assert pruned.score(X, Y) == 0.25  # every weight pruned: ties, label 0 first
    assert pruned.score(X, Y, metric="R@5") == 1.0  # 4 labels: all of them in the top 5
    by_config = XmcClassifier(tree__max_leaf_size=2, registry__metric="R@5").fit(X, Y)
    assert by_config.score(X, Y) == 1.0
    with pytest.raises(InputError, match=r"(?s)no metric 'P@7'.*give one of P@1, P@3, P@5, nDCG@1"):
        clf.score(X, Y, metric="P@7")


def test_grid_search_picks_the_threshold_that_keeps_the_weights() -> None:
    X, Y = separable(24, 4)
    search = GridSearchCV(
        XmcClassifier(tree__max_leaf_size=2), {"ranker__threshold": [100.0, 0.05]}, cv=3
    ).fit(X, Y)
    assert search.best_params_ == {"ranker__threshold": 0.05} and search.best_score_ == 1.0
    assert search.cv_results_["mean_test_score"].tolist() == [0.25, 1.0]
    best = search.best_estimator_
    assert repr(best) == "XmcClassifier(tree__max_leaf_size=2, ranker__threshold=0.05)"
    assert [doc[0][0] for doc in best.predict(X[:4], topk=1)] == ["0", "1", "2", "3"]


TEXTS = [
    "red apple fruit", "green apple pie", "ripe banana fruit", "apple banana juice",
    "blue sky clouds", "grey sky rain", "clouds and rain", "clear blue sky",
]  # fmt: skip


def test_pipeline_with_sklearn_tfidf_and_a_grid_over_its_steps() -> None:
    Y = sp.csr_matrix(np.repeat(np.eye(2, dtype=np.float32), 4, axis=0))  # fruit x4, sky x4
    pipe = Pipeline([("tfidf", TfidfVectorizer()), ("xmc", XmcClassifier(tree__max_leaf_size=1))])
    pipe.fit(TEXTS, Y, xmc__label_names=["fruit", "sky"])
    assert [d[0][0] for d in pipe.predict(["an apple", "rain again"], topk=1)] == ["fruit", "sky"]
    assert pipe.score(TEXTS, Y) == 1.0
    assert pipe.get_params()["xmc__tree__max_leaf_size"] == 1
    search = GridSearchCV(
        pipe, {"xmc__ranker__threshold": [100.0, 0.1]}, cv=KFold(2, shuffle=True, random_state=0)
    ).fit(TEXTS, Y)
    assert search.best_params_ == {"xmc__ranker__threshold": 0.1}
    assert search.cv_results_["mean_test_score"].tolist() == [0.5, 1.0]


def test_the_library_never_imports_sklearn() -> None:
    code = (
        "import sys\n"
        "from tests.matrix_helpers import separable\n"
        "from xmc_core import XmcClassifier\n"
        "X, Y = separable(8, 2)\n"
        "clf = XmcClassifier(tree__max_leaf_size=1).fit(X, Y)\n"
        "clf.get_params(); repr(clf); clf.set_params(tree__branching=2); clf.score(X, Y)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
