"""LibMultiLabel's XML-CNN, trained and timed through its own Python API (peers venv).

Usage (started by ``benchmarks/families.py`` with the peers' interpreter)::

    python benchmarks/lml_runner.py vocab DATADIR          # writes DATADIR/vocab.txt
    python benchmarks/lml_runner.py train DATADIR OUTDIR   # trains, predicts, writes OUTDIR

``DATADIR`` (written by ``families.py``): ``fit.json`` and ``val.json`` (the training split, with
a validation part carved from it for early stopping), ``test.json``; columns ``label``
(space-separated ids of the shared label index) and ``text``; ``settings.json`` (the network
and training settings, read from our XML-CNN preset) and ``embed.txt`` (GloVe text format:
the initial vector of every word of ``vocab.txt``).

``vocab`` tokenizes ``fit`` with LibMultiLabel's tokenizer and lists its vocabulary (the words
it will look up in ``embed_file``, in its order, without ``<pad>``/``<unk>``), untimed, so the
parent can write the same embedding initialisation as our XML-CNN's for exactly those words.

``train`` does what LibMultiLabel's ``TorchTrainer`` does: ``load_datasets`` (fit + val only:
the test split is read after training), ``load_or_build_text_dict`` with ``embed_file``,
``load_or_build_label``, ``init_model("XMLCNN", ...)``, ``init_trainer`` (early stopping and
checkpointing on validation P@1), ``trainer.fit``, then the best checkpoint. That is
``train_s``. Then the test texts are tokenized and predicted (``trainer.predict``, top
``topk``): ``predict_s`` (and ``predict_again_s``). Writes ``pred.npz`` (csr (n_test, n_labels)
of the shared label index), ``model/`` (network weights, vocabulary, classes) and
``result.json`` (per-epoch seconds and validation P@1). Imports numpy, scipy, pandas, torch and
libmultilabel only.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp


def pkg_resources_shim() -> bool:
    """Provide the two names torchmetrics 0.10 imports from ``pkg_resources`` when setuptools
    no longer ships it (setuptools >= 81): ``DistributionNotFound`` and ``get_distribution``,
    from ``importlib.metadata``. Returns whether the shim was installed."""
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        import importlib.metadata as metadata
        import types

        shim = types.ModuleType("pkg_resources")
        shim.DistributionNotFound = metadata.PackageNotFoundError  # type: ignore[attr-defined]
        shim.get_distribution = lambda name: types.SimpleNamespace(  # type: ignore[attr-defined]
            version=metadata.version(name)
        )
        sys.modules["pkg_resources"] = shim
        return True
    return False


def load_split(datadir: Path, name: str) -> pd.DataFrame:
    """``name``.json (``{"label": [...], "text": [...]}``) as LibMultiLabel's 2-column frame."""
    table = json.loads((datadir / f"{name}.json").read_text(encoding="utf-8"))
    return pd.DataFrame({"label": table["label"], "text": table["text"]})


def vocab(datadir: Path) -> int:
    """Write LibMultiLabel's vocabulary of ``fit`` (in its order) to ``vocab.txt``."""
    from libmultilabel.nn import data_utils

    settings = json.loads((datadir / "settings.json").read_text())
    data = data_utils.load_datasets(training_data=load_split(datadir, "fit"), val_size=0)
    word_dict = data_utils._build_word_dict(
        [set(d["text"]) for d in data["train"]], settings["min_vocab_freq"], specials=[]
    )
    words = [w for w in word_dict if w not in (data_utils.PAD, data_utils.UNK)]
    (datadir / "vocab.txt").write_text("".join(w + "\n" for w in words), encoding="utf-8")
    return 0


def epoch_clock() -> Any:
    """A Lightning callback recording, per epoch, its seconds, its validation seconds and the
    validation P@1."""
    import lightning as L

    class EpochClock(L.Callback):
        def __init__(self) -> None:
            self.epochs: list[dict[str, float]] = []
            self._t: dict[str, float] = {}

        def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
            self._t = {"start": time.perf_counter()}

        def on_validation_epoch_start(self, trainer: Any, module: Any) -> None:
            self._t["val_start"] = time.perf_counter()

        def on_validation_epoch_end(self, trainer: Any, module: Any) -> None:
            self._t["val_s"] = time.perf_counter() - self._t.get("val_start", time.perf_counter())

        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            # after the epoch's validation: callback_metrics hold its P@1
            record = {"epoch_s": time.perf_counter() - self._t["start"]}
            record |= {k: v for k, v in self._t.items() if k == "val_s"}
            p1 = trainer.callback_metrics.get("P@1")
            record["val_P@1"] = None if p1 is None else float(p1)
            self.epochs.append(record)

    return EpochClock()


