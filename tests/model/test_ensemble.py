"""Ensembles (``xmc_core/families/ensemble/``): the combination
rules on a hand-computed example, shared encoder blocks, save -> load -> predict, the member
configs, a text-needing member on a corpus without text, and P@1 on the synthetic corpus."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from tests.cli_helpers import xmc
from xmc_core.app.describe import describe_model, format_model
from xmc_core.config import PredictConfig, XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.errors import ArtifactError, ConfigError, InputError
from xmc_core.families.configured import family_requirements, trained_families
from xmc_core.families.ensemble.config import EnsembleConfig
from xmc_core.families.ensemble.parts import EnsembleEncoder, EnsembleRanker, combine_scores
from xmc_core.families.train import check_dataset, train_in_process
from xmc_core.model import registry
from xmc_core.model.xmc_model import TfidfEncoder, XmcModel
from xmc_core.storage.artifacts import read_meta, write_meta

# Two members, three documents, four labels (a member's ranked labels only).
A = sp.csr_matrix(np.array([[0.9, 0.5, 0, 0], [0, 0, 0.8, 0], [0, 0, 0, 0]]))
B = sp.csr_matrix(np.array([[0, 0.6, 0, 0.4], [0.2, 0, 0.2, 0], [0, 0, 0, 1.0]]))


def sigmoid(x: float) -> float:
    """The softmax of two scores differing by x, for the higher one."""
    return 1 / (1 + math.exp(-x))


def test_average_is_the_mean_score_a_missing_label_counting_zero() -> None:
    want = [[0.45, 0.55, 0, 0.2], [0.1, 0, 0.5, 0], [0, 0, 0, 0.5]]
    np.testing.assert_allclose(combine_scores([A, B], "average").toarray(), want, rtol=1e-6)


def test_rank_average_is_the_mean_reciprocal_rank_ties_to_the_lower_label() -> None:
    # A: doc 0 l0 rank 1, l1 rank 2; doc 1 l2 rank 1. B: doc 0 l1 rank 1, l3 rank 2; doc 1 l0
    # and l2 tie at 0.2, l0 (the lower id) rank 1, l2 rank 2; doc 2 l3 rank 1.
    want = [[0.5, 0.75, 0, 0.25], [0.5, 0, 0.75, 0], [0, 0, 0, 0.5]]
    got = combine_scores([A, B], "rank_average").toarray()
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("T", [1.0, 0.5])
def test_softmax_average_is_the_mean_of_each_members_softmax_at_temperature(T: float) -> None:
    a0, b1 = sigmoid(0.4 / T), sigmoid(0.2 / T)  # A doc 0: 0.9 vs 0.5; B doc 0: 0.6 vs 0.4
    want = [
        [a0 / 2, ((1 - a0) + b1) / 2, 0, (1 - b1) / 2],
        [0.5 / 2, 0, (1 + 0.5) / 2, 0],  # A: l2 alone; B: l0, l2 equal
        [0, 0, 0, 1 / 2],  # A ranks nothing
    ]
    got = combine_scores([A, B], "softmax_average", T).toarray()
    np.testing.assert_allclose(got, want, rtol=1e-6)


class Fixed:
    """A ranker that returns fixed scores (cut to top-k) and records the columns it saw."""

    def __init__(self, scores: sp.csr_matrix) -> None:
        self.scores, self.seen = scores, None
        self.predict_cfg = PredictConfig()

    @property
    def n_labels(self) -> int:
        return self.scores.shape[1]

    def predict(self, X: sp.csr_matrix, beam_size: Any = None, topk: Any = None) -> Any:
        self.seen = X.toarray()
        from xmc_core.families.ensemble.parts import top_k_scores

        return top_k_scores(self.scores, topk)


def test_ranker_gives_each_member_its_columns_and_keeps_the_top_k() -> None:
    cfg = EnsembleConfig(combine="rank_average", member_topk=2)
    a, b = Fixed(A), Fixed(B)
    ranker = EnsembleRanker(cfg, PredictConfig(topk=1)).set_members([a, b], [(0, 2), (2, 3)])
    X = sp.csr_matrix(np.arange(9, dtype=np.float32).reshape(3, 3))
    got = ranker.predict(X)
    assert a.seen.tolist() == [[0, 1], [3, 4], [6, 7]] and b.seen.tolist() == [[2], [5], [8]]
    assert got.toarray().tolist() == [[0, 0.75, 0, 0], [0, 0, 0.75, 0], [0, 0, 0, 0.5]]
    with pytest.raises(ValueError, match="X has 2 features, the ensemble 3"):
        ranker.predict(X[:, :2])


class Scaled:
    """A stateful encoder: ``factor * X``."""

    uses_text = False

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def transform(self, X: sp.csr_matrix, texts: Any = None) -> sp.csr_matrix:
        return sp.csr_matrix(X * self.factor)

    def save(self, folder: str | Path) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        write_meta(Path(folder), "Scaled", {"factor": self.factor})

    @classmethod
    def load(cls, folder: str | Path, device: str = "auto") -> Scaled:
        return cls(float(read_meta(folder, "Scaled")["factor"]))


def test_identical_encoders_share_one_block_and_copy_nothing() -> None:
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32))
    same = EnsembleEncoder.of([TfidfEncoder(), TfidfEncoder(), TfidfEncoder()])
    assert same.member_blocks == [0, 0, 0] and len(same.blocks) == 1
    assert same.transform(X, None) is X  # the TF-IDF rows themselves
    assert same.block_columns([2]) == [(0, 2), (0, 2), (0, 2)]


def test_different_encoders_are_side_by_side(tmp_path: Path) -> None:
    registry.register_part(Scaled)
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32))
    mixed = EnsembleEncoder.of([TfidfEncoder(), Scaled(3.0), TfidfEncoder(), Scaled(3.0)])
    assert mixed.member_blocks == [0, 1, 0, 1]
    assert mixed.transform(X).toarray().tolist() == [[1, 0, 3, 0], [0, 2, 0, 6]]
    assert mixed.block_columns([2, 2]) == [(0, 2), (2, 4), (0, 2), (2, 4)]
    assert EnsembleEncoder.of([Scaled(3.0), Scaled(2.0)]).member_blocks == [0, 1]
    mixed.save(tmp_path / "enc")
    assert json.loads((tmp_path / "enc" / "meta.json").read_text())["blocks"] == [
        "TfidfEncoder",
        "Scaled",
    ]
    loaded = EnsembleEncoder.load(tmp_path / "enc")
    assert (loaded.transform(X) != mixed.transform(X)).nnz == 0


# --- the family, trained on a small synthetic corpus ---------------------------------------

DEEP = ["tree.branching=2", "tree.max_leaf_size=8", "predict.beam_size=2"]
"""Deep binary trees and a narrow beam: each member's beam misses labels the others find."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    dest = tmp_path_factory.mktemp("ens") / "synthetic"
    write_synthetic_dataset(dest, SyntheticSpec().scaled(0.25), rows_per_group=1000)
    return Corpus(dest)


