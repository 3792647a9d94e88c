"""Features given as matrices (the PECOS file layout): ``X.npz`` / ``Y.npz`` read, checked and
held as sources of the stage graph, and :class:`GivenFeatures`, the vectorizer of a model
trained on them (it has none: such a model predicts from features only).

Files are scipy sparse ``.npz`` (``scipy.sparse.save_npz``), CSR or CSC; they are read with
``allow_pickle=False``. Every problem is an :class:`~xmc_core.errors.InputError` naming the file,
what is wrong and the fix, raised before any training work.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xmc_core.errors import InputError
from xmc_core.storage.artifacts import meta_fields, read_meta, write_meta

SPARSE_FORMATS = ("csr", "csc")
"""Layouts accepted in a ``.npz`` (others are refused, naming the format found)."""

NO_VECTORIZER_FIX = (
    "this model was trained on feature matrices (xmc train --x): give it features, "
    "e.g. xmc predict MODEL --x X.npz OUT, or XmcClassifier.predict(X)"
)


@dataclass(frozen=True)
class MatrixFiles:
    """The files of a training run on matrices: ``x`` csr (n, d) features, ``y`` csr (n, L)
    labels, optional test pair, optional ``label_names`` (one name a line, Y's column order)."""

    x: Path
    y: Path
    x_test: Path | None = None
    y_test: Path | None = None
    label_names: Path | None = None


def npz_shape(path: Path, flag: str) -> tuple[int, int]:
    """The shape of the sparse matrix in ``path``, read from its header (no values loaded).

    ``flag``: the option or argument that named the file, quoted in the fix.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file", f"check the path given to {flag}")
    if not path.is_file():
        raise InputError(path, "not a regular file", f"give {flag} a .npz file")
    try:
        with np.load(path, allow_pickle=False) as data:
            fmt = data["format"].item() if "format" in data.files else None
            shape = tuple(int(v) for v in data["shape"]) if "shape" in data.files else ()
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as err:
        raise InputError(
            path, f"not a .npz file ({err})", "save the matrix with scipy.sparse.save_npz"
        ) from err
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    if fmt is None or len(shape) != 2:
        raise InputError(
            path, "holds no scipy sparse matrix", "save the matrix with scipy.sparse.save_npz"
        )
    if fmt not in SPARSE_FORMATS:
        raise InputError(
            path,
            f"holds a {fmt.upper()} matrix; CSR or CSC is needed",
            "save it as CSR: scipy.sparse.save_npz(path, matrix.tocsr())",
        )
    return shape[0], shape[1]


def load_npz(path: Path) -> sp.csr_matrix:
    """The matrix of a checked ``.npz`` (:func:`npz_shape`) as float32 CSR, duplicates summed."""
    try:
        m = sp.csr_matrix(sp.load_npz(path), dtype=np.float32)
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as err:
        raise InputError(
            path, f"cannot read the sparse matrix ({err})", "save it with scipy.sparse.save_npz"
        ) from err
    m.sum_duplicates()
    return m


class FeatureMatrix:
    """Document features read from a ``.npz``: ``X`` csr (n_docs, n_features) float32, finite."""

    def __init__(self, X: sp.csr_matrix) -> None:
        self.X = X

    @classmethod
    def load(cls, path: str | Path) -> FeatureMatrix:
        """Read ``path``; NaN or infinite values are an error naming the file."""
        X = load_npz(Path(path))
        bad = int(np.count_nonzero(~np.isfinite(X.data)))
        if bad:
            raise InputError(
                path, f"{bad} values are NaN or infinite", "replace them with finite numbers"
            )
        return cls(X)


class LabelMatrix:
    """Document labels read from a ``.npz``: ``Y`` csr (n_docs, n_labels) float32, every stored
    value > 0 (1: relevant; other positive values: relevance, see ``ranker.importance_weights``)."""

    def __init__(self, Y: sp.csr_matrix) -> None:
        self.Y = Y

    @classmethod
    def load(cls, path: str | Path) -> LabelMatrix:
        """Read ``path``; negative, NaN or infinite values are an error naming the file;
        explicit zeros are dropped."""
        Y = load_npz(Path(path))
        bad = ~np.isfinite(Y.data) | (Y.data < 0)
        if bad.any():
            raise InputError(
                path,
                f"{int(bad.sum())} label values are negative, NaN or infinite (first: "
                f"{Y.data[bad][0]:g}); Y holds 1 for a relevant label (or a relevance >= 0)",
                "store 0/1 values: Y = (Y > 0).astype('float32')",
            )
        Y.eliminate_zeros()
        return cls(Y)


class LabelNames:
    """Label names, one a line of a UTF-8 file, in the order of Y's columns."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    @classmethod
    def load(cls, path: str | Path) -> LabelNames:
        """Read ``path``; an empty or repeated name is an error naming its line."""
        if not Path(path).exists():
            raise InputError(path, "no such file", "check the path given to --label-names")
        if not Path(path).is_file():
            raise InputError(path, "not a regular file", "give --label-names a text file")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise InputError(
                path, f"not UTF-8 text ({err})", "save the label names as UTF-8"
            ) from err
        names = text.removeprefix("\ufeff").split("\n")
        if names and names[-1] == "":
            names.pop()
        names = [n.removesuffix("\r").strip() for n in names]
        seen: dict[str, int] = {}
        for line, name in enumerate(names, 1):
            if not name:
                raise InputError(path, "empty label name", "give every column of Y a name", line)
            if name in seen:
                raise InputError(
                    path,
                    f"label name {name[:200]!r} repeats line {seen[name]}",
                    "give each column of Y its own name",
                    line,
                )
            seen[name] = line
        return cls(names)


def check_matrix_files(files: MatrixFiles) -> tuple[int, int]:
    """Every check that reads only headers and names: the files exist and hold CSR/CSC
    matrices, row counts match, test columns match train, one label name per column of Y.
    Returns (n_features, n_labels)."""
    n, d = npz_shape(files.x, "--x")
    n_y, n_labels = npz_shape(files.y, "--y")
    if n_y != n:
        raise InputError(
            files.y,
            f"{n_y} rows, but {files.x} has {n}",
            "give one label row per document of X, in the same order",
        )
    if n == 0:
        raise InputError(files.x, "no rows (documents)", "give at least one training document")
    if (files.x_test is None) != (files.y_test is None):
        raise InputError(None, "--x-test and --y-test go together", "give both, or neither")
    if files.x_test is not None and files.y_test is not None:
        _check_test(files, d, n_labels)
    if files.label_names is not None:
        count = len(LabelNames.load(files.label_names).names)
        if count != n_labels:
            raise InputError(
                files.label_names,
                f"{count} label names, but {files.y} has {n_labels} columns",
                "give one name a line, in the order of Y's columns",
            )
    return d, n_labels


def _check_test(files: MatrixFiles, d: int, n_labels: int) -> None:
    assert files.x_test is not None and files.y_test is not None
    n_t, d_t = npz_shape(files.x_test, "--x-test")
    n_ty, l_t = npz_shape(files.y_test, "--y-test")
    if d_t != d:
        raise InputError(
            files.x_test,
            f"{d_t} columns (features), but {files.x} has {d}",
            "featurize the test documents with the training vocabulary",
        )
    if l_t != n_labels:
        raise InputError(
            files.y_test,
            f"{l_t} columns (labels), but {files.y} has {n_labels}",
            "use the training label columns for the test labels",
        )
    if n_ty != n_t:
        raise InputError(
            files.y_test,
            f"{n_ty} rows, but {files.x_test} has {n_t}",
            "give one label row per document of X, in the same order",
        )


class GivenFeatures:
    """The vectorizer of a model trained on given features: there is none. ``n_features``: the
    width of the feature rows it takes; asking it for text features is an error that says so."""

    def __init__(self, n_features: int) -> None:
        self.n_features = n_features

    def _no_text(self) -> InputError:
        return InputError(
            None, "no vectorizer: this model predicts from features only", NO_VECTORIZER_FIX
        )

    @property
    def tokenizer(self) -> None:
        """Raises: there is no tokenizer (featurizing a dataset folder needs one)."""
        raise self._no_text()

    def transform(self, texts: object) -> sp.csr_matrix:
        """Raises: raw texts cannot be featurized without a vectorizer."""
        raise self._no_text()

    def save(self, folder: str | Path) -> None:
        """Write ``meta.json`` (the feature width)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_meta(folder, "GivenFeatures", {"n_features": self.n_features})

    @classmethod
    def load(cls, folder: str | Path) -> GivenFeatures:
        """Read a folder written by :meth:`save`."""
        meta = read_meta(folder, "GivenFeatures")
        with meta_fields(Path(folder)):
            return cls(int(meta["n_features"]))


def check_model_input(n_features: int, uses_text: bool, X: sp.spmatrix, where: object) -> None:
    """Refuse features a model cannot take: a model whose encoder needs raw texts, or ``X``
    whose width is not the model's ``n_features``. ``where``: the file (or input) named."""
    if uses_text:
        raise InputError(
            where if isinstance(where, str | Path) else None,
            "this model's encoder reads the raw texts, so it cannot predict from features only",
            "give it texts: xmc predict MODEL TEXTS.txt OUT",
        )
    if X.shape[1] != n_features:
        raise InputError(
            where if isinstance(where, str | Path) else None,
            f"{X.shape[1]} columns (features), but the model takes {n_features}",
            "featurize the documents as the training matrix was",
        )
