"""benchmarks/families.py: label remapping, LibMultiLabel's settings and validation split, the
command line, and a tiny end-to-end run (synthetic dataset in the ``lines`` layout, XR-Linear,
Omikuji and a method whose preset does not exist)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import families
import families_methods as fm
import frequency_runner
import numpy as np
import pytest
import scipy.sparse as sp
from families_runner import on_test_split, to_shared

from xmc_core.corpus.synthetic import SyntheticSpec, generate_split
from xmc_core.families.xml_cnn.config import XmlCnnConfig

PEERS_PYTHON = fm.bench_common.REPO / ".venv-peers" / "bin" / "python"


def test_predictions_move_to_the_shared_label_order() -> None:
    pred = sp.csr_matrix(np.array([[0.1, 0.9, 0.5], [0.0, 0.3, 0.0]], dtype=np.float32))
    out = to_shared(pred, ["b", "a", "z"], ["a", "b", "c"])  # "z" is not in the shared index
    expected = np.array([[0.9, 0.1, 0.0], [0.3, 0.0, 0.0]], dtype=np.float32)
    np.testing.assert_array_equal(out.toarray(), expected)
    assert to_shared(pred, ["a", "b", "c"], ["a", "b", "c"]) is pred


def test_test_side_stages_are_not_training() -> None:
    calls = [
        {"label": "featurize-test-0", "stage": "partition"},
        {"label": "embed-test", "stage": "embedded"},
        {"label": "evaluate", "stage": "evaluation"},
        {"label": "featurize-train-0", "stage": "partition"},
        {"label": "latest-level", "stage": "level"},
    ]
    assert [on_test_split(c) for c in calls] == [True, True, True, False, False]


def test_libmultilabel_settings_come_from_our_xml_cnn_section() -> None:
    c = XmlCnnConfig(num_filters=32, pool_chunks=4, dropout=0.3, max_length=200, lr=1e-3)
    s = fm.lml_settings(c, n_labels=90, topk=20)
    assert s["network"] == {
        "embed_dropout": 0.25, "post_encoder_dropout": 0.3, "filter_sizes": [2, 4, 8],
        "hidden_dim": 512, "num_filter_per_size": 32, "num_pool": 4, "activation": "relu",
    }  # fmt: skip
    assert (s["max_seq_length"], s["learning_rate"], s["batch_size"]) == (200, 1e-3, 64)
    assert (s["epochs"], s["patience"], s["n_labels"]) == (50, 5, 90)
    assert (
        fm.lml_settings(c.model_copy(update={"dynamic_pooling": False}), 90, 20)["network"][
            "num_pool"
        ]
        == 1
    )


def test_validation_is_carved_from_train_by_fraction_and_cap() -> None:
    fit, val = fm.carve_validation(100, XmlCnnConfig(val_fraction=0.1))
    assert (len(fit), len(val)) == (90, 10)
    assert sorted([*fit, *val]) == list(range(100))
    fit, val = fm.carve_validation(100, XmlCnnConfig(val_fraction=0.5, val_max_docs=7))
    assert (len(fit), len(val)) == (93, 7)


def test_overrides_are_given_per_method() -> None:
    args = families.parse_args(
        ["--set", "xml-cnn:xml_cnn.epochs=2", "--set", "xml-cnn:xml_cnn.lr=0.001"]
    )
    assert args.sets == {"xml-cnn": ["xml_cnn.epochs=2", "xml_cnn.lr=0.001"]}
    with pytest.raises(SystemExit):
        families.parse_args(["--set", "xml_cnn.epochs=2"])  # no METHOD:
    with pytest.raises(SystemExit):
        families.parse_args(["--methods", "xr-linear,fasttext"])


def write_lines_dataset(dest: Path) -> Path:
    """A small synthetic corpus in the ``lines`` layout (``{split}_texts.txt``, labels)."""
    spec = SyntheticSpec(n_train=200, n_test=60, n_domains=2, topics_per_domain=2)
    dest.mkdir(parents=True)
    for split in ("train", "test"):
        docs = list(generate_split(spec, split))
        (dest / f"{split}_texts.txt").write_text("".join(d.text + "\n" for d in docs))
        (dest / f"{split}_labels.txt").write_text("".join(",".join(d.labels) + "\n" for d in docs))
    return dest


def test_tiny_run_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = PEERS_PYTHON
    if not python.exists():
        pytest.skip("no peers venv (make peers-venv)")
    write_lines_dataset(tmp_path / "data" / "tiny")
    missing = fm.Method("ours", tmp_path / "no-such-preset.yaml")
    monkeypatch.setitem(fm.METHODS, "future-family", missing)
    out = tmp_path / "results.json"
    argv = [
        "--datasets-root", str(tmp_path / "data"), "--datasets", "tiny",
        "--methods", "xr-linear,omikuji,future-family", "--peers-python", str(python),
        "--set", "xr-linear:tree.branching=4", "--out", str(out),
    ]  # fmt: skip
    assert families.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["command"].startswith("python benchmarks/families.py --datasets-root")
    methods = report["datasets"]["tiny"]["methods"]
    ours = methods["xr-linear"]
    assert ours["status"] == "ok"
    run = ours["runs"][0]
    # predicting from the test texts scores exactly what the pipeline's evaluation scored
    assert run["metrics"]["P@1"] == run["pipeline_test_metrics"]["P@1"]
    assert run["metrics"]["PSP@5"] == pytest.approx(run["pipeline_test_metrics"]["PSP@5"])
    assert run["labels_identical_to_shared"] is True
    assert run["config"]["tree"]["branching"] == 4
    assert 0 < run["train_s"] < run["graph_s"]
    assert "featurize-test-0" in run["test_side_stages"]
    assert ours["settings"]["overrides"] == ["tree.branching=4"]
    assert methods["omikuji"]["status"] == "ok"
    assert methods["omikuji"]["runs"][0]["n_trees"] == 3
    assert methods["future-family"]["status"] == "skipped"
    assert methods["future-family"]["why"] == f"preset {missing.preset} not found"


def test_x_transformer_gets_the_step_budget_and_encoder_of_xr_transformer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    stats = fm.bench_common.prepare(write_lines_dataset(tmp_path / "tiny"), workdir, True)
    assert stats["n_labels"] == 76
    preset = tmp_path / "x-transformer.yaml"  # stands for the X-Transformer preset
    preset.write_text("model:\n  kind: xr-transformer\nencoder:\n  max_length: 128\n")
    monkeypatch.setitem(fm.METHODS, "x-transformer", fm.Method("ours", preset))
    xr = ["tree.branching=4", "tree.max_leaf_size=4", "matcher.min_clusters=4"]
    xr += ["matcher.max_clusters=40", "matcher.steps_per_level=6", "encoder.max_length=32"]
    budget = fm.transformer_budget(workdir, {"xr-transformer": xr})
    assert budget["xr_tree_sizes"] == [2, 8, 32, 76]
    assert budget["xr_matcher_levels"] == [1, 2]  # 8 and 32 clusters are in [4, 40]
    # and where the X-Transformer preset differs from configs/xr-transformer-cpu.yaml
    assert budget["overrides"] == [
        "matcher.steps_per_level=12", "encoder.max_length=32", "matcher.train_docs=8000",
        'matcher.device="cpu"',
    ]  # fmt: skip


def test_libmultilabel_gets_our_vector_of_each_of_its_words(tmp_path: Path) -> None:
    """LibMultiLabel's vocabulary has no padding / unknown entries: its first word's vector is
    still that word's own (the MiniLM word-piece mean), not our padding row."""
    from xmc_core.families.xml_cnn.embeddings import minilm_vectors

    words = ["kernel", "linux", "library"]
    (tmp_path / "vocab.txt").write_text("".join(w + "\n" for w in words), encoding="utf-8")
    record = fm.write_embeddings(tmp_path, XmlCnnConfig(embedding_init="minilm"), [])
    assert record["embedding_shape"] == [3, 384]
    lines = (tmp_path / "embed.txt").read_text(encoding="utf-8").splitlines()
    assert [line.split(" ")[0] for line in lines] == words
    written = np.array([[float(v) for v in line.split(" ")[1:]] for line in lines])
    np.testing.assert_allclose(written, minilm_vectors(words), rtol=1e-5, atol=1e-6)


