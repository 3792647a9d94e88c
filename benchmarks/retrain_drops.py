"""The growing-corpus benchmark's drops: a dataset's training split cut, by a fixed seed, into
slices that arrive one after the other (``benchmarks/retrain.py``).

Each drop is a ``lines`` folder (the shared datasets' own format): its slice of the training
documents, the whole test split (the same documents in every drop: merging is an upsert by doc
id, so the test split does not grow) and the dataset's ``label_map.txt`` when it has one (the
label texts).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

SPLIT_FILES = ("texts", "labels", "ids")
"""The ``lines`` files of a split: ``{split}_{name}.txt``."""


def read_lines(path: Path) -> list[str]:
    """The lines of a text file, without their line endings (``\\n`` only: the files' own)."""
    with path.open(encoding="utf-8", newline="\n") as fh:
        return fh.read().split("\n")[:-1] if path.stat().st_size else []


def slice_rows(n_rows: int, n_slices: int, seed: int) -> list[np.ndarray]:
    """Row numbers of each slice: a seeded permutation cut into ``n_slices`` near-equal parts,
    each kept in the file's order."""
    order = np.random.default_rng(seed).permutation(n_rows)
    return [np.sort(part) for part in np.array_split(order, n_slices)]


def write_drops(
    src: Path, dest: Path, n_slices: int, seed: int, prefix: str = "step"
) -> list[Path]:
    """``dest/<prefix>-1`` .. ``dest/<prefix>-N``: the drops of dataset folder ``src`` (the
    first one's name names the corpus lineage, and so the registered model)."""
    train = {n: read_lines(src / f"train_{n}.txt") for n in SPLIT_FILES if _has(src, "train", n)}
    n_rows = len(train["texts"])
    if any(len(v) != n_rows for v in train.values()):
        raise ValueError(f"{src}: the train_*.txt files differ in line count")
    drops = []
    for i, rows in enumerate(slice_rows(n_rows, n_slices, seed), start=1):
        tmp = dest / f".{prefix}-{i}.tmp"
        tmp.mkdir(parents=True)
        for name, lines in train.items():
            text = "".join(lines[r] + "\n" for r in rows)
            (tmp / f"train_{name}.txt").write_text(text, encoding="utf-8", newline="\n")
        for name in SPLIT_FILES:
            if _has(src, "test", name):
                shutil.copyfile(src / f"test_{name}.txt", tmp / f"test_{name}.txt")
        if (src / "label_map.txt").is_file():
            shutil.copyfile(src / "label_map.txt", tmp / "label_map.txt")
        drops.append(tmp.rename(dest / f"{prefix}-{i}"))
    return drops


def _has(src: Path, split: str, name: str) -> bool:
    return (src / f"{split}_{name}.txt").is_file()