def fit(datadir: Path, s: dict[str, Any], outdir: Path) -> tuple[Any, dict[str, Any]]:
    """Everything LibMultiLabel does to train, timed as ``train_s``; returns (the best model,
    the record)."""
    import torch
    from libmultilabel.nn import data_utils
    from libmultilabel.nn.nn_utils import init_device, init_model, init_trainer, set_seed

    t0 = time.perf_counter()
    set_seed(s["seed"])
    device = init_device(use_cpu=s["use_cpu"])
    frames = {"training_data": load_split(datadir, "fit"), "val_data": load_split(datadir, "val")}
    datasets = data_utils.load_datasets(**frames)
    word_dict, embed_vecs = data_utils.load_or_build_text_dict(
        dataset=datasets["train"], min_vocab_freq=s["min_vocab_freq"],
        embed_file=str(datadir / "embed.txt"), silent=True,
    )  # fmt: skip
    classes = data_utils.load_or_build_label(datasets)
    model = init_model(
        model_name="XMLCNN", network_config=s["network"], classes=classes,
        embed_vecs=embed_vecs, learning_rate=s["learning_rate"], optimizer="adam",
        weight_decay=s["weight_decay"], val_metric="P@1", monitor_metrics=["P@1"], silent=True,
    )  # fmt: skip
    trainer = init_trainer(
        checkpoint_dir=str(outdir / "checkpoints"), epochs=s["epochs"], patience=s["patience"],
        early_stopping_metric="P@1", val_metric="P@1", silent=True, use_cpu=s["use_cpu"],
    )  # fmt: skip
    clock = epoch_clock()
    trainer.callbacks.append(clock)

    def loader(split: str, batch: int, shuffle: bool) -> Any:
        return data_utils.get_dataset_loader(
            datasets[split], classes, device, s["max_seq_length"], batch, shuffle,
            s["data_workers"], word_dict=word_dict,
        )  # fmt: skip

    train_loader = loader("train", s["batch_size"], True)
    trainer.fit(model, train_loader, loader("val", s["eval_batch_size"], False))
    best = trainer.checkpoint_callback.best_model_path
    # TorchTrainer reloads the best checkpoint with Model.load_from_checkpoint, which torch >= 2.6
    # refuses (weights_only; the hyper-parameters hold the network): load its weights instead.
    state = torch.load(best, map_location="cpu", weights_only=False)["state_dict"]
    model.load_state_dict(state)
    train_s = time.perf_counter() - t0
    model.save_k_predictions = s["topk"]
    record = {
        "train_s": train_s,
        "epochs": clock.epochs,
        "n_epochs": len(clock.epochs),
        "best_val_P@1": float(trainer.checkpoint_callback.best_model_score),
        "checkpoint_mb": os.path.getsize(best) / 2**20,
        "vocab_size": len(word_dict),
        "n_classes": len(classes),
        "n_fit": len(datasets["train"]),
        "n_val": len(datasets["val"]),
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
    }
    return (model, trainer, word_dict, classes, device), record


def predict(datadir: Path, s: dict[str, Any], state: tuple) -> tuple[sp.csr_matrix, int]:
    """Tokenize and predict the test split: csr (n_test, n_labels) of the top ``topk`` logits
    in the shared label index's columns."""
    from libmultilabel.nn import data_utils

    model, trainer, word_dict, classes, device = state
    test = data_utils.load_datasets(test_data=load_split(datadir, "test"), val_size=0)["test"]
    loader = data_utils.get_dataset_loader(
        test, classes, device, s["max_seq_length"], s["eval_batch_size"], False,
        s["data_workers"], word_dict=word_dict,
    )  # fmt: skip
    batches = trainer.predict(model, dataloaders=loader)
    idx = np.vstack([b["top_k_pred"] for b in batches])
    scores = np.vstack([b["top_k_pred_scores"] for b in batches]).astype(np.float32)
    cols = np.array([int(c) for c in classes], dtype=np.int64)[idx]
    rows = np.repeat(np.arange(idx.shape[0]), idx.shape[1])
    shape = (idx.shape[0], s["n_labels"])
    return sp.csr_matrix((scores.ravel(), (rows, cols.ravel())), shape=shape), len(test)


def save_model(state: tuple, folder: Path) -> None:
    """Network weights (``torch.save`` of the state dict), vocabulary and classes."""
    import torch

    model, _, word_dict, classes, _ = state
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(model.network.state_dict(), folder / "network.pt")
    (folder / "word_dict.json").write_text(json.dumps(word_dict))
    (folder / "classes.json").write_text(json.dumps(classes))


def train(datadir: Path, outdir: Path) -> int:
    """Train, predict twice, write ``pred.npz``, ``model/`` and ``result.json``."""
    import torch

    s = json.loads((datadir / "settings.json").read_text())
    if s.get("threads"):
        torch.set_num_threads(s["threads"])
    outdir.mkdir(parents=True, exist_ok=True)
    state, record = fit(datadir, s, outdir)
    t0 = time.perf_counter()
    pred, n_test = predict(datadir, s, state)
    predict_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    predict(datadir, s, state)
    record |= {"predict_s": predict_s, "predict_again_s": time.perf_counter() - t0}
    save_model(state, outdir / "model")
    sp.save_npz(outdir / "pred.npz", pred, compressed=False)
    record |= {"method": "libmultilabel-xml-cnn", "n_test": n_test, "settings": s}
    (outdir / "result.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    return 0


def main(argv: list[str]) -> int:
    """``vocab DATADIR`` or ``train DATADIR OUTDIR``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if pkg_resources_shim():
        logging.info("pkg_resources missing (setuptools >= 81): shimmed for torchmetrics")
    if len(argv) == 2 and argv[0] == "vocab":
        return vocab(Path(argv[1]))
    if len(argv) == 3 and argv[0] == "train":
        return train(Path(argv[1]), Path(argv[2]))
    print("usage: lml_runner.py vocab DATADIR | train DATADIR OUTDIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