def test_a_validation_source_is_carved_from_the_train_split_only(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    texts = [f"doc {i} text\r with a carriage return" for i in range(20)]
    (src / "train_texts.txt").write_bytes("\n".join(texts).encode())  # no final newline
    (src / "train_labels.txt").write_text("".join(f"l{i % 3}\n" for i in range(20)))
    (src / "train_ids.txt").write_text("".join(f"id{i}\n" for i in range(20)))
    (src / "label_map.txt").write_text("0\tl0\t7\n1\tl1\t7\n2\tl2\t6\n")
    # the test split is never read: there is none
    carved = fm.bench_common.validation_source(src, tmp_path / "val", 0.25, seed=0)
    assert (carved["n_fit"], carved["n_validation"]) == (15, 5)
    lines = {
        (split, part): (tmp_path / "val" / f"{split}_{part}.txt").read_bytes().split(b"\n")[:-1]
        for split in ("train", "test")
        for part in ("texts", "labels", "ids")
    }
    ids = {s: [int(x[2:]) for x in lines[s, "ids"]] for s in ("train", "test")}
    assert sorted(ids["train"] + ids["test"]) == list(range(20))
    assert ids["train"] == sorted(ids["train"]) and ids["test"] == sorted(ids["test"])
    for split in ("train", "test"):  # every file carved alike, lines whole (\r kept)
        assert lines[split, "texts"] == [texts[i].encode() for i in ids[split]]
        assert lines[split, "labels"] == [f"l{i % 3}".encode() for i in ids[split]]
    assert (tmp_path / "val" / "label_map.txt").read_text().startswith("0\tl0\t7\n")
    again = fm.bench_common.validation_source(src, tmp_path / "again", 0.25, seed=0)
    assert again == carved
    assert (tmp_path / "again" / "test_ids.txt").read_bytes() == b"".join(
        b"id%d\n" % i for i in ids["test"]
    )


def test_the_frequency_baseline_gives_every_row_the_most_frequent_labels() -> None:
    Y = sp.csr_matrix(np.array([[1, 0, 1, 0], [0, 0, 1, 1], [0, 1, 1, 1], [1, 0, 0, 0]]))
    labels, freqs = frequency_runner.top_labels(Y, 3)
    assert labels.tolist() == [2, 0, 3]  # 3 rows hold label 2; labels 0 and 3 tie: 0 first
    assert freqs.tolist() == [0.75, 0.5, 0.5]
    pred = frequency_runner.predict(labels, freqs, 2, 4)
    assert pred.toarray().tolist() == [[0.5, 0, 0.75, 0.5]] * 2


def test_ensemble_rule_variants_run_only_when_named() -> None:
    assert not any(m.startswith("ensemble-") for m in families.parse_args([]).methods)
    args = families.parse_args(["--methods", "ensemble-average,ensemble-softmax_average"])
    assert fm.METHODS["ensemble-average"].sets == ("ensemble.combine=average",)
    assert args.methods == ["ensemble-average", "ensemble-softmax_average"]


def test_a_validation_run_trains_on_the_fit_part_and_scores_the_carved_part(
    tmp_path: Path,
) -> None:
    write_lines_dataset(tmp_path / "data" / "tiny")
    out = tmp_path / "results.json"
    argv = [
        "--datasets-root", str(tmp_path / "data"), "--datasets", "tiny", "--validation", "0.25",
        "--methods", "ensemble-average,frequency", "--peers-python", sys.executable,
        "--out", str(out),
    ]  # fmt: skip
    assert families.main(argv) == 0
    result = json.loads(out.read_text())["datasets"]["tiny"]
    frequency = result["methods"]["frequency"]
    assert frequency["status"] == "ok" and frequency["settings"]["runner"] == "frequency"
    assert frequency["metrics"]["P@1"] < result["methods"]["ensemble-average"]["metrics"]["P@1"]
    stats = result["stats"]
    assert (stats["n_train"], stats["n_test"]) == (150, 50)
    assert stats["validation"]["n_validation"] == 50
    method = result["methods"]["ensemble-average"]
    assert method["status"] == "ok"
    assert method["settings"]["overrides"] == ["ensemble.combine=average"]
    assert method["runs"][0]["config"]["ensemble"]["combine"] == "average"
    assert method["metrics"]["P@1"] > 0.3
    text = "\n".join(families.fr.dataset_table("tiny", result))
    assert "VALIDATION run: the test split above is 50 documents carved" in text
