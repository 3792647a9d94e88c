"""Corrupt or mismatched artifacts: every loader fails with an ArtifactError naming the file.

Every artifact class with a loader is saved once (XR-Linear and its parts, the featurization
artifacts, the XR-Transformer parts over a tiny random BERT, and a model trained on given
features), then each is damaged in every
way below, file by file, and loaded again: truncated, emptied or overwritten files (also with
their checksums "repaired", as a buggy writer would leave them), missing files, a file replaced
by a folder, a missing or invalid ``meta.json``, one from another class or format version, and
``meta.json`` fields removed, retyped or edited. A load either raises ``ArtifactError`` (or
``InputError``) whose message holds the damaged file's path, or nothing else. ``xmc predict`` and
``xmc evaluate`` on a damaged model exit with status 2 and an ``error:`` line, no traceback.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from tests.model_helpers import featurize, train_model
from tests.model_helpers import reseal as _reseal
from tests.reliability.conftest import SuiteStats
from xmc_core.app.cli import main as xmc_main
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.errors import ArtifactError, InputError
from xmc_core.features import stages
from xmc_core.features.counts import TermCounts
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.matrices import GivenFeatures
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.linear.model import LevelRankers, XRLinearModel
from xmc_core.linear.negatives import MatcherShortlists
from xmc_core.linear.tree import LabelTree
from xmc_core.model.xmc_model import XmcModel
from xmc_core.storage.atomic import write_json

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["tree.branching=4", "tree.max_leaf_size=8", "tfidf.max_features=5000"]
STANDARD_FIELDS = {"class", "format", "xmc_version", "files", "parts"}
COUNTS: dict[str, int] = {}
"""Corruptions tried, per kind (printed at the end of the module)."""


def _open_matcher_level(folder: Path) -> object:
    from xmc_core.transformer.matcher import MatcherCheckpoint

    level = MatcherCheckpoint.open(folder)
    return level.encoder(), level.head(), level.state(8)


def _loaders() -> dict[str, Callable[[Path], object]]:
    from xmc_core.transformer.encoder import TextEncoder
    from xmc_core.transformer.ranker import EmbeddingFeatures
    from xmc_core.transformer.tokens import TokenizedTexts

    return {
        "TermCounts": TermCounts.load,
        "TfidfVectorizer": TfidfVectorizer.load,
        "LabelIndex": LabelIndex.load,
        "SplitFeatures": SplitFeatures.load,
        "LabelFeatures": LabelFeatures.load,
        "LabelTree": LabelTree.load,
        "LevelRankers": LevelRankers.load,
        "XRLinearModel": XRLinearModel.load,
        "XmcModel": XmcModel.load,
        "TokenizedTexts": TokenizedTexts.load,
        "TextEncoder": TextEncoder.load_saved,
        "EmbeddingFeatures": lambda f: EmbeddingFeatures.load(f, "cpu"),
        "MatcherLevel": _open_matcher_level,
        "XmcModel-xr-transformer": lambda f: XmcModel.load(f, "cpu"),
        "MatcherShortlists": MatcherShortlists.load,
        "XmcModel-given": XmcModel.load,
    }


LOADERS = _loaders()


def _save_transformer_parts(root: Path, corpus: Corpus, model: XmcModel) -> None:
    """TextEncoder, EmbeddingFeatures, TokenizedTexts, a MatcherLevel folder and an
    XR-Transformer XmcModel, over a tiny random BERT."""
    from tests.transformer.tiny import build_tiny_encoder
    from xmc_core.config import EncoderConfig
    from xmc_core.storage.artifacts import save_arrays, write_meta
    from xmc_core.transformer.encoder import TextEncoder, load_tokenizer
    from xmc_core.transformer.head import LevelHead
    from xmc_core.transformer.ranker import EmbeddingFeatures
    from xmc_core.transformer.tokens import tokenize_texts

    texts = corpus.read_split("train", ["text"]).column("text").to_pylist()
    hf = build_tiny_encoder(root / "hf-bert", texts, hidden=16)
    cfg = EncoderConfig(path=hf, max_length=16)
    encoder = TextEncoder.load(cfg, hf)
    tokenizer = load_tokenizer(hf)
    encoder.save(root / "TextEncoder", tokenizer)
    embedding = EmbeddingFeatures(encoder, tokenizer, 1.0, 8, "cpu", False)
    embedding.save(root / "EmbeddingFeatures")
    tokenize_texts(tokenizer, texts[:8], 16).save(root / "TokenizedTexts")
    level = root / "MatcherLevel"
    encoder.save(level / "encoder", tokenizer)
    LevelHead(4, encoder.hidden_size).save(level / "head.safetensors")
    save_arrays(
        level / "state.npz", rows=np.arange(8), embeddings=np.zeros((8, 16), np.float32),
        p_data=np.ones(8, np.float32), p_indices=np.zeros(8, np.int32),
        p_indptr=np.arange(9, dtype=np.int32),
    )  # fmt: skip
    write_meta(level, "MatcherLevel", {"level": 0, "n_clusters": 4})
    xrt = XmcModel(
        "xr_transformer", model.vectorizer, model.labels, embedding, model.ranker,
        model.label_counts, model.n_train_docs,
    )  # fmt: skip
    xrt.save(root / "XmcModel-xr-transformer")
    short = sp.csr_matrix(sp.random(8, 4, density=0.5, format="csr", random_state=0))
    MatcherShortlists([None, short], matcher_level=0).save(root / "MatcherShortlists")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """One saved folder per artifact class (plus the dataset it came from)."""
    root = tmp_path_factory.mktemp("pristine")
    spec = SyntheticSpec(n_train=160, n_test=40, n_domains=2, topics_per_domain=2)
    write_synthetic_dataset(root / "dataset", spec, rows_per_group=80)
    corpus = Corpus(root / "dataset")
    cfg = XmcConfig.load(None, SMALL)
    (root / "TermCounts").mkdir(parents=True)
    stages.count_partition(corpus, corpus.partitions("train")[0], cfg.tokenizer).save(
        root / "TermCounts"
    )
    feats = featurize(corpus, cfg)
    feats.vectorizer.save(root / "TfidfVectorizer")
    feats.labels.save(root / "LabelIndex")
    feats.train.save(root / "SplitFeatures")
    feats.label_features.save(root / "LabelFeatures")
    model = train_model(feats, cfg, corpus)
    model.ranker.tree_.save(root / "LabelTree")
    LevelRankers(model.ranker.weights_[-1], len(model.ranker.weights_) - 1).save(
        root / "LevelRankers"
    )
    model.ranker.save(root / "XRLinearModel")
    model.save(root / "XmcModel")
    XmcModel(
        "xr_linear", GivenFeatures(model.vectorizer.n_features), model.labels, model.encoder,
        model.ranker, model.label_counts, model.n_train_docs,
    ).save(root / "XmcModel-given")  # fmt: skip
    _save_transformer_parts(root, corpus, model)
    folders = {name: root / name for name in LOADERS}
    folders["dataset"] = root / "dataset"
    yield folders
    print("\ncorruptions tried per kind:", dict(sorted(COUNTS.items())), sum(COUNTS.values()))


# --- damages: a kind lists its cases, each (the file the error must name, what to do to a copy)

Case = tuple[str, Callable[[Path], None]]


def _data_files(folder: Path) -> list[str]:
    """Every file of the artifact tree but the meta.json files, relative to ``folder``."""
    paths = (p for p in folder.rglob("*") if p.is_file() and p.name != "meta.json")
    return sorted(str(p.relative_to(folder)) for p in paths)


def _metas(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("meta.json"))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00garbage\xff" * 7)


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _other_arrays(path: Path) -> None:
    """A valid ``.npz`` (or Parquet, safetensors) file holding other arrays."""
    if path.suffix == ".npz":
        np.savez(path, other=np.arange(3))
    elif path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"other": [1, 2]}), path)
    else:
        from safetensors.numpy import save_file

        save_file({"other": np.zeros(2, np.float32)}, str(path))


def _folder_instead(path: Path) -> None:
    path.unlink()
    path.mkdir()


def file_cases(
    damage: Callable[[Path], None], reseal: bool, suffixes: tuple[str, ...] = ()
) -> Callable[[Path], list[Case]]:
    """``damage`` applied to each data file in turn (those ending in ``suffixes`` if given;
    checksums repaired if ``reseal``)."""

    def apply(rel: str) -> Callable[[Path], None]:
        def act(root: Path) -> None:
            damage(root / rel)
            if reseal:
                _reseal(root, root / rel)

        return act

    return lambda folder: [
        (rel, apply(rel)) for rel in _data_files(folder) if rel.endswith(suffixes or "")
    ]


def meta_cases(damage: Callable[[Path], None]) -> Callable[[Path], list[Case]]:
    """``damage`` applied to each ``meta.json`` of the tree in turn."""
    return lambda folder: [(rel, lambda root, r=rel: damage(root / r)) for rel in _metas(folder)]


def meta_edits(edit: Callable[[dict[str, Any]], list[Any]]) -> Callable[[Path], list[Case]]:
    """Each value ``edit`` makes of the JSON of each ``meta.json`` in turn, written in place."""

    def cases(folder: Path) -> list[Case]:
        out: list[Case] = []
        for rel in _metas(folder):
            meta = json.loads((folder / rel).read_text())
            for changed in edit(meta):
                if changed == meta:
                    continue
                out.append((rel, lambda root, r=rel, c=changed: write_json(root / r, c)))
        return out

    return cases


def _field_edits(meta: dict[str, Any]) -> list[Any]:
    """Each non-standard field removed, then given values of the wrong type."""
    out = []
    for key in sorted(set(meta) - STANDARD_FIELDS):
        out.append({k: v for k, v in meta.items() if k != key})
        out += [
            {**meta, key: wrong}
            for wrong in ("not-a-value", None, {"x": 1}, [1, 2], -7)
            if type(wrong) is not type(meta[key])
        ]
    return out


KINDS: dict[str, Callable[[Path], list[Case]]] = {
    "truncated": file_cases(_truncate, reseal=False),
    "truncated-resealed": file_cases(_truncate, reseal=True),
    "garbage-resealed": file_cases(_garbage, reseal=True),
    "empty-resealed": file_cases(_empty, reseal=True),
    # valid files of the right format with other contents: arrays only (a JSON config of a
    # Hugging Face folder, e.g. tokenizer_config.json, may well be valid with other values)
    "other-contents-resealed": file_cases(
        _other_arrays, reseal=True, suffixes=(".npz", ".parquet", ".safetensors")
    ),
    "missing-file": file_cases(Path.unlink, reseal=False),
    "folder-instead-of-file": file_cases(_folder_instead, reseal=False),
    "meta-missing": meta_cases(Path.unlink),
    "meta-not-json": meta_cases(lambda p: p.write_text('{"class": "Xmc')),
    "meta-not-utf8": meta_cases(lambda p: p.write_bytes(b"\xff\xfe{}")),
    "meta-not-an-object": meta_edits(lambda m: [[m], "meta", 3]),
    "meta-other-class": meta_edits(lambda m: [{**m, "class": "Other"}]),
    "meta-other-format": meta_edits(lambda m: [{**m, "format": 2}, {**m, "format": "1"}]),
    "meta-files-mistyped": meta_edits(
        lambda m: [{**m, "files": ["x"]}, {**m, "files": {n: 3 for n in m.get("files", {})}}]
    ),
    "meta-field-removed-or-retyped": meta_edits(_field_edits),
}
LENIENT = {"meta-field-removed-or-retyped"}
"""Kinds where a load may also succeed (a field the loader never reads); nothing else is
allowed but an error naming the file."""


def expect_named_error(load: Callable[[Path], object], folder: Path, named: Path) -> str:
    """Load ``folder``: an ArtifactError/InputError naming ``named`` (or the Hugging Face
    folder holding it, which the library hands over whole), or success. Returns which."""
    try:
        load(folder)
    except (ArtifactError, InputError) as err:
        message = str(err)
        hf_folder = any(
            str(parent) in message and (parent / "config.json").exists() for parent in named.parents
        )
        assert str(named) in message or hf_folder, f"{named} not named in: {message}"
        return "error"
    return "loaded"


@pytest.mark.parametrize("artifact", LOADERS)
def test_pristine_folder_loads(pristine: dict[str, Path], artifact: str) -> None:
    LOADERS[artifact](pristine[artifact])  # damage is applied to copies: this stays loadable


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("artifact", LOADERS)
def test_damaged_artifact_fails_with_an_error_naming_the_file(
    pristine: dict[str, Path], tmp_path: Path, artifact: str, kind: str, suite_stats: SuiteStats
) -> None:
    load = LOADERS[artifact]
    cases = KINDS[kind](pristine[artifact])
    assert cases
    outcomes: list[tuple[Path, str]] = []  # one per case (several cases may damage one file)
    for rel, damage in cases:  # each on a fresh copy
        work = tmp_path / "copy"
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(pristine[artifact], work)
        damage(work)
        outcomes.append((rel, expect_named_error(load, work, work / rel)))
    COUNTS[kind] = COUNTS.get(kind, 0) + len(cases)
    if kind not in LENIENT:
        assert [rel for rel, outcome in outcomes if outcome != "error"] == []
    errors = sum(outcome == "error" for _, outcome in outcomes)
    suite_stats.add("artifacts", faults=len(cases), clear_errors=errors, tracebacks=0)


@pytest.mark.parametrize("artifact", LOADERS)
def test_a_folder_of_another_class_is_refused(pristine: dict[str, Path], artifact: str) -> None:
    load = LOADERS[artifact]
    for other in LOADERS:
        if other != artifact and other.split("-")[0] != artifact.split("-")[0]:
            outcome = expect_named_error(load, pristine[other], pristine[other] / "meta.json")
            assert outcome == "error", f"{artifact} loader accepted a {other} folder"
            COUNTS["foreign-class"] = COUNTS.get("foreign-class", 0) + 1


# --- the command line on a damaged model: exit status 2, an "error:" line, no traceback

CLI_DAMAGES: dict[str, tuple[str, Callable[[Path], None]]] = {
    "truncated weights": ("ranker/W0.npz", lambda m: _truncate(m / "ranker" / "W0.npz")),
    "missing idf": ("vectorizer/idf.npz", lambda m: (m / "vectorizer" / "idf.npz").unlink()),
    "other format": ("meta.json", lambda m: _set_meta(m / "meta.json", format=2)),
    "meta.json not JSON": ("meta.json", lambda m: (m / "meta.json").write_text("{")),
    "field removed": ("meta.json", lambda m: _set_meta(m / "meta.json", n_train_docs=None)),
    "edited part": ("labels/meta.json", lambda m: _set_meta(m / "labels" / "meta.json", x=1)),
}


def _set_meta(path: Path, **fields: object) -> None:
    meta = json.loads(path.read_text())
    meta.update(fields)
    write_json(path, {k: v for k, v in meta.items() if v is not None})


def _cli_args(command: str, model: Path, dataset: Path, tmp_path: Path) -> list[str]:
    if command == "predict":
        (tmp_path / "docs.txt").write_text("oil prices rose\nlabel trees\n")
        return ["predict", str(model), str(tmp_path / "docs.txt"), str(tmp_path / "out.jsonl")]
    return ["evaluate", str(model), str(dataset)]


@pytest.mark.parametrize("damage", list(CLI_DAMAGES))
@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_cli_on_a_damaged_model_exits_2_naming_the_file(
    pristine: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    command: str, damage: str,
) -> None:  # fmt: skip
    model = shutil.copytree(pristine["XmcModel"], tmp_path / "model")
    named, act = CLI_DAMAGES[damage]
    act(model)
    assert xmc_main(_cli_args(command, model, pristine["dataset"], tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(model / named) in err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_cli_subprocess_on_a_damaged_model_prints_no_traceback(
    pristine: dict[str, Path], tmp_path: Path, command: str
) -> None:
    model = shutil.copytree(pristine["XmcModel"], tmp_path / "model")
    _truncate(model / "ranker" / "tree" / "C0.npz")
    args = _cli_args(command, model, pristine["dataset"], tmp_path)
    cmd = [sys.executable, "-m", "xmc_core.app.cli", *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "error: " in done.stderr and str(model / "ranker" / "tree" / "C0.npz") in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