@pytest.fixture(scope="module")
def trained(corpus: Corpus, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    sets = ["model.kind=ensemble", "tfidf.max_features=20000", *DEEP]
    cfg = XmcConfig.load(None, [f"work_dir={tmp_path_factory.mktemp('w')}", *sets])
    return {"cfg": cfg, **train_in_process(corpus, cfg)}


def frequency_baseline_p1(train_Y: sp.csr_matrix, test_Y: sp.csr_matrix) -> float:
    """P@1 when every document gets the most frequent training label."""
    top = int(np.argmax(np.bincount(train_Y.indices, minlength=train_Y.shape[1])))
    return float(test_Y[:, top].sum() / test_Y.shape[0])


def test_three_tree_seeds_beat_the_baseline_and_the_members_mean(trained: dict) -> None:
    members = [m.values["P@1"] for m in trained["member_evaluations"]]
    p1 = trained["evaluation"].values["P@1"]
    baseline = frequency_baseline_p1(trained["model_train"].Y, trained["model_test"].Y)
    assert trained["cfg"].ensemble.combine == "rank_average"  # the default rule
    assert len(members) == 3 and len(set(members)) > 1, members  # the trees differ
    assert p1 > baseline + 0.5, (p1, baseline)
    assert p1 >= float(np.mean(members)), (p1, members)


def test_members_are_trees_of_their_seeds(trained: dict) -> None:
    ranker = trained["model"].ranker
    trees = [m.tree_.C[-1] for m in ranker.members_]
    assert (trees[0] != trees[1]).nnz > 0 and (trees[1] != trees[2]).nnz > 0
    assert trained["model"].encoder.member_blocks == [0, 0, 0]  # three TF-IDF members
    assert trained["model_test"] is trained["test"]  # one block: the TF-IDF split itself


def test_save_load_predict_identical(trained: dict, corpus: Corpus, tmp_path: Path) -> None:
    model = trained["model"]
    model.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "ranker" / "meta.json").read_text())
    assert meta["members"] == ["XRLinearModel"] * 3 and meta["columns"] == [[0, 20000]] * 3
    loaded = XmcModel.load(tmp_path / "m")
    assert isinstance(loaded.ranker, EnsembleRanker) and loaded.family == "ensemble"
    texts = corpus.read_split("test", ["text"]).column("text").to_pylist()[:50]
    a, b = model.predict(texts), loaded.predict(texts)
    assert a.nnz > 0 and (a != b).nnz == 0
    info = format_model(describe_model(tmp_path / "m"))  # xmc info
    assert "encoder: TF-IDF, 20,000 features (n-grams up to 2) (EnsembleEncoder)\n" in info
    assert "\nranker: EnsembleRanker on 20,000 input features\nmembers: 3 (XRLinearModel, " in info
    assert "XRLinearModel), combined by rank_average\n" in info
    damaged = tmp_path / "m" / "ranker" / "members" / "1" / "W1.npz"
    damaged.write_bytes(damaged.read_bytes()[:40])
    with pytest.raises(ArtifactError, match=r"W1\.npz"):
        XmcModel.load(tmp_path / "m")


