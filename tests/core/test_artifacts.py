"""Artifact folders: checksums, class and format checks; atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.errors import ArtifactError
from xmc_core.storage.artifacts import load_csr, read_meta, save_arrays, save_csr, write_meta
from xmc_core.storage.atomic import atomic_dir, write_json


def make(tmp_path: Path) -> Path:
    folder = tmp_path / "a"
    folder.mkdir()
    save_csr(folder / "m.npz", sp.eye(3, format="csr"))
    save_arrays(folder / "v.npz", v=np.arange(3))
    write_meta(folder, "Thing", {"n": 3})
    return folder


def test_meta_round_trip_and_checksums(tmp_path: Path) -> None:
    folder = make(tmp_path)
    meta = read_meta(folder, "Thing")
    assert meta["n"] == 3 and set(meta["files"]) == {"m.npz", "v.npz"}
    assert (load_csr(folder / "m.npz") != sp.eye(3)).nnz == 0


def test_truncated_file_is_named(tmp_path: Path) -> None:
    folder = make(tmp_path)
    data = (folder / "m.npz").read_bytes()
    (folder / "m.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match=r"m\.npz: checksum mismatch"):
        read_meta(folder, "Thing")
    with pytest.raises(ArtifactError, match=r"m\.npz: not a \.npz file \(File is not a zip"):
        load_csr(folder / "m.npz")


def test_missing_file_edited_meta_wrong_class_and_format(tmp_path: Path) -> None:
    folder = make(tmp_path)
    (folder / "v.npz").unlink()
    with pytest.raises(ArtifactError, match=r"v\.npz: file listed in meta.json is missing"):
        read_meta(folder, "Thing")
    meta = json.loads((folder / "meta.json").read_text())
    write_json(folder / "meta.json", {**meta, "format": 99})
    with pytest.raises(ArtifactError, match="artifact format 99"):
        read_meta(folder, "Thing", verify=False)
    with pytest.raises(ArtifactError, match="expected 'Other'"):
        read_meta(folder, "Other", verify=False)
    (folder / "meta.json").write_text("{oops")
    with pytest.raises(ArtifactError, match="not valid JSON"):
        read_meta(folder, "Thing")
    with pytest.raises(ArtifactError, match=r"meta\.json is missing"):
        read_meta(tmp_path / "nowhere", "Thing")


def test_atomic_dir_leaves_nothing_on_failure_and_replaces_on_success(tmp_path: Path) -> None:
    target = tmp_path / "out"
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "half").write_text("x")
        raise RuntimeError("crash")
    assert list(tmp_path.iterdir()) == []
    with atomic_dir(target) as tmp:
        (tmp / "v1").write_text("1")
    with pytest.raises(FileExistsError), atomic_dir(target):
        pass
    with atomic_dir(target, overwrite=True) as tmp:
        (tmp / "v2").write_text("2")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert [p.name for p in target.iterdir()] == ["v2"]


def test_parent_meta_covers_its_saved_parts(tmp_path: Path) -> None:
    """Two artifacts whose top-level files are equal but whose parts differ have different
    ``meta.json`` checksums (their cache fingerprints), and an edited part is caught."""
    from xmc_core.storage.fingerprint import path_fingerprint

    folders = []
    for n in (1, 2):
        folder = tmp_path / f"parent-{n}"
        (folder / "part").mkdir(parents=True)
        save_arrays(folder / "part" / "w.npz", w=np.arange(n))
        write_meta(folder / "part", "Part", {})
        save_arrays(folder / "same.npz", v=np.arange(3))
        write_meta(folder, "Parent", {})
        folders.append(folder)
    assert read_meta(folders[0], "Parent")["parts"].keys() == {"part"}
    assert path_fingerprint(folders[0]) != path_fingerprint(folders[1])
    write_json(folders[0] / "part" / "meta.json", {"class": "Part", "edited": True})
    with pytest.raises(ArtifactError, match=r"part/meta\.json: checksum mismatch"):
        read_meta(folders[0], "Parent")


def test_atomic_outputs_get_umask_permissions_not_private_ones(tmp_path: Path) -> None:
    """A worker running as another user can read what was written (not mkstemp's 0600)."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        write_json(tmp_path / "f.json", {"a": 1})
        with atomic_dir(tmp_path / "d") as tmp:
            (tmp / "x.txt").write_text("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755


def test_npy_headers_are_parsed_under_one_lock(tmp_path: Path) -> None:
    """CPython 3.11 < 3.11.8 fails ast.parse on two threads at once (gh-106905); numpy parses
    .npy headers with it, so xmc_core.storage wraps numpy's header reader in a lock."""
    import threading

    from xmc_core.storage import npy_lock, npz_guard  # noqa: F401  (importing installs it)

    np.save(tmp_path / "a.npy", np.arange(3))
    assert npy_lock.install() and npy_lock.install()  # wrapping twice wraps once
    done: list[np.ndarray] = []
    reader = threading.Thread(target=lambda: done.append(np.load(tmp_path / "a.npy")))
    with npy_lock.HEADER_LOCK:
        reader.start()
        reader.join(timeout=0.5)
        assert not done  # waiting for the header lock
    reader.join(timeout=30)
    assert [a.tolist() for a in done] == [[0, 1, 2]]
