"""``xmc train|predict|evaluate --x X.npz``: the PECOS file layout through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import scipy.sparse as sp

from tests.cli_helpers import xmc
from tests.matrix_helpers import separable, write_npz
from xmc_core import XmcClassifier


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A model trained by ``xmc train --x`` on the separable matrices (train = test)."""
    tmp = tmp_path_factory.mktemp("matrices")
    X, Y = separable(24, 4)
    paths = write_npz(tmp, X=X, Y=Y)
    (tmp / "labels.txt").write_text("ant\nbee\ncat\ndog\n")
    out = xmc(
        "train", "--x", str(paths["X"]), "--y", str(paths["Y"]), str(tmp / "model"),
        "--x-test", str(paths["X"]), "--y-test", str(paths["Y"]),
        "--label-names", str(tmp / "labels.txt"),
        "--set", "tree.max_leaf_size=2", "--set", f"work_dir={tmp / 'work'}",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    paths.update(model=tmp / "model", tmp=tmp, stdout=Path(tmp / "train.out"))
    paths["stdout"].write_text(out.stdout)
    return paths


def test_train_prints_test_metrics_and_writes_a_model_folder(trained: dict[str, Path]) -> None:
    lines = trained["stdout"].read_text().splitlines()
    model = trained["model"]
    assert lines[0].startswith("xmc run summary: xr_linear on X.npz (")
    assert lines[1:] == [
        "  data      24 train / 24 test rows, 4 labels (feature matrices)",
        "  test      P@1 100.00%  P@5 20.00%  nDCG@5 100.00%  PSP@5 100.00%",
        f"  model     {model}  (xmc predict {model} --x X.npz out.npz)",
    ]
    assert json.loads((model / "metrics.json").read_text())["test"]["P@1"] == 1.0
    meta = json.loads((model / "meta.json").read_text())
    assert meta["vectorizer"] == "GivenFeatures" and meta["family"] == "xr_linear"


def test_predict_jsonl_and_npz_agree_with_the_estimator(trained: dict[str, Path]) -> None:
    model, tmp = trained["model"], trained["tmp"]
    out = xmc("predict", str(model), "--x", str(trained["X"]), str(tmp / "p.jsonl"), "--topk", "2")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"wrote predictions of 24 documents to {tmp / 'p.jsonl'}\n"
    records = [json.loads(line) for line in (tmp / "p.jsonl").read_text().splitlines()]
    assert [r["doc_id"] for r in records[:3]] == ["row-0", "row-1", "row-2"]
    assert [r["labels"][0] for r in records[:5]] == ["ant", "bee", "cat", "dog", "ant"]
    clf = XmcClassifier.load(model)
    X = sp.load_npz(trained["X"])
    ranked = clf.predict(X, topk=2)
    assert [r["labels"] for r in records] == [[n for n, _ in doc] for doc in ranked]
    assert [r["scores"] for r in records] == [[round(s, 6) for _, s in doc] for doc in ranked]

    assert xmc("predict", str(model), "--x", str(trained["X"]), str(tmp / "Yp.npz")).returncode == 0
    Yp = sp.load_npz(tmp / "Yp.npz")
    mine = clf.predict_scores(X)
    assert Yp.format == "csr" and Yp.shape == (24, 4)
    assert (Yp.indptr == mine.indptr).all() and (Yp.indices == mine.indices).all()
    assert (Yp.data == mine.data).all()


def test_evaluate_on_matrices(trained: dict[str, Path]) -> None:
    out = xmc("evaluate", str(trained["model"]), "--x", str(trained["X"]), "--y", str(trained["Y"]))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split() == ["P", "100.00", "33.33", "20.00"]
    short = write_npz(trained["tmp"], Y5=sp.load_npz(trained["Y"])[:5])["Y5"]
    bad = xmc("evaluate", str(trained["model"]), "--x", str(trained["X"]), "--y", str(short))
    assert bad.returncode == 2
    assert bad.stderr == (
        f"error: {short}: 5 rows, but {trained['X']} has 24\n"
        "  fix: give one label row per document of X, in the same order\n"
    )


def test_text_input_to_a_matrix_model_says_it_has_no_vectorizer(trained: dict[str, Path]) -> None:
    texts = trained["tmp"] / "in.txt"
    texts.write_text("a document\n")
    out = xmc("predict", str(trained["model"]), str(texts), str(trained["tmp"] / "t.jsonl"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.endswith(
        "error: input: no vectorizer: this model predicts from features only\n  fix: this model "
        "was trained on feature matrices (xmc train --x): give it features, e.g. xmc predict "
        "MODEL --x X.npz OUT, or XmcClassifier.predict(X)\n"
    )
    assert not (trained["tmp"] / "t.jsonl").exists()


def test_bad_input_stops_before_any_work(trained: dict[str, Path]) -> None:
    tmp = trained["tmp"]
    coo = write_npz(tmp, coo=sp.coo_matrix(sp.load_npz(trained["Y"])))["coo"]
    out = xmc("train", "--x", str(trained["X"]), "--y", str(coo), str(tmp / "m2"))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (
        f"error: {coo}: holds a COO matrix; CSR or CSC is needed\n"
        "  fix: save it as CSR: scipy.sparse.save_npz(path, matrix.tocsr())\n"
    )
    xrt = xmc(
        "train", "--x", str(trained["X"]), "--y", str(trained["Y"]), str(tmp / "m2"),
        "--set", "model.kind=xr_transformer",
    )  # fmt: skip
    assert xrt.returncode == 2 and xrt.stderr == (
        "error: input: model.kind=xr_transformer needs raw text, and feature matrices hold none\n"
        "  fix: set model.kind=xr_linear, or train on a text dataset: xmc train DATASET MODEL\n"
    )
    again = xmc("train", "--x", str(trained["X"]), "--y", str(trained["Y"]), str(trained["model"]))
    assert again.returncode == 2 and "already exists" in again.stderr
    assert not (tmp / "m2").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "--x", "X.npz", "M"], "train --x takes --x X.npz --y Y.npz MODEL (no DATASET)"),
        (["train", "--x", "X.npz", "--y", "Y.npz", "D", "M"], "train --x takes"),
        (["train", "D", "M", "--y", "Y.npz"], "--y need --x"),
        (["train", "D"], "train needs DATASET MODEL (or --x X.npz --y Y.npz MODEL)"),
        (["predict", "M", "--x", "X.npz", "S", "O"], "predict --x takes MODEL --x X.npz OUTPUT"),
        (["predict", "M", "S"], "predict needs MODEL SOURCE OUTPUT (or MODEL --x X.npz OUTPUT)"),
        (["evaluate", "M", "--x", "X.npz"], "evaluate --x takes MODEL --x X.npz --y Y.npz"),
        (["evaluate", "M"], "evaluate needs MODEL DATASET (or MODEL --x X.npz --y Y.npz)"),
    ],
)
def test_usage_errors(args: list[str], message: str) -> None:
    out = xmc(*args)
    assert out.returncode == 2 and f"xmc: error: {message}" in out.stderr


def test_train_without_test_matrices_says_so(tmp_path: Path) -> None:
    X, Y = separable(8, 2)
    paths = write_npz(tmp_path, X=X, Y=Y)
    model = tmp_path / "m"
    out = xmc(
        "train", "--x", str(paths["X"]), "--y", str(paths["Y"]), str(model),
        "--set", f"work_dir={tmp_path / 'work'}",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1:] == [
        "  data      8 train / 0 test rows, 2 labels (feature matrices)",
        f"  model     {model}  (xmc predict {model} --x X.npz out.npz)",
        "  test      none (give --x-test and --y-test for metrics)",
    ]
    assert json.loads((model / "metrics.json").read_text()) == {}


def test_serve_refuses_a_matrix_model_at_start_up(trained: dict[str, Path]) -> None:
    """The server answers raw texts: a model without a vectorizer is refused before it binds,
    not answered with a 500 on every request."""
    out = xmc("serve", str(trained["model"]), "--port", "1")  # refused before it would bind
    assert out.returncode == 2
    assert "trained on feature matrices (xmc train --x)" in out.stderr
    assert "fix: serve a model trained on a text dataset" in out.stderr
    assert "Traceback" not in out.stderr
