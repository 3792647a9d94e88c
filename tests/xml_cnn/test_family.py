"""The xml_cnn family: the placement choice, the xr placement end to end, bad input."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.model_helpers import split_texts as texts
from xmc_core.app import commands
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.errors import InputError
from xmc_core.families.train import check_dataset, train_in_process
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.families.xml_cnn.graph import cluster_level, placement
from xmc_core.families.xml_cnn.parts import CnnFeatures
from xmc_core.linear.model import XRLinearModel
from xmc_core.model.xmc_model import XmcModel


def test_auto_placement_is_flat_up_to_the_threshold() -> None:
    cfg = XmlCnnConfig(flat_max_labels=100)
    assert placement(cfg, 100) == (
        "flat", "100 labels <= xml_cnn.flat_max_labels=100: one output per label"
    )  # fmt: skip
    assert placement(cfg, 42_850) == (
        "xr",
        "42,850 labels > xml_cnn.flat_max_labels=100: the CNN is the matcher of an XR tree",
    )
    forced = cfg.model_copy(update={"placement": "flat"})
    assert placement(forced, 42_850) == ("flat", "xml_cnn.placement=flat")


@pytest.fixture(scope="module")
def trained_xr(cnn_dataset: Path, cnn_config: XmcConfig, tmp_path_factory) -> dict:
    update = {"placement": "auto", "flat_max_labels": 50, "xr_max_clusters": 16}
    cfg = cnn_config.model_copy(
        update={
            "xml_cnn": cnn_config.xml_cnn.model_copy(update=update),
            "work_dir": tmp_path_factory.mktemp("xr"),
        }
    )
    return train_in_process(Corpus(cnn_dataset), cfg)


def test_xr_placement_trains_on_clusters_and_round_trips(
    trained_xr: dict, cnn_dataset: Path, tmp_path: Path
) -> None:
    tree = trained_xr["matcher_tree"]
    level = cluster_level(tree, 16)
    assert tree.level_sizes()[level] <= 16 < tree.level_sizes()[level + 1]
    assert trained_xr["network"].shapes.n_outputs == tree.level_sizes()[level]
    model = trained_xr["model"]
    assert isinstance(model.ranker, XRLinearModel) and isinstance(model.encoder, CnnFeatures)
    assert model.encoder.mode == "concat"
    n_tfidf = trained_xr["train"].X.shape[1]
    assert trained_xr["model_train"].X.shape == (300, n_tfidf + 128)
    assert trained_xr["evaluation"].values["P@1"] >= 0.5
    model.save(tmp_path / "m")
    loaded = XmcModel.load(tmp_path / "m", device="cpu")
    some = texts(cnn_dataset)
    a, b = model.predict(some), loaded.predict(some)
    assert a.nnz > 0 and (a != b).nnz == 0


def test_placement_is_logged_and_a_rerun_says_it_reused_the_network(
    trained_flat: dict, cnn_dataset: Path, cnn_config: XmcConfig, tmp_path: Path,
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    with caplog.at_level(logging.INFO, logger="xmc_core.families.xml_cnn.graph"):
        commands.train(cnn_dataset, tmp_path / "model", cnn_config)  # `xmc train`, once more
    assert (
        "xml_cnn: placement flat (111 labels <= xml_cnn.flat_max_labels=10,000: one output "
        "per label)" in caplog.messages
    )
    calls = trained_flat["stages"].calls  # the session's first run computed every stage
    assert trained_flat["stages"].reused == 0
    cache = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  cache")]
    assert cache == [
        f"  cache     1 of {calls} stages reused from earlier runs (its inputs unchanged)"
    ]  # the network (its checkpoint folder in work_dir); the rest runs in memory again


def test_a_corpus_without_text_is_refused_before_any_work(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for split in ("train", "test"):
        (src / f"{split}.txt").write_text("2 4 3\n0,1 0:1.0 2:0.5\n2 1:1.0 3:2.0\n")
    ingest("xc", src, tmp_path / "bow", IngestOptions())
    cfg = XmcConfig.load(None, ["model.kind=xml_cnn", f"work_dir={tmp_path / 'work'}"])
    with pytest.raises(InputError) as err:
        check_dataset(tmp_path / "bow", cfg)
    assert str(err.value) == (
        f"{tmp_path / 'bow'}: model.kind xml_cnn needs a raw-text corpus, this one is bow\n"
        "  fix: pass a text dataset, or set model.kind=xr_linear"
    )
    assert not (tmp_path / "work").exists()


def test_feature_matrices_are_refused_naming_the_family() -> None:
    from xmc_core.families.matrices import check_matrix_run

    cfg = XmcConfig.load(None, ["model.kind=xml_cnn"])
    with pytest.raises(InputError, match=r"model\.kind=xml_cnn needs raw text, and feature "):
        check_matrix_run(None, cfg)  # type: ignore[arg-type]  # refused before the files