def test_the_combination_rule_changes_no_member(trained: dict) -> None:
    model, test = trained["model"], trained["model_test"]
    members = model.ranker.members_
    for rule in ("average", "softmax_average"):
        cfg = trained["cfg"].ensemble.model_copy(update={"combine": rule})
        model.ranker = EnsembleRanker(cfg, model.ranker.predict_cfg).set_members(
            members, model.ranker.columns_
        )
        assert model.evaluate(test, trained["cfg"].eval)["P@1"] > 0.7, rule


# --- config and corpus checks -------------------------------------------------------------


def load(*members: str) -> XmcConfig:
    return XmcConfig.load(None, ["model.kind=ensemble", f"ensemble.members=[{', '.join(members)}]"])


def test_member_configs_apply_the_overrides_to_the_whole_config() -> None:
    cfg = XmcConfig.load(None, ["model.kind=ensemble", "tree.branching=4"])
    members = cfg.ensemble.member_configs(cfg)
    assert [m.tree.seed for m in members] == [0, 1, 2]
    assert {(m.model.kind, m.tree.branching) for m in members} == {("xr_linear", 4)}
    assert [m.label for m, _ in trained_families(cfg)] == [
        f"xr_linear tree.seed={s}" for s in range(3)
    ]


@pytest.mark.parametrize(
    ("member", "message"),
    [
        ("{kind: ensemble}", "ensemble.members[0].kind: an ensemble member cannot be an ensemble"),
        ("{kind: xr-lin}", "ensemble.members[0] (kind xr-lin, set []): model.kind: unknown"),
        (
            "{set: [tfidf.min_df=2]}",
            "ensemble.members[0].set: 'tfidf.min_df=2' changes tfidf, which a member cannot "
            "change: the members share one vectorizer; set it for the whole ensemble (--set "
            "tfidf.min_df=2)",
        ),
        ("{set: [data.dataset=x]}", "'data.dataset=x' changes data, which a member cannot"),
        ("{set: [model.kind=xr_linear]}", "give the member's family as its kind"),
        (
            "{set: [tree.branching=3]}",
            "ensemble.members[0] (kind xr_linear, set ['tree.branching=3']): tree.branching=3 "
            "must be a power of two",
        ),
        ("{set: [tree.seed]}", "'tree.seed' is not KEY=VALUE"),
        ("{set: [tree.seed.x=1]}", "'tree.seed.x=1': 'seed' is not a section"),
    ],
)
def test_a_bad_member_is_a_config_error_naming_it(member: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(member)
    assert message in str(err.value)


def test_a_pyfunc_pins_what_its_members_import() -> None:
    linear = load("{kind: xr_linear}")
    mixed = load("{kind: xr_linear}", "{kind: xr_transformer}")
    assert family_requirements("ensemble", linear) == []
    assert "torch" in family_requirements("ensemble", mixed)
    assert "onnxruntime" not in family_requirements("ensemble", mixed)
    fast = load("{kind: xr_transformer, set: [matcher.predict_runtime=onnx-int8]}")
    assert "onnxruntime" in family_requirements("ensemble", fast)  # as its member asks


@pytest.fixture(scope="module")
def bow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src, dest = tmp_path_factory.mktemp("ens-xc"), tmp_path_factory.mktemp("ens-bow") / "bow"
    for split in ("train", "test"):
        (src / f"{split}.txt").write_text("2 4 3\n0,1 0:1.0 2:0.5\n2 1:1.0 3:2.0\n")
    ingest("xc", src, dest, IngestOptions())
    return dest


def test_a_text_member_on_a_corpus_without_text_is_refused_before_any_work(
    bow: Path, tmp_path: Path
) -> None:
    cfg = load("{kind: xr_linear}", "{kind: xr_transformer}")
    with pytest.raises(InputError) as err:
        check_dataset(bow, cfg)
    assert str(err.value) == (
        f"{bow}: ensemble.members[1].kind xr_transformer needs a raw-text corpus, this one is "
        "bow\n  fix: pass a text dataset, or set ensemble.members[1].kind=xr_linear"
    )
    members = "ensemble.members=[{kind: xr_linear}, {kind: xr_transformer}]"
    done = xmc("train", str(bow), str(tmp_path / "m"), "--set", "model.kind=ensemble",
               "--set", members, "--set", f"work_dir={tmp_path / 'w'}")  # fmt: skip
    assert done.returncode != 0 and "ensemble.members[1].kind xr_transformer" in done.stderr
    assert not (tmp_path / "w").exists() and not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (
            "{kind: xr_transformer}",
            "ensemble.members[1].kind=xr_transformer needs raw text, and feature matrices hold "
            "none\n  fix: set ensemble.members[1].kind=xr_linear, or train on a text dataset",
        ),
        (
            "{set: [label_features.kind=label_text]}",
            "label_features.kind=label_text (in ensemble.members[1].set) needs label texts, and "
            "feature matrices hold none\n  fix: set label_features.kind=pifa (in "
            "ensemble.members[1].set)",
        ),
    ],
)
def test_a_member_feature_matrices_cannot_feed_is_refused(
    member: str, message: str, tmp_path: Path
) -> None:
    from xmc_core.model.estimator import XmcClassifier

    cfg = load("{}", member).model_copy(update={"work_dir": tmp_path})
    X, Y = sp.csr_matrix(np.eye(4, dtype=np.float32)), sp.csr_matrix(np.eye(4, 2))
    with pytest.raises(InputError) as err:
        XmcClassifier(cfg).fit(X, Y)
    assert message in str(err.value)
    assert not any(tmp_path.iterdir())
