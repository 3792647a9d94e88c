"""What the torch families share (XR-Transformer's matcher, XML-CNN, Astec, NeuralXC): the one
place for the device and torch's threads, and, for the training loops, the validation rows
carved from train, the output bias at the targets' log prior odds and the seed of each epoch."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

import numpy as np
import scipy.sparse as sp
import torch

from xmc_core.errors import InputError
from xmc_core.threads import scoped_threads


class ValidationCarve(Protocol):
    """A config section that carves validation rows from train."""

    seed: int
    val_fraction: float
    val_max_docs: int


def split_rows(n_docs: int, cfg: ValidationCarve) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, validation rows) of ``n_docs`` training documents, sorted int64: a seeded
    ``val_fraction`` of them (at most ``val_max_docs``, none below 2 documents)."""
    order = np.random.default_rng([cfg.seed, 1]).permutation(n_docs)
    n_val = min(cfg.val_max_docs, round(cfg.val_fraction * n_docs), n_docs - 1)
    n_val = max(n_val, 1) if n_docs >= 2 else 0
    return np.sort(order[n_val:]).astype(np.int64), np.sort(order[:n_val]).astype(np.int64)


def prior_logits(Y: sp.csr_matrix) -> np.ndarray:
    """float32 (K,): ``logit((count + 0.5) / (n + 1))`` of each target's training count, the
    output bias a network starts from (it then predicts every target's frequency, and the
    first epochs learn what sets documents apart instead of pulling every output down)."""
    counts = np.bincount(sp.csr_matrix(Y).indices, minlength=Y.shape[1])
    p = (counts + 0.5) / (Y.shape[0] + 1.0)
    return np.log(p / (1.0 - p)).astype(np.float32)


def resolve_device(name: str) -> torch.device:
    """``auto``: CUDA when available, else CPU; ``cuda`` fails clearly without a GPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(None, f"device {name!r} requested but CUDA is not available", "use cpu")
    return torch.device(name)


def torch_threads(threads: int | None) -> AbstractContextManager[None]:
    """Torch's intra-op threads set to ``threads`` for the block (None: left as they are)."""
    return scoped_threads(torch.get_num_threads, torch.set_num_threads, threads)


def epoch_seed(seed: int, epoch: int) -> int:
    """Torch's seed for epoch ``epoch`` (dropout); -1: the initialisation, -2: the flat
    ranker's refit."""
    return int(np.random.SeedSequence([seed, epoch + 10]).generate_state(1)[0])


def descend(loss: torch.Tensor, opts: list[torch.optim.Optimizer]) -> float:
    """One step of every optimiser in ``opts`` down ``loss``'s gradient; returns the loss."""
    for opt in opts:
        opt.zero_grad(set_to_none=True)
    loss.backward()
    for opt in opts:
        opt.step()
    return float(loss.detach())
