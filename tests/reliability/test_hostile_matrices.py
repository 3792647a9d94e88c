"""Hostile feature matrices (PECOS's ``.npz`` layout): indices out of range, a broken ``indptr``,
NaN, a deflate bomb, declared shapes no machine holds. ``xmc train|predict|evaluate --x`` answer
``error:``/``fix:`` naming the file (and the row), exit status 2, before any kernel reads them
(before: a segfault, heap corruption, a C++ traceback, or silently wrong predictions);
``XmcClassifier`` raises ``InputError`` with the same words. Each case runs ``xmc`` in-process.
A model folder's arrays get the same checks, and are refused compressed (xmc never writes them
so): a load inflates nothing.
"""

from __future__ import annotations

import os
import shutil
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from tests.matrix_helpers import (
    npy_bytes,
    separable,
    write_bomb_npz,
    write_npz,
    write_raw_npz,
)
from tests.model_helpers import reseal
from xmc_core import XmcClassifier
from xmc_core.app.cli import main
from xmc_core.errors import ArtifactError, InputError
from xmc_core.model.xmc_model import XmcModel
from xmc_core.storage import npz_guard
from xmc_core.storage.npz_guard import REBUILD_FIX

pytestmark = pytest.mark.reliability

SUITE = "hostile-matrices"
# X: separable(8, 4): 8 rows, 6 columns, 2 entries a row (indptr 0, 2, 4, ...); Y: 4 columns
X_INDPTR, X_INDICES = [0, 2, 4, 6, 8, 10, 12, 14, 16], [0, 4, 1, 4, 2, 4, 3, 4] * 2
Y_INDPTR, Y_INDICES = list(range(9)), [0, 1, 2, 3] * 2
HOSTILE: dict[str, tuple[str, tuple, str]] = {  # case: (X or Y, its raw arrays, the problem)
    "X column 10^6 (a segfault)": (
        "X", ((8, 6), X_INDPTR, [0, 4, 1, 10**6, *X_INDICES[4:]]),
        "row 1 (0-based) holds column index 1000000, outside 0..5 (the shape is (8, 6))",
    ),
    "X column -1": (
        "X", ((8, 6), X_INDPTR, [0, 4, 1, 4, 2, 4, 3, -1, *X_INDICES[8:]]),
        "row 3 (0-based) holds column index -1, outside 0..5 (the shape is (8, 6))",
    ),
    "Y label 10^6 (a segfault)": (
        "Y", ((8, 4), Y_INDPTR, [0, 1, 2, 10**6, 0, 1, 2, 3]),
        "row 3 (0-based) holds column index 1000000, outside 0..3 (the shape is (8, 4))",
    ),
    "Y label -1 (heap corruption)": (
        "Y", ((8, 4), Y_INDPTR, [0, 1, -1, 3, 0, 1, 2, 3]),
        "row 2 (0-based) holds column index -1, outside 0..3 (the shape is (8, 4))",
    ),
    "X indptr falls (a C++ traceback)": (
        "X", ((8, 6), [0, 2, 4, 6, 8, 10, 8, 14, 16], X_INDICES),
        "indptr decreases at row 5 (0-based)",
    ),
    "X indptr ends short": (
        "X", ((8, 6), [0, 2, 4, 6, 8, 10, 12, 14, 15], X_INDICES),
        "indptr runs from 0 to 15; it must run from 0 to the 16 stored entries",
    ),
    "Y indptr starts at 1": (
        "Y", ((8, 4), [1, *Y_INDPTR[1:]], Y_INDICES),
        "indptr runs from 1 to 8; it must run from 0 to the 8 stored entries",
    ),
    "Y indptr of another shape": (
        "Y", ((8, 4), Y_INDPTR[:-1], Y_INDICES[:-1]),
        "indptr has 8 entries; the shape (8, 4) needs 9",
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Valid X.npz / Y.npz (separable(8, 4)) and a model trained on them."""
    tmp = tmp_path_factory.mktemp("hostile-matrices")
    X, Y = separable(8, 4)
    paths = write_npz(tmp, X=X, Y=Y)
    XmcClassifier(tree__max_leaf_size=2).fit(X, Y).save(tmp / "model")
    return {**paths, "model": tmp / "model"}


def xmc(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``xmc ARGS`` in-process: exit status 2 and nothing on stdout; returns stderr."""
    assert main([str(a) for a in args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err, out + err
    return err


def raw(tmp_path: Path, case: str) -> tuple[str, Path, str]:
    which, (shape, indptr, indices), problem = HOSTILE[case]
    return which, write_raw_npz(tmp_path / f"{which}.npz", shape, indptr, indices), problem


@pytest.mark.parametrize("case", list(HOSTILE))
def test_train_refuses_hostile_indices(
    good: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    which, bad, problem = raw(tmp_path, case)
    files = {"X": good["X"], "Y": good["Y"], which: bad}
    err = xmc(capsys, "train", "--x", files["X"], "--y", files["Y"], tmp_path / "m",
              "--set", f"work_dir={tmp_path / 'work'}")  # fmt: skip
    assert err == f"error: {bad}: {problem}\n  fix: {REBUILD_FIX}\n"
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("case", list(HOSTILE)[:5])  # the rest: scipy refuses or prunes them
def test_fit_refuses_hostile_indices_with_the_same_words(case: str) -> None:
    which, (shape, indptr, indices), problem = HOSTILE[case]
    hostile = sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=shape)
    X, Y = separable(8, 4)
    with pytest.raises(InputError) as err:
        XmcClassifier().fit(hostile if which == "X" else X, hostile if which == "Y" else Y)
    assert str(err.value) == f"{which}: {problem}\n  fix: {REBUILD_FIX}"


def test_fit_and_predict_check_csc_coo_values_and_rows(good: dict[str, Path]) -> None:
    X, Y = separable(8, 4)
    csc = X.tocsc()
    csc.indices[0] = 8  # a row index of a CSC matrix
    coo = Y.tocoo(copy=True)
    coo.coords[1][0] = -1
    nan = X.copy()
    nan.data[3] = np.nan
    cases = [
        (csc, Y, "X: column 0 (0-based) holds row index 8, outside 0..7 (the shape is (8, 6))"),
        (X, coo, "Y: column index -1 is outside 0..3"),
        (nan, Y, "X: 1 values are NaN or infinite"),
        (X, Y[:7], "Y: 7 rows, but X has 8"),
    ]
    for features, labels, message in cases:
        with pytest.raises(InputError) as err:
            XmcClassifier().fit(features, labels)
        assert str(err.value).split("\n")[0] == message
    clf = XmcClassifier.load(good["model"])
    negative = X.copy()
    negative.indices[5] = -3
    with pytest.raises(InputError, match=r"^X: row 2 \(0-based\) holds column index -3"):
        clf.predict(negative)


@pytest.mark.parametrize("index", [-1, 6, 10**6])
def test_predict_refuses_what_it_answered_wrongly(
    good: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], index: int
) -> None:
    """A negative or out-of-range feature index: rc 0 and silently wrong predictions before."""
    bad = write_raw_npz(tmp_path / "X.npz", (8, 6), X_INDPTR, [0, index, *X_INDICES[2:]])
    err = xmc(capsys, "predict", good["model"], "--x", bad, tmp_path / "p.jsonl")
    problem = f"row 0 (0-based) holds column index {index}, outside 0..5 (the shape is (8, 6))"
    assert err == f"error: {bad}: {problem}\n  fix: {REBUILD_FIX}\n"
    assert not (tmp_path / "p.jsonl").exists()


def test_evaluate_refuses_an_out_of_range_label(
    good: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An out-of-range label index: an IndexError traceback before."""
    _, bad, problem = raw(tmp_path, "Y label 10^6 (a segfault)")
    err = xmc(capsys, "evaluate", good["model"], "--x", good["X"], "--y", bad)
    assert err == f"error: {bad}: {problem}\n  fix: {REBUILD_FIX}\n"


@pytest.fixture
def memory_4gb(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine of 4 GB (budget: 2 GB), whatever this one has."""
    monkeypatch.delenv(npz_guard.MEMORY_BUDGET_ENV, raising=False)
    monkeypatch.setattr(npz_guard, "machine_memory", lambda: 4_000_000_000)


def test_a_4mb_npz_inflating_to_4gib_is_refused_from_its_headers(
    good: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], memory_4gb: None
) -> None:
    header = {"format": np.array("csr"), "shape": np.array([8, 6]), "indptr": np.zeros(9, int)}
    bomb = write_bomb_npz(tmp_path / "X.npz", "data", "<f4", 2**30, header, crc=False)
    assert bomb.stat().st_size < 5_000_000
    err = xmc(capsys, "train", "--x", bomb, "--y", good["Y"], tmp_path / "m",
              "--set", f"work_dir={tmp_path / 'work'}")  # fmt: skip
    assert err == (
        f"error: {bomb}: its arrays take 4.3 GB once read, over the memory budget of 2.0 GB "
        "(50% of this machine's 4.0 GB)\n"
        "  fix: on a machine with that memory, raise the budget: XMC_MEMORY_BUDGET_GB=5 (GB)\n"
    )


def test_npz_headers_that_lie_are_refused(tmp_path: Path) -> None:
    """A header declaring more than its member holds (numpy would allocate from it), a member
    twice (one uncounted), Python objects: refused before any array is read."""
    path = tmp_path / "X.npz"
    header = npy_bytes(np.zeros(4, np.float32))
    lies = {
        "data.npy": header.replace(b"(4,)", b"(9999999,)", 1)[: len(header)],
        "objects.npy": npy_bytes(np.array([None, 1], dtype=object)),
    }
    for name, problem in (
        ("data.npy", "array 'data' declares shape (9999999,) (40.0 MB), more than its member "
         "holds (144 B)"),
        ("objects.npy", "array 'objects' holds Python objects (pickle)"),
        ("twice", "member 'format.npy' appears twice"),
    ):  # fmt: skip
        with zipfile.ZipFile(path, "w") as archive, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns of the duplicate name
            archive.writestr("format.npy", npy_bytes(np.array("csr")))
            archive.writestr(*(("format.npy", b"") if name == "twice" else (name, lies[name])))
        with pytest.raises(InputError) as err:
            npz_guard.check_npz(path, InputError, "the fix")
        assert str(err.value) == f"{path}: {problem}\n  fix: the fix"


@pytest.mark.parametrize(
    ("x_shape", "y_shape", "named", "need"),
    [((200, 2**31 - 1), (200, 10), "X", "68.7 GB"), ((200, 10), (200, 2 * 10**8), "Y", "19.2 GB")],
)
def test_declared_shapes_no_machine_holds_are_refused_from_their_headers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], memory_4gb: None,
    x_shape: tuple[int, int], y_shape: tuple[int, int], named: str, need: str,
) -> None:  # fmt: skip
    """1,800 entries in X (200 rows of 9), one label a row: tiny files, huge shapes."""
    rows = np.arange(200)
    cols = np.arange(1800) * 7919 % x_shape[1]
    X = sp.csr_matrix((np.ones(1800), (np.repeat(rows, 9), cols)), shape=x_shape)
    Y = sp.csr_matrix((np.ones(200), (rows, rows % y_shape[1])), shape=y_shape)
    paths = write_npz(tmp_path, X=X, Y=Y)
    err = xmc(capsys, "train", "--x", paths["X"], "--y", paths["Y"], tmp_path / "m",
              "--set", f"work_dir={tmp_path / 'work'}")  # fmt: skip
    assert err.startswith(
        f"error: {paths[named]}: training on X ({x_shape[1]:,} columns) and Y ({y_shape[1]:,} "
        f"columns) needs at least {need} (arrays "
    )
    assert err.endswith(
        "over the memory budget of 2.0 GB (50% of this machine's 4.0 GB)\n  fix: drop unused "
        f"columns; or on a machine with that memory, raise the budget: XMC_MEMORY_BUDGET_GB="
        f"{int(float(need.split()[0])) + 1} (GB)\n"
    )


def test_the_budget_is_half_the_memory_of_the_machine_or_its_cgroup(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(npz_guard.MEMORY_BUDGET_ENV, raising=False)
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = tmp_path / "memory.max"
    monkeypatch.setattr(npz_guard, "CGROUP_LIMIT", limit)
    for text, memory in (("max\n", physical), ("1000000000\n", 10**9), (None, physical)):
        if text is not None:
            limit.write_text(text)
        else:
            limit.unlink()
        assert npz_guard.machine_memory() == memory
        assert npz_guard.memory_budget().limit == memory // 2


def test_the_budget_is_a_setting_and_a_bad_one_is_named(
    good: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(npz_guard.MEMORY_BUDGET_ENV, "0.0000005")  # 500 B: below any .npz
    err = xmc(capsys, "predict", good["model"], "--x", good["X"], "-")
    assert "over the memory budget of 500 B ($XMC_MEMORY_BUDGET_GB=0.0000005)" in err
    monkeypatch.setenv(npz_guard.MEMORY_BUDGET_ENV, "lots")
    assert xmc(capsys, "predict", good["model"], "--x", good["X"], "-") == (
        "error: $XMC_MEMORY_BUDGET_GB: must be a number of GB above 0, got 'lots'\n"
        "  fix: set it like XMC_MEMORY_BUDGET_GB=8, or unset it (half this machine's memory)\n"
    )


def _compress(path: Path) -> str:
    with np.load(path) as data:
        arrays = dict(data)
    np.savez_compressed(path, **arrays)
    return "' is compressed ("  # the first member met


def _index_out_of_range(path: Path) -> str:
    with np.load(path) as data:
        arrays = dict(data)
    arrays["indices"][-1] = arrays["shape"][1]
    np.savez(path, **arrays)
    return f"holds column index {arrays['shape'][1]}, outside 0.."


def _stored_entries(path: Path) -> int:
    """Entries of the sparse matrix in ``path`` (0: none, or not a sparse matrix)."""
    with np.load(path) as data:
        return data["indices"].size if "indices" in data.files else 0


@pytest.mark.parametrize("damage", [_compress, _index_out_of_range])
def test_model_folder_arrays_are_refused_before_they_are_read(
    good: dict[str, Path], tmp_path: Path, damage: object
) -> None:
    """Every ``.npz`` of a model folder, compressed (a deflate bomb, its checksums correct, is
    refused from its header) or, for a sparse one, with an index out of range."""
    model = good["model"]
    names = [str(p.relative_to(model)) for p in sorted(model.rglob("*.npz"))]
    if damage is _index_out_of_range:
        names = [n for n in names if _stored_entries(model / n)]
    assert len(names) >= 3
    for rel in names:
        work = tmp_path / "model"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(model, work)
        expected = damage(work / rel)  # type: ignore[operator]
        reseal(work, work / rel)
        with pytest.raises(ArtifactError) as err:
            XmcModel.load(work)
        assert str(err.value).startswith(f"{work / rel}: ") and expected in str(err.value)
        assert str(err.value).endswith("\n  fix: re-create it")
