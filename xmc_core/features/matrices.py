"""Features given as matrices (the PECOS file layout): ``X.npz`` / ``Y.npz`` read, checked and
held as sources of the stage graph, and :class:`GivenFeatures`, the vectorizer of a model
trained on them (it has none: such a model predicts from features only).

Files are scipy sparse ``.npz`` (``scipy.sparse.save_npz``), CSR or CSC; they are read with
``allow_pickle=False``, only once their headers fit the memory budget and, before scipy's or
numba's kernels touch them, once ``indptr`` and every index are in range
(:mod:`xmc_core.storage.npz_guard`). Every problem is an :class:`~xmc_core.errors.InputError`
naming the file, what is wrong and the fix, raised before any training work.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xmc_core.errors import InputError
from xmc_core.progress import byte_size
from xmc_core.storage.artifacts import meta_fields, read_meta, write_meta
from xmc_core.storage.npz_guard import (
    REBUILD_FIX,
    SPARSE_FORMATS,
    check_compressed,
    memory_budget,
    read_sparse,
    sparse_arrays,
)

"""Layouts accepted in a ``.npz`` (others are refused, naming the format found)."""
SAVE_FIX = "save the matrix with scipy.sparse.save_npz"
FEATURE_COLUMN_BYTES = 32
"""Memory a training run holds per feature column (dense per-feature vectors; measured: 10^7
columns add ~0.27 GB to the peak of ``xmc train --x``)."""
LABEL_COLUMN_BYTES = 96
"""Memory a training run holds per label column (names, counts, tree; measured: 10^6 labels
add ~85 MB to the peak of ``xmc train --x``)."""

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


def npz_header(path: Path, flag: str) -> tuple[tuple[int, int], int]:
    """The shape of the sparse matrix in ``path`` and the bytes its arrays take once read, from
    its headers (:func:`~xmc_core.storage.npz_guard.check_npz`: what does not fit the memory
    budget is refused before anything is inflated; only ``format`` and ``shape`` are read).

    ``flag``: the option or argument that named the file, quoted in the fix.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file", f"check the path given to {flag}")
    if not path.is_file():
        raise InputError(path, "not a regular file", f"give {flag} a .npz file")
    header, _, members = sparse_arrays(
        path, ("format", "shape"), InputError, SAVE_FIX, unreadable="not a .npz file",
        format_fix="save it as CSR: scipy.sparse.save_npz(path, matrix.tocsr())",
    )  # fmt: skip
    return header.shape, sum(m.inflated for m in members.values())


def npz_shape(path: Path, flag: str) -> tuple[int, int]:
    """The shape of the sparse matrix in ``path``, from its headers (:func:`npz_header`)."""
    return npz_header(path, flag)[0]


def load_npz(path: Path) -> sp.csr_matrix:
    """The matrix of a checked ``.npz`` (:func:`npz_shape`) as float32 CSR, duplicates summed;
    its ``indptr`` and indices are checked before scipy reads them."""
    m = sp.csr_matrix(read_sparse(path, InputError, SAVE_FIX), dtype=np.float32)
    m.sum_duplicates()
    return m


def check_feature_values(X: sp.csr_matrix, where: str | Path) -> None:
    """Refuse NaN or infinite features (``where``: the file or argument named)."""
    bad = int(np.count_nonzero(~np.isfinite(X.data)))
    if bad:
        raise InputError(
            where, f"{bad} values are NaN or infinite", "replace them with finite numbers"
        )


def check_label_values(Y: sp.csr_matrix, where: str | Path) -> None:
    """Refuse negative, NaN or infinite label values (``where``: the file or argument named)."""
    bad = ~np.isfinite(Y.data) | (Y.data < 0)
    if bad.any():
        raise InputError(
            where,
            f"{int(bad.sum())} label values are negative, NaN or infinite (first: "
            f"{Y.data[bad][0]:g}); Y holds 1 for a relevant label (or a relevance >= 0)",
            "store 0/1 values: Y = (Y > 0).astype('float32')",
        )


