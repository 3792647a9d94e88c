"""Feature matrices as training input: every check's exact message, before any work."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from tests.matrix_helpers import separable, write_npz
from xmc_core.config import XmcConfig
from xmc_core.errors import ArtifactError, InputError
from xmc_core.families.matrices import check_matrix_run, label_index, matrix_split
from xmc_core.features.matrices import (
    FeatureMatrix,
    GivenFeatures,
    LabelMatrix,
    LabelNames,
    MatrixFiles,
    check_model_input,
)


@pytest.fixture
def files(tmp_path: Path) -> MatrixFiles:
    X, Y = separable(8, 4)
    p = write_npz(tmp_path, X=X, Y=Y, Xt=X[:3], Yt=Y[:3])
    return MatrixFiles(p["X"], p["Y"], p["Xt"], p["Yt"])


def _error(files: MatrixFiles, *overrides: str) -> str:
    with pytest.raises(InputError) as err:
        check_matrix_run(files, XmcConfig.load(None, list(overrides)))
    return str(err.value)


def test_good_files_give_the_widths(files: MatrixFiles) -> None:
    assert check_matrix_run(files, XmcConfig()) == (6, 4)


def test_missing_file_names_it_and_the_flag(files: MatrixFiles, tmp_path: Path) -> None:
    bad = MatrixFiles(tmp_path / "nope.npz", files.y)
    assert _error(bad) == f"{tmp_path}/nope.npz: no such file\n  fix: check the path given to --x"
    folder = MatrixFiles(files.x, tmp_path)
    assert _error(folder) == f"{tmp_path}: not a regular file\n  fix: give --y a .npz file"


def test_not_a_sparse_npz(files: MatrixFiles, tmp_path: Path) -> None:
    text = tmp_path / "X.txt"
    text.write_text("1 2 3\n")
    message = _error(MatrixFiles(text, files.y))
    assert message.startswith(f"{text}: not a .npz file (")
    assert message.endswith("\n  fix: save the matrix with scipy.sparse.save_npz")
    dense = tmp_path / "dense.npz"
    np.savez(dense, X=np.eye(3))
    assert _error(MatrixFiles(dense, files.y)) == (
        f"{dense}: holds no scipy sparse matrix\n  fix: save the matrix with scipy.sparse.save_npz"
    )
    coo = write_npz(tmp_path, coo=sp.coo_matrix(np.eye(8)))["coo"]
    assert _error(MatrixFiles(coo, files.y)) == (
        f"{coo}: holds a COO matrix; CSR or CSC is needed\n"
        "  fix: save it as CSR: scipy.sparse.save_npz(path, matrix.tocsr())"
    )


def test_csc_is_read_as_csr(tmp_path: Path) -> None:
    X, _ = separable(8, 4)
    path = write_npz(tmp_path, X=X.tocsc())["X"]
    got = FeatureMatrix.load(path).X
    assert got.format == "csr" and got.dtype == np.float32 and (got != X).nnz == 0


def test_shapes_must_agree(files: MatrixFiles, tmp_path: Path) -> None:
    X, Y = separable(8, 4)
    p = write_npz(tmp_path, Y7=Y[:7], X5=X[:, :5], Y3=Y[:, :3], Y2=Y[:2])
    assert _error(MatrixFiles(files.x, p["Y7"])) == (
        f"{p['Y7']}: 7 rows, but {files.x} has 8\n"
        "  fix: give one label row per document of X, in the same order"
    )
    assert _error(MatrixFiles(files.x, files.y, p["X5"], files.y_test)) == (
        f"{p['X5']}: 5 columns (features), but {files.x} has 6\n"
        "  fix: featurize the test documents with the training vocabulary"
    )
    assert _error(MatrixFiles(files.x, files.y, files.x_test, p["Y3"])) == (
        f"{p['Y3']}: 3 columns (labels), but {files.y} has 4\n"
        "  fix: use the training label columns for the test labels"
    )
    assert _error(MatrixFiles(files.x, files.y, files.x_test, p["Y2"])) == (
        f"{p['Y2']}: 2 rows, but {files.x_test} has 3\n"
        "  fix: give one label row per document of X, in the same order"
    )
    assert _error(MatrixFiles(files.x, files.y, files.x_test)) == (
        "input: --x-test and --y-test go together\n  fix: give both, or neither"
    )


def test_label_names(files: MatrixFiles, tmp_path: Path) -> None:
    names = tmp_path / "labels.txt"
    names.write_text("a\nb\nc\n")
    assert _error(MatrixFiles(files.x, files.y, label_names=names)) == (
        f"{names}: 3 label names, but {files.y} has 4 columns\n"
        "  fix: give one name a line, in the order of Y's columns"
    )
    names.write_text("a\nb\na\nd\n")
    with pytest.raises(InputError) as err:
        LabelNames.load(names)
    assert str(err.value) == (
        f"{names} row 3: label name 'a' repeats line 1\n  fix: give each column of Y its own name"
    )
    names.write_text("a\n\nc\nd\n")
    with pytest.raises(InputError) as err:
        LabelNames.load(names)
    assert str(err.value) == (
        f"{names} row 2: empty label name\n  fix: give every column of Y a name"
    )
    with pytest.raises(InputError) as err:
        LabelNames.load(tmp_path)
    assert (
        str(err.value) == f"{tmp_path}: not a regular file\n  fix: give --label-names a text file"
    )
    names.write_bytes(b"a\n\xff\n")
    with pytest.raises(InputError, match="not UTF-8 text"):
        LabelNames.load(names)
    names.write_text("\ufeffa\r\nb\r\nc\r\nd")  # BOM, CRLF, no final newline
    assert LabelNames.load(names).names == ["a", "b", "c", "d"]
    assert label_index(None, 3).names.to_pylist() == ["0", "1", "2"]


def test_values_are_checked_when_read(tmp_path: Path) -> None:
    X = sp.csr_matrix(np.array([[1.0, np.nan], [np.inf, 2.0]]))
    Y = sp.csr_matrix(np.array([[1.0, -2.0], [0.5, -1.0]]))
    p = write_npz(tmp_path, X=X, Y=Y)
    with pytest.raises(InputError) as err:
        FeatureMatrix.load(p["X"])
    assert str(err.value) == (
        f"{p['X']}: 2 values are NaN or infinite\n  fix: replace them with finite numbers"
    )
    with pytest.raises(InputError) as err:
        LabelMatrix.load(p["Y"])
    assert str(err.value) == (
        f"{p['Y']}: 2 label values are negative, NaN or infinite (first: -2); Y holds 1 for a "
        "relevant label (or a relevance >= 0)\n"
        "  fix: store 0/1 values: Y = (Y > 0).astype('float32')"
    )
    relevance = write_npz(tmp_path, R=sp.csr_matrix(np.array([[0.0, 2.0], [0.5, 0.0]])))["R"]
    stored = sp.csr_matrix(([0.0, 2.0, 0.5], [0, 1, 0], [0, 2, 3]), shape=(2, 2))
    sp.save_npz(relevance, stored)  # an explicit zero is dropped, relevances kept
    got = LabelMatrix.load(relevance).Y
    assert got.nnz == 2 and got.toarray().tolist() == [[0.0, 2.0], [0.5, 0.0]]


def test_config_that_needs_text_is_refused(files: MatrixFiles) -> None:
    assert _error(files, "model.kind=xr_transformer") == (
        "input: model.kind=xr_transformer needs raw text, and feature matrices hold none\n"
        "  fix: set model.kind=xr_linear, or train on a text dataset: xmc train DATASET MODEL"
    )
    assert _error(files, "label_features.kind=label_text") == (
        "input: label_features.kind=label_text needs label texts, and feature matrices hold "
        "none\n  fix: set label_features.kind=pifa"
    )


def test_empty_test_split_and_row_ids() -> None:
    empty = matrix_split(None, None, 6, 4)
    assert empty.X.shape == (0, 6) and empty.Y.shape == (0, 4) and len(empty.doc_ids) == 0
    X, Y = separable(3, 3)
    split = matrix_split(FeatureMatrix(X), LabelMatrix(Y), 5, 3)
    assert split.doc_ids.to_pylist() == ["row-0", "row-1", "row-2"]


def test_given_features_refuse_text_and_round_trip(tmp_path: Path) -> None:
    given = GivenFeatures(6)
    message = (
        "input: no vectorizer: this model predicts from features only\n  fix: this model was "
        "trained on feature matrices (xmc train --x): give it features, e.g. xmc predict MODEL "
        "--x X.npz OUT, or XmcClassifier.predict(X)"
    )
    with pytest.raises(InputError) as err:
        given.transform(["some text"])
    assert str(err.value) == message
    with pytest.raises(InputError):
        given.tokenizer  # noqa: B018 (featurizing a dataset folder asks for it)
    given.save(tmp_path / "v")
    assert GivenFeatures.load(tmp_path / "v").n_features == 6
    (tmp_path / "v" / "meta.json").write_text("{}")
    with pytest.raises(ArtifactError):
        GivenFeatures.load(tmp_path / "v")


def test_model_input_width_and_text_encoders() -> None:
    shape = (2, 5)
    check_model_input(5, False, shape, "X.npz")
    with pytest.raises(InputError) as err:
        check_model_input(6, False, shape, "X.npz")
    assert str(err.value) == (
        "X.npz: 5 columns (features), but the model takes 6\n"
        "  fix: featurize the documents as the training matrix was"
    )
    with pytest.raises(InputError) as err:
        check_model_input(5, True, shape, "X.npz")
    assert str(err.value) == (
        "X.npz: this model's encoder reads the raw texts, so it cannot predict from features "
        "only\n  fix: give it texts: xmc predict MODEL TEXTS.txt OUT"
    )
