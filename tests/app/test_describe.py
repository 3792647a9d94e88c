"""``xmc inspect MODEL`` and ``xmc info MODEL|DATASET``, driven through a subprocess, on a tiny
XR-Linear model whose tree and vocabulary are worked out by hand below."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import write_lines, xmc
from xmc_core.corpus import Corpus
from xmc_core.storage.artifacts import load_csr

N_LABELS = 8
DOCS_PER_LABEL = 2
# 8 labels, leaves of at most 2 labels: 2 binary depths (2 * 2**2 >= 8); with branching 2 every
# depth is a level: 2 clusters, 4 clusters, then the 8 labels.
LEVEL_SIZES = [2, 4, 8]
# texts "topicK shared": unigrams topic0..topic7 and "shared", bigrams "topicK shared": 17 terms
N_TERMS = 8 + 1 + 8
SETS = ["tree.branching=2", "tree.max_leaf_size=2"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(dataset, model): 16 train docs, two per label, each labeled by its topic."""
    root = tmp_path_factory.mktemp("describe")
    topics = [k % N_LABELS for k in range(N_LABELS * DOCS_PER_LABEL)]
    src = write_lines(
        root / "src",
        labels="".join(f"l{k}\n" for k in topics),
        texts="".join(f"topic{k} shared\n" for k in topics),
    )
    dataset, model = root / "ds", root / "model"
    assert xmc("ingest", "lines", str(src), str(dataset)).returncode == 0
    sets = [a for s in [*SETS, f"work_dir={root / 'work'}"] for a in ("--set", s)]
    out = xmc("train", str(dataset), str(model), *sets)
    assert out.returncode == 0, out.stderr
    return dataset, model


def test_inspect_text(trained: tuple[Path, Path]) -> None:
    dataset, model = trained
    out = xmc("inspect", str(model))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"model: {model}"
    assert lines[1] == "family: xr_linear (model format 2, xmc 0.1.0)"
    fingerprint = Corpus(dataset).fingerprint[:12]
    assert f"trained on: {dataset} (fingerprint {fingerprint}...), " in out.stdout
    assert "labels: 8 (training documents: 16)" in lines
    assert f"encoder: TF-IDF, {N_TERMS} features (n-grams up to 2)" in lines
    assert "tree: 3 levels" in lines
    for t, size in enumerate(LEVEL_SIZES):
        nnz = load_csr(model / "ranker" / f"W{t}.npz").nnz
        assert f"  level {t}: {size} nodes, ranker nnz {nnz}" in lines
    assert "predict defaults: topk 20, beam 10, post-processor l3-hinge" in lines
    start = lines.index("config (differs from the defaults; --config-all: all):")
    changed = [line.split(":")[0].strip() for line in lines[start + 1 : start + 4]]
    assert changed == ["work_dir", "tree.branching", "tree.max_leaf_size"]
    assert "  tree.branching: 2" in lines and "  tfidf.min_df: 1" not in lines
    metrics = json.loads((model / "metrics.json").read_text())["test"]
    p_row = next(line for line in lines if line.startswith("  P "))
    assert p_row.split()[1:] == [f"{100 * metrics[f'P@{k}']:.2f}" for k in (1, 3, 5)]
    assert lines[-1].startswith("files: ") and "ranker " in lines[-1]


def test_inspect_json_and_config_all(trained: tuple[Path, Path]) -> None:
    _, model = trained
    out = xmc("inspect", str(model), "--json", "--config-all")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["type"] == "model" and got["family"] == "xr_linear"
    assert got["n_labels"] == N_LABELS and got["vectorizer"]["features"] == N_TERMS
    levels = got["ranker"]["levels"]
    assert [lv["nodes"] for lv in levels] == LEVEL_SIZES
    nnz = [load_csr(model / "ranker" / f"W{t}.npz").nnz for t in range(3)]
    assert [lv["nnz"] for lv in levels] == nnz
    assert got["config_changes"]["tfidf.min_df"] == 1  # --config-all: every key
    sizes = {p.name: p.stat().st_size for p in model.iterdir() if p.is_file()}
    assert got["sizes"]["metrics.json"] == sizes["metrics.json"]
    everything = sum(p.stat().st_size for p in model.rglob("*") if p.is_file())
    assert got["sizes"]["total"] == everything
    text = xmc("inspect", str(model), "--config-all")
    assert "config:" in text.stdout and "  tfidf.min_df: 1" in text.stdout


def test_info_on_a_model_describes_it(trained: tuple[Path, Path]) -> None:
    _, model = trained
    info, inspect = xmc("info", str(model)), xmc("inspect", str(model))
    assert info.returncode == 0 and info.stdout == inspect.stdout


def test_info_says_what_a_folder_is_not(trained: tuple[Path, Path], tmp_path: Path) -> None:
    _, model = trained
    neither = xmc("info", str(tmp_path))
    assert neither.returncode == 2 and "Traceback" not in neither.stderr
    assert "neither a model folder (no meta.json) nor a dataset folder" in neither.stderr
    part = xmc("info", str(model / "ranker"))
    assert part.returncode == 2
    assert f"{model / 'ranker'} is not an xmc model folder" in part.stderr
    assert "meta.json names a saved XRLinearModel, a part of a model" in part.stderr
    missing = xmc("inspect", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert f"no model at {tmp_path / 'nope'} (no such folder)" in missing.stderr


def test_info_dataset_label_statistics(tmp_path: Path) -> None:
    # train labels: a in 4 docs, b in 2, c, d, e in 1: 9 assignments over 5 docs
    src = write_lines(tmp_path / "src", labels="a,b\na\na,c\na,b,d\ne\n", texts="x\n" * 5)
    ingest = xmc("ingest", "lines", str(src), str(tmp_path / "ds"), "--rows-per-group", "2")
    assert ingest.returncode == 0, ingest.stderr
    out = xmc("info", str(tmp_path / "ds"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(ingest.stdout)  # the manifest summary, then the statistics
    assert out.stdout[len(ingest.stdout) :].splitlines() == [
        "label frequencies (train, 5 docs, 5 labels):",
        "  docs per label: min 1, median 1, mean 1.80, max 4",
        "  labels per doc: mean 1.80, max 3",
        "  labels by train docs: 1: 3, 2-5: 2, 6-20: 0, 21-100: 0, >100: 0",
        "  top 1% of labels (1) hold 44.44% of assignments",
        "  most frequent: a (4), b (2), c (1), d (1), e (1)",
    ]
    got = json.loads(xmc("info", str(tmp_path / "ds"), "--json").stdout)
    assert got["type"] == "dataset" and got["manifest"]["n_labels"] == 5
    assert got["label_stats"]["top_share"] == pytest.approx(4 / 9)
    assert got["label_stats"]["top"][:2] == [["a", 4], ["b", 2]]