def csr_from_memory(M: sp.spmatrix | sp.sparray | np.ndarray, where: str) -> sp.csr_matrix:
    """``M`` (n, d), sparse or dense, as float32 CSR; a CSR/CSC/COO matrix's indices are
    checked before scipy converts it (``where``: the argument named, e.g. ``"X"``)."""
    if sp.issparse(M) and M.format in SPARSE_FORMATS:
        arrays = {"data": M.data, "indices": M.indices, "indptr": M.indptr}
        check_compressed(M.format, M.shape, arrays, where, InputError)
    elif sp.issparse(M) and M.format == "coo":
        for axis, (index, n) in enumerate(zip(M.coords, M.shape, strict=True)):
            if index.size and (index.min() < 0 or index.max() >= n):
                bad = index[(index < 0) | (index >= n)][0]
                problem = f"{('row', 'column')[axis]} index {bad} is outside 0..{n - 1}"
                raise InputError(where, problem, REBUILD_FIX)
    return sp.csr_matrix(M, dtype=np.float32)


class FeatureMatrix:
    """Document features read from a ``.npz``: ``X`` csr (n_docs, n_features) float32, finite."""

    def __init__(self, X: sp.csr_matrix) -> None:
        self.X = X

    @classmethod
    def load(cls, path: str | Path) -> FeatureMatrix:
        """Read ``path``; NaN or infinite values are an error naming the file."""
        X = load_npz(Path(path))
        check_feature_values(X, path)
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
        check_label_values(Y, path)
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
    (n, d), x_bytes = npz_header(files.x, "--x")
    (n_y, n_labels), y_bytes = npz_header(files.y, "--y")
    arrays = x_bytes + y_bytes  # bytes the arrays take once read
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
        arrays += _check_test(files, d, n_labels)
    check_training_memory(files, d, n_labels, arrays)
    if files.label_names is not None:
        count = len(LabelNames.load(files.label_names).names)
        if count != n_labels:
            raise InputError(
                files.label_names,
                f"{count} label names, but {files.y} has {n_labels} columns",
                "give one name a line, in the order of Y's columns",
            )
    return d, n_labels


def check_training_memory(files: MatrixFiles, d: int, n_labels: int, arrays: int) -> None:
    """Refuse, from the headers, a run whose floor exceeds the memory budget: ``arrays``, the
    bytes of every file's arrays once read (:func:`npz_header`), plus
    :data:`FEATURE_COLUMN_BYTES` per feature column and :data:`LABEL_COLUMN_BYTES` per label
    column (what a declared shape costs beyond them)."""
    columns = {files.x: d * FEATURE_COLUMN_BYTES, files.y: n_labels * LABEL_COLUMN_BYTES}
    need, budget = arrays + sum(columns.values()), memory_budget()
    if need > budget.limit:
        widest = max(columns, key=lambda f: columns[f])
        problem = (
            f"training on X ({d:,} columns) and Y ({n_labels:,} columns) needs at least "
            f"{byte_size(need)} (arrays {byte_size(arrays)}, ~{FEATURE_COLUMN_BYTES} bytes per "
            f"feature column, ~{LABEL_COLUMN_BYTES} per label column), over {budget}"
        )
        raise InputError(widest, problem, f"drop unused columns; or {budget.fix(need)}")


def _check_test(files: MatrixFiles, d: int, n_labels: int) -> int:
    """The test files' shapes against train's; returns the bytes of their arrays once read."""
    assert files.x_test is not None and files.y_test is not None
    (n_t, d_t), x_bytes = npz_header(files.x_test, "--x-test")
    (n_ty, l_t), y_bytes = npz_header(files.y_test, "--y-test")
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
    return x_bytes + y_bytes


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


def check_model_input(
    n_features: int, uses_text: bool, shape: tuple[int, int], where: object
) -> None:
    """Refuse features a model cannot take: a model whose encoder needs raw texts, or features
    of ``shape`` (n_docs, width) whose width is not the model's ``n_features``. ``where``: the
    file (or input) named."""
    if uses_text:
        raise InputError(
            where if isinstance(where, str | Path) else None,
            "this model's encoder reads the raw texts, so it cannot predict from features only",
            "give it texts: xmc predict MODEL TEXTS.txt OUT",
        )
    if shape[1] != n_features:
        raise InputError(
            where if isinstance(where, str | Path) else None,
            f"{shape[1]} columns (features), but the model takes {n_features}",
            "featurize the documents as the training matrix was",
        )
