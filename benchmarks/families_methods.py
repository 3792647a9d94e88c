"""The methods of ``benchmarks/families.py``: ours (a preset trained by ``families_runner.py``),
the peers on the shared TF-IDF (``peer_runner.py``) and LibMultiLabel's XML-CNN
(``lml_runner.py``), each one run in a measured subprocess; a method that cannot run (preset
or family missing, library not installed) is a ``skipped`` run with the reason."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import numpy as np
import scipy.sparse as sp
from families_runner import FULL_PRECISION

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.features.pifa import concat_label_features, pifa, pifa_partial
from xmc_core.linear.tree import LabelTree
from xmc_core.model import registry
from xmc_core.transformer.shortlist import matcher_levels

HERE = Path(__file__).resolve().parent
CONFIGS = bench_common.REPO / "configs"
OURS_RUNNER = HERE / "families_runner.py"
LML_RUNNER = HERE / "lml_runner.py"
FREQUENCY_RUNNER = HERE / "frequency_runner.py"
LML = "libmultilabel-xml-cnn"
LML_DATA_WORKERS = 0
"""Data loader worker processes: none (LibMultiLabel's default is 4; its texts are tokenized
before training, so workers only map words to ids, and on 2 cores they compete with torch's
threads while the process tree's RSS counts every worker's copy of torch)."""


def members_set(branchings: tuple[int, ...]) -> str:
    """The override of ``ensemble.members``: XR-Linear members of these tree branchings,
    seeds 0, 1, ..."""
    members = ", ".join(
        f"{{kind: xr_linear, set: [tree.seed={seed}, tree.branching={b}]}}"
        for seed, b in enumerate(branchings)
    )
    return f"ensemble.members=[{members}]"


@dataclass(frozen=True)
class Method:
    """``runner``: ``ours`` (``preset`` trained in process), ``peer`` (``peer_runner.py``
    method ``peer``), ``lml`` or ``frequency`` (the label-frequency baseline)."""

    runner: str
    preset: Path | None = None
    peer: str | None = None
    note: str = ""
    sets: tuple[str, ...] = ()
    """Overrides of ``preset`` that make this method a variant (applied before ``--set``)."""
    default: bool = True
    """Run when ``--methods`` is not given (variants are run by name)."""


METHODS: dict[str, Method] = {
    "xr-linear": Method("ours", CONFIGS / "xr-linear.yaml", note="default config"),
    "xr-transformer": Method("ours", CONFIGS / "xr-transformer-cpu.yaml"),
    "x-transformer": Method(
        "ours", CONFIGS / "x-transformer-cpu.yaml",
        note="encoder and step budget of xr-transformer on the same dataset",
    ),
    "xml-cnn": Method("ours", CONFIGS / "xml-cnn.yaml", note="placement auto"),
    "ensemble": Method("ours", CONFIGS / "ensemble.yaml", note="3 XR-Linear members"),
    "astec": Method("ours", CONFIGS / "astec.yaml", note="DeepXML/Astec"),
    "neural-xc": Method("ours", CONFIGS / "neural-xc.yaml", note="NeuralXC"),
    "hierarchical-xc": Method("ours", CONFIGS / "hierarchical-xc.yaml", note="HierarchicalXC"),
    "pecos": Method("peer", peer="pecos", note="PECOS XR-Linear, its defaults"),
    "omikuji": Method("peer", peer="omikuji", note="Omikuji, 3 trees"),
    LML: Method("lml", CONFIGS / "xml-cnn.yaml", note="settings of our xml-cnn preset"),
    "frequency": Method("frequency", note="every document: the most frequent training labels"),
    **{
        f"ensemble-{rule}": Method(
            "ours", CONFIGS / "ensemble.yaml", note=f"the ensemble preset, combined by {rule}",
            sets=(f"ensemble.combine={rule}",), default=False,
        )
        for rule in ("average", "rank_average", "softmax_average")
    },
    **{
        f"ensemble-{name}": Method(
            "ours", CONFIGS / "ensemble.yaml", note=f"3 XR-Linear members, {what}, average",
            sets=(members_set(branchings), "ensemble.combine=average"), default=False,
        )
        for name, branchings, what in (
            ("binary", (2, 2, 2), "binary trees (Omikuji's shape), seeds 0-2"),
            ("mixed", (16, 4, 2), "trees of 16, 4 and 2 branches, seeds 0-2"),
        )
    },
}  # fmt: skip
DEFAULT_METHODS = [name for name, m in METHODS.items() if m.default]


def shown(path: Path) -> str:
    """``path`` relative to the repository when inside it."""
    try:
        return str(path.relative_to(bench_common.REPO))
    except ValueError:
        return str(path)


def skipped(reason: str) -> dict[str, Any]:
    """The run record of a method that could not run."""
    return {"status": "skipped", "reason": reason}


def load_config(preset: Path, sets: list[str]) -> XmcConfig:
    """``preset`` then ``sets``; a missing file or an unknown family raise (InputError,
    pydantic's ValidationError)."""
    cfg = XmcConfig.load(preset, sets)
    registry.family(cfg.model.kind)
    return cfg


def preflight(preset: Path, sets: list[str]) -> str | None:
    """Why a preset cannot train here (None: it can)."""
    if not preset.is_file():
        return f"preset {shown(preset)} not found"
    try:
        load_config(preset, sets)
    except Exception as err:  # InputError, ValidationError, ImportError of a family module
        return f"{type(err).__name__}: {str(err).strip().splitlines()[0][:300]}"
    return None


# ---------------------------------------------------------------- ours
def matcher_tree(workdir: Path, cfg: XmcConfig) -> LabelTree:
    """The label tree XR-Transformer's matcher trains on with ``cfg`` on the prepared
    ``workdir``: PIFA of the shared TF-IDF when ``cfg`` featurizes as the default does (what
    ``bench_common.prepare`` checks), else of ``cfg``'s own featurization."""
    default = XmcConfig()
    if any(getattr(cfg, s) != getattr(default, s) for s in ("tokenizer", "tfidf")) or (
        cfg.label_features != default.label_features
    ):
        from xmc_core.families.train import featurize_in_process

        Z = featurize_in_process(Corpus(workdir / "corpus"), cfg)["label_features"].z
    else:
        X, Y = (sp.load_npz(workdir / f"{n}.npz").tocsr() for n in ("X_train", "Y_train"))
        Z = concat_label_features([pifa([pifa_partial(X, Y)])], [1.0])
    return LabelTree.build(Z, cfg.tree)


def transformer_budget(workdir: Path, sets: dict[str, list[str]]) -> dict[str, Any]:
    """X-Transformer's overrides for the same encoder and step budget as XR-Transformer on
    this dataset: ``matcher.steps_per_level`` x the XR matcher levels of the dataset's tree,
    and every encoder / matcher batch setting where the presets differ."""
    xr = METHODS["xr-transformer"]
    xr_cfg = XmcConfig.load(xr.preset, sets.get("xr-transformer", []))
    tree = matcher_tree(workdir, xr_cfg)
    levels = matcher_levels(tree, xr_cfg.matcher)
    steps = xr_cfg.matcher.steps_per_level * len(levels)
    out = [f"matcher.steps_per_level={steps}"]
    xt_preset = METHODS["x-transformer"].preset
    if preset_ok := xt_preset.is_file():
        xt_cfg = XmcConfig.load(xt_preset, sets.get("x-transformer", []))
        for name, value in xr_cfg.encoder.model_dump(mode="json").items():
            if getattr(xt_cfg.encoder, name) != getattr(xr_cfg.encoder, name):
                out.append(f"encoder.{name}={json.dumps(value)}")
        for name in ("batch_size", "train_docs", "device"):
            if getattr(xt_cfg.matcher, name) != getattr(xr_cfg.matcher, name):
                out.append(f"matcher.{name}={json.dumps(getattr(xr_cfg.matcher, name))}")
    return {
        "overrides": out,
        "xr_matcher_levels": levels,
        "xr_tree_sizes": tree.level_sizes(),
        "xr_steps_per_level": xr_cfg.matcher.steps_per_level,
        "x_transformer_steps": steps,
        "x_transformer_preset_found": preset_ok,
    }


def run_ours(
    name: str, workdir: Path, sets: list[str], timeout_s: float, extra: list[str],
    preset: Path | None = None, keep: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One ``families_runner.py`` subprocess for method ``name``: its preset (or ``preset``),
    the method's own overrides, the user's ``sets``, then ``extra`` (computed overrides);
    ``keep``: see :func:`finish`."""
    method = METHODS[name]
    preset = preset or method.preset
    items = [*method.sets, *sets, *extra]
    if (why := preflight(preset, items)) is not None:
        return skipped(why)
    outdir, log = workdir / f"out-{name}", workdir / f"{name}.log"
    shutil.rmtree(outdir, ignore_errors=True)
    cmd = [sys.executable, str(OURS_RUNNER), str(workdir), str(outdir)]
    cmd += ["--config", str(preset), *(f"--set={item}" for item in items)]
    return finish(cmd, workdir, outdir, log, timeout_s, keep)


def finish(
    cmd: list[str], workdir: Path, outdir: Path, log: Path, timeout_s: float,
    keep: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run ``cmd`` measured; read its ``result.json``, size its model, score its predictions
    (``keep``: where its model folder is moved, replacing what is there, instead of deleted)."""
    run: dict[str, Any] = {"load_avg_before": os.getloadavg(), "command": shlex.join(cmd)}
    run |= bench_common.measure(cmd, log, timeout_s)
    run["load_avg_after"] = os.getloadavg()
    if run["status"] != "ok":
        run["error_tail"] = log.read_text(errors="replace")[-3000:]
        shutil.rmtree(outdir, ignore_errors=True)
        return run
    run |= json.loads((outdir / "result.json").read_text())
    for key in ("predict", "predict_again"):
        if f"{key}_s" in run:
            run[f"{key}_ms_per_1k_docs"] = 1e6 * run[f"{key}_s"] / run["n_test"]
    run["model_mb"] = bench_common.dir_mb(outdir / "model")
    run |= bench_common.score(workdir, outdir / "pred.npz")
    if (full := outdir / FULL_PRECISION).is_file():  # read by xrt_targets.predict
        run["full_precision_metrics"] = bench_common.score(workdir, full)["metrics"]
    if keep is not None:
        shutil.rmtree(keep, ignore_errors=True)
        keep.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(outdir / "model", keep)
        run["model_kept"] = str(keep)
    shutil.rmtree(outdir)
    return run


def run_frequency(workdir: Path, timeout_s: float) -> dict[str, Any]:
    """The label-frequency baseline (``frequency_runner.py``), measured and scored."""
    outdir, log = workdir / "out-frequency", workdir / "frequency.log"
    shutil.rmtree(outdir, ignore_errors=True)
    cmd = [sys.executable, str(FREQUENCY_RUNNER), str(workdir), str(outdir)]
    return finish(cmd, workdir, outdir, log, timeout_s)


# ---------------------------------------------------------------- LibMultiLabel's XML-CNN
def lml_settings(c: XmlCnnConfig, n_labels: int, topk: int) -> dict[str, Any]:
    """LibMultiLabel's settings from our XML-CNN section (where both have them)."""
    return {
        "network": {
            "embed_dropout": c.embedding_dropout, "post_encoder_dropout": c.dropout,
            "filter_sizes": c.filter_sizes, "hidden_dim": c.hidden_dim,
            "num_filter_per_size": c.num_filters,
            "num_pool": c.pool_chunks if c.dynamic_pooling else 1, "activation": "relu",
        },
        "learning_rate": c.lr, "weight_decay": c.weight_decay, "batch_size": c.batch_size,
        "eval_batch_size": c.eval_batch_size, "epochs": c.epochs, "patience": c.patience,
        "max_seq_length": c.max_length, "min_vocab_freq": c.min_count, "seed": c.seed,
        "use_cpu": c.device == "cpu" or not _cuda(), "threads": c.threads,
        "data_workers": LML_DATA_WORKERS, "topk": topk, "n_labels": n_labels,
    }  # fmt: skip


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def lml_differences(c: XmlCnnConfig, n_labels: int) -> list[str]:
    """What LibMultiLabel's XML-CNN does differently from ours, in these settings."""
    flat = c.placement == "flat" or (c.placement == "auto" and n_labels <= c.flat_max_labels)
    notes = [
        "tokenizer: nltk RegexpTokenizer(r'\\w+'), lower-cased, numeric tokens dropped",
        f"vocabulary: every training word in >= {c.min_count} documents of the fit part, "
        f"no cap (ours: at most {c.vocab_size} words)",
        "words of the vocabulary without a vector start at zero, <unk> at torch.randn",
        f"strides: none (stride 1; libmultilabel's XMLCNN has no stride option; ours {c.strides})",
        "bottleneck hidden layer always on (ours: bottleneck="
        f"{c.bottleneck}); dropout after it, embedding dropout before the convolutions",
        "gradients clipped at 0.5 (value), Lightning trainer; best validation-P@1 checkpoint",
        f"placement: always flat (ours: {'flat' if flat else 'xr'} on {n_labels} labels)",
        f"data loader workers: {LML_DATA_WORKERS} (libmultilabel's default: 4)",
        "the embedding file is written by our code, outside its train_s (embedding_file_s)",
    ]
    if c.time_budget_s is not None:
        notes.append(f"no time budget (ours: xml_cnn.time_budget_s={c.time_budget_s})")
    return notes


def carve_validation(n: int, c: XmlCnnConfig) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, validation rows) of a training split of ``n`` documents: ``val_fraction``
    of it, at most ``val_max_docs``, drawn with ``default_rng(seed)``; both sorted."""
    return bench_common.carve_rows(n, c.val_fraction, c.seed, c.val_max_docs)


def write_lml_data(workdir: Path, datadir: Path, c: XmlCnnConfig) -> dict[str, Any]:
    """``fit``/``val``/``test`` JSON files for LibMultiLabel (labels as shared-index ids)."""
    corpus = Corpus(workdir / "corpus")
    Y = sp.load_npz(workdir / "Y_train.npz").tocsr()
    train = [t or "" for t in corpus.read_split("train", ["text"]).column("text").to_pylist()]
    rows_of = np.split(Y.indices, Y.indptr[1:-1])
    labels = [" ".join(map(str, row)) for row in rows_of]
    fit, val = carve_validation(len(train), c)
    datadir.mkdir(parents=True, exist_ok=True)
    for name, rows in (("fit", fit), ("val", val)):
        table = {"label": [labels[i] for i in rows], "text": [train[i] for i in rows]}
        (datadir / f"{name}.json").write_text(json.dumps(table), encoding="utf-8")
    test = [t or "" for t in corpus.read_split("test", ["text"]).column("text").to_pylist()]
    table = {"label": [""] * len(test), "text": test}
    (datadir / "test.json").write_text(json.dumps(table), encoding="utf-8")
    return {"n_fit": len(fit), "n_val": len(val), "fit_texts": [train[i] for i in fit]}


def write_embeddings(datadir: Path, c: XmlCnnConfig, texts: list[str]) -> dict[str, Any]:
    """``embed.txt`` for the words of ``vocab.txt``: our XML-CNN's initialisation
    (``xmc_core.families.xml_cnn.embeddings``), or random normal vectors when that module is
    missing."""
    words = (datadir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    t0 = time.perf_counter()
    try:
        from xmc_core.families.xml_cnn.embeddings import initial_embeddings, write_word_vectors
    except ImportError:
        rng = np.random.default_rng(c.seed)
        vectors = rng.standard_normal((len(words), c.embedding_dim)).astype(np.float32)
        with open(datadir / "embed.txt", "w", encoding="utf-8") as fh:
            for word, vec in zip(words, vectors, strict=True):
                fh.write(word + " " + " ".join(f"{v:.6g}" for v in vec) + "\n")
        init = "random (xmc_core.families.xml_cnn missing)"
    else:
        # our vocabularies start with padding and unknown, LibMultiLabel's list has neither
        vectors = initial_embeddings(["<pad>", "<unk>", *words], c, texts=texts)[2:]
        write_word_vectors(datadir / "embed.txt", words, vectors)
        init = f"{c.embedding_init} (xmc_core.families.xml_cnn.embeddings.initial_embeddings)"
    seconds = time.perf_counter() - t0
    shape = list(np.shape(vectors))
    return {"embedding_init": init, "embedding_shape": shape, "embedding_file_s": seconds}


def prepare_lml(workdir: Path, python: str, sets: list[str], topk: int) -> dict[str, Any]:
    """LibMultiLabel's data, settings, vocabulary and embedding file (once per dataset);
    returns the settings record, or ``{"skip": reason}``."""
    check = subprocess.run([python, "-c", "import libmultilabel.nn"], capture_output=True)
    if check.returncode != 0:
        return {"skip": f"libmultilabel[nn] is not importable by {python}"}
    preset = METHODS[LML].preset
    cfg = XmcConfig.load(preset if preset.is_file() else None, sets).xml_cnn
    datadir = workdir / "lml"
    data = write_lml_data(workdir, datadir, cfg)
    n_labels = sp.load_npz(workdir / "Y_train.npz").shape[1]
    settings = lml_settings(cfg, n_labels, topk)
    (datadir / "settings.json").write_text(json.dumps(settings, indent=1) + "\n")
    vocab = subprocess.run(
        [python, str(LML_RUNNER), "vocab", str(datadir)], capture_output=True, text=True
    )
    if vocab.returncode != 0:
        return {"skip": f"the vocabulary step failed: {vocab.stderr[-1500:]}"}
    record = write_embeddings(datadir, cfg, data.pop("fit_texts"))
    source = f"{shown(preset)} + {sets}" if preset.is_file() else f"XmlCnnConfig + {sets}"
    return {
        "xml_cnn_from": source,
        "xml_cnn": cfg.model_dump(mode="json"), "settings": settings, **data, **record,
        "differences": lml_differences(cfg, n_labels),
    }  # fmt: skip


def run_lml(workdir: Path, python: str, prepared: dict[str, Any], timeout_s: float) -> dict:
    """One ``lml_runner.py train`` subprocess, measured and scored."""
    if "skip" in prepared:
        return skipped(prepared["skip"])
    outdir, log = workdir / f"out-{LML}", workdir / f"{LML}.log"
    shutil.rmtree(outdir, ignore_errors=True)
    cmd = [python, str(LML_RUNNER), "train", str(workdir / "lml"), str(outdir)]
    run = finish(cmd, workdir, outdir, log, timeout_s)
    if run["status"] == "ok":
        run["train_s_per_epoch"] = run["train_s"] / max(1, run["n_epochs"])
    return run
