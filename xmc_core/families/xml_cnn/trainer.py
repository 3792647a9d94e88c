"""The XML-CNN training loop: Adam, binary cross-entropy over every target, early stopping.

A validation split is carved from the training documents (``val_fraction`` of them, at most
``val_max_docs``, drawn from ``seed``; the test split is never read). After every epoch the
validation P@1 is measured; the best epoch's weights are kept, and training stops after
``patience`` epochs without a better P@1, after ``epochs`` or once ``time_budget_s`` has passed
(checked after every batch). Each epoch's batches and dropout are drawn from ``(seed, epoch)``,
so the same seed gives the same network (bit-identical on the CPU with the same threads), and a
run resumed from its last epoch checkpoint (kept beside the stage's output folder, see
:func:`resume_dir`) ends as an uninterrupted one would. A progress line (step, loss, docs/s,
time left) comes at least every 30 s and after every epoch (with its P@1). The output bias
starts at the targets' log prior odds (:func:`prior_logits`); batches group documents of
similar length (:func:`epoch_batches`); the embedding is updated lazily (:func:`optimizers`).
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from xmc_core.families.xml_cnn.checkpoint import (
    CnnCheckpoint,
    Shapes,
    load_tensors,
    save_tensors,
    write_checkpoint,
)
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.families.xml_cnn.network import XmlCnn, batch_tensors, encode
from xmc_core.neural import (
    descend,
    epoch_seed,
    prior_logits,
    resolve_device,
    split_rows,
    torch_threads,
)
from xmc_core.neural_loop import LoopState, TrainingLoop, cpu_weights
from xmc_core.progress import Clock
from xmc_core.storage.atomic import write_json
from xmc_core.transformer.tokens import TokenizedTexts, epoch_batches

log = logging.getLogger(__name__)
WHAT = "xml-cnn"
SAVED = ("epoch", "history", "best_epoch", "elapsed")
"""The :class:`~xmc_core.neural_loop.LoopState` fields a resume checkpoint keeps (and
``best_p1``: the best score, -1 for none)."""


def resume_dir(out: Path) -> Path:
    """Where a run writing ``out`` keeps its last epoch: beside it, named after the artifact
    folder ``out`` will become (the store's temporary ``.KEY.xxxx.tmp`` -> ``.KEY.resume``),
    so a rerun of the same stage call finds it; removed once the stage is done."""
    found = re.fullmatch(r"\.(.+)\.[^.]+\.tmp", out.name)
    return out.parent / f".{found.group(1) if found else out.name}.resume"


def precision_at_1(
    net: XmlCnn, tokens: TokenizedTexts, Y: sp.csr_matrix, rows: np.ndarray, batch_size: int,
    device: torch.device,
) -> float:  # fmt: skip
    """P@1 of the network's top target on documents ``rows`` (ties: the lower target)."""
    hits = 0
    for start in range(0, len(rows), batch_size):
        part = rows[start : start + batch_size]
        logits = encode(net, tokens.input_ids[part], tokens.lengths[part], batch_size, device, True)
        best = np.argmax(logits, axis=1)
        hits += int((Y[part][np.arange(len(part)), best] > 0).sum())
    return hits / max(len(rows), 1)


def train_network(
    tokens: TokenizedTexts, Y: sp.csr_matrix, init: np.ndarray, cfg: XmlCnnConfig, out: Path,
    clock: Clock = time.monotonic,
) -> CnnCheckpoint:  # fmt: skip
    """Train a network on documents ``tokens`` with targets ``Y`` csr (n, K), embeddings
    initialised from ``init`` float32 (n_words, dim); writes its checkpoint into ``out``."""
    device = resolve_device(cfg.device)
    shapes = Shapes(init.shape[0], init.shape[1], Y.shape[1])
    with torch_threads(cfg.threads), torch.random.fork_rng():
        torch.manual_seed(epoch_seed(cfg.seed, -1))
        net = shapes.network(cfg)
        with torch.no_grad():
            net.embedding.weight.copy_(torch.from_numpy(init))
            net.output.bias.copy_(torch.from_numpy(prior_logits(Y)))
        net.to(device)
        training = CnnTraining(net, optimizers(net, cfg), tokens,
                               sp.csr_matrix(Y, dtype=np.float32), cfg, device,
                               resume_dir(Path(out)), shapes)  # fmt: skip
        state, best = training.run(clock)
    write_checkpoint(Path(out), best, cfg, shapes, state.history, state.best_epoch, state.stopped)
    shutil.rmtree(resume_dir(Path(out)), ignore_errors=True)
    return CnnCheckpoint.load(out)


def optimizers(net: XmlCnn, cfg: XmlCnnConfig) -> list[torch.optim.Optimizer]:
    """Adam (``lr``, ``weight_decay``) for the dense weights, and lazy Adam (``SparseAdam``,
    ``lr``, no weight decay) for the embedding, whose gradient holds only the batch's words:
    a step costs the batch's rows, not the whole vocabulary's."""
    dense = [p for name, p in net.named_parameters() if not name.startswith("embedding.")]
    return [
        torch.optim.Adam(dense, lr=cfg.lr, weight_decay=cfg.weight_decay),
        torch.optim.SparseAdam([net.embedding.weight], lr=cfg.lr),
    ]


class CnnTraining:
    """The network's part of :class:`~xmc_core.neural_loop.TrainingLoop`: its batches, its
    Adam step, its validation P@1, the best weights and the resume checkpoints."""

    def __init__(
        self, net: XmlCnn, opts: list[torch.optim.Optimizer], tokens: TokenizedTexts,
        Y: sp.csr_matrix, cfg: XmlCnnConfig, device: torch.device, folder: Path, shapes: Shapes,
    ) -> None:  # fmt: skip
        self.net, self.opts, self.tokens, self.Y = net, opts, tokens, Y
        self.cfg, self.device, self.folder, self.shapes = cfg, device, folder, shapes
        self.train_rows, self.val_rows = split_rows(tokens.n_docs, cfg)
        self.best: dict[str, torch.Tensor] = {}

    def run(self, clock: Clock) -> tuple[LoopState, dict[str, torch.Tensor]]:
        """Train to the end (from the resume checkpoint if there is one: patience, budget,
        the first of equal P@1); returns the run's record and the best epoch's weights."""
        cfg, n = self.cfg, len(self.train_rows)
        state = self.resume()
        log.info(
            "%s: %s training docs, %s validation docs, %s targets, %s epochs at most on %s",
            WHAT, f"{n:,}", f"{len(self.val_rows):,}", f"{self.Y.shape[1]:,}", cfg.epochs,
            self.device,
        )  # fmt: skip
        steps = max(n // cfg.batch_size, min(n, 1))
        loop = TrainingLoop(log, WHAT, cfg.epochs, steps, budget_s=cfg.time_budget_s,
                            patience=cfg.patience, best="first", clock=clock)  # fmt: skip
        state = loop.run(self, state)
        return state, self.best if self.best else self.net.state_dict()

    def batches(self, epoch: int) -> list[np.ndarray]:
        """Epoch ``epoch``'s batches (similar lengths together), its dropout seeded."""
        cfg = self.cfg
        torch.manual_seed(epoch_seed(cfg.seed, epoch))
        rng = np.random.default_rng([cfg.seed, 2, epoch])
        batches = epoch_batches(self.train_rows, self.tokens.lengths, cfg.batch_size, rng)
        self.net.train()
        return batches

    def step(self, rows: np.ndarray) -> float:
        """One Adam step on documents ``rows``; returns the mean BCE of the batch."""
        ids, lengths = batch_tensors(
            self.tokens.input_ids, self.tokens.lengths, rows, self.net.min_width, self.device
        )
        target = torch.from_numpy(self.Y[rows].toarray()).to(self.device)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(self.net(ids, lengths), target)
        return descend(loss, self.opts)

    def validate(self) -> dict[str, Any]:
        """``{"val_P@1": ...}`` on the validation rows (None without any)."""
        net, rows, batch = self.net, self.val_rows, self.cfg.eval_batch_size
        p1 = (
            precision_at_1(net, self.tokens, self.Y, rows, batch, self.device)
            if len(rows)
            else None
        )
        return {"val_P@1": p1}

    def describe(self, entry: dict[str, Any]) -> str:
        p1 = entry["val_P@1"]
        return "" if p1 is None else f", val P@1 {p1:.4f}"

    def snapshot(self) -> None:
        self.best = cpu_weights(self.net)

    def checkpoint(self, state: LoopState) -> None:
        """The last epoch (weights, optimizer, record) and the best weights, in the resume
        folder."""
        folder = self.folder
        folder.mkdir(parents=True, exist_ok=True)
        save_tensors(folder / "best.safetensors", self.best)
        last = {f"net.{k}": v for k, v in self.net.state_dict().items()}
        for j, opt in enumerate(self.opts):
            for i, slots in opt.state_dict()["state"].items():
                last |= {f"opt.{j}.{i}.{name}": torch.as_tensor(t) for name, t in slots.items()}
        save_tensors(folder / "last.safetensors", last)
        saved = {k: getattr(state, k) for k in SAVED}
        saved["best_p1"] = -1.0 if state.best_score is None else state.best_score
        write_json(folder / "state.json", {**saved, **self.identity()})

    def identity(self) -> dict[str, Any]:
        """What a resumed run must share with the one that wrote the checkpoint."""
        return {
            "cfg": self.cfg.fingerprint(), "shapes": self.shapes.__dict__,
            "n_docs": self.tokens.n_docs, "targets_nnz": int(self.Y.nnz),
        }  # fmt: skip

    def resume(self) -> LoopState:
        """The state of the last epoch checkpointed in the resume folder (none: a fresh
        start); loads its weights, optimizer state and best weights."""
        import json

        folder, path = self.folder, self.folder / "state.json"
        if not path.is_file():
            return LoopState()
        saved = json.loads(path.read_text(encoding="utf-8"))
        if any(saved.get(k) != v for k, v in self.identity().items()):
            log.info("%s: checkpoint in %s is of another run: starting afresh", WHAT, folder)
            return LoopState()
        last = load_tensors(folder / "last.safetensors")
        self.net.load_state_dict({k[4:]: v for k, v in last.items() if k.startswith("net.")})
        slots: list[dict[int, dict[str, torch.Tensor]]] = [{} for _ in self.opts]
        for key, value in last.items():
            if key.startswith("opt."):
                _, j, i, name = key.split(".", 3)
                sparse = isinstance(self.opts[int(j)], torch.optim.SparseAdam)
                value = int(value) if sparse and name == "step" else value  # an int there
                slots[int(j)].setdefault(int(i), {})[name] = value
        for opt, state in zip(self.opts, slots, strict=True):
            opt.load_state_dict({"state": state, "param_groups": opt.state_dict()["param_groups"]})
        best_p1 = float(saved["best_p1"])
        state = LoopState(
            **{k: saved[k] for k in SAVED}, best_score=None if best_p1 < 0 else best_p1
        )
        self.best = load_tensors(folder / "best.safetensors")
        log.info("%s: resumed after epoch %d from %s", WHAT, state.epoch, folder)
        return state
