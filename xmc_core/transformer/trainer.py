"""The explicit fine-tuning loop of one matcher level.

AdamW for the encoder, SparseAdam for the head (only shortlisted rows get gradients), linear
warm-up then linear decay, encoder gradient clipping, bf16 autocast on CUDA. The loss is the
weighted squared hinge over the shortlisted (document, cluster) pairs, summed per document and
averaged over the batch. Every ``eval_every`` steps it records the running loss, the throughput
and the level's P@1/3/5 on held-out documents; a progress line (step, loss, docs/s, time left)
is logged after the first step, at least every 30 s and at every evaluation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xmc_core.config import MatcherConfig
from xmc_core.evaluation.metrics import precision_at_k
from xmc_core.neural_loop import LoopState, TrainingLoop
from xmc_core.progress import Clock
from xmc_core.transformer.encoder import TextEncoder, autocast, embed
from xmc_core.transformer.head import LevelHead
from xmc_core.transformer.shortlist import LevelProblem, top_clusters
from xmc_core.transformer.states import DocStates, upper
from xmc_core.transformer.states import embed as embed_states
from xmc_core.transformer.tokens import TokenizedTexts, epoch_batches

log = logging.getLogger(__name__)


@dataclass
class LevelHistory:
    """What happened while training one level (saved with its checkpoint)."""

    steps: int = 0
    seconds: float = 0.0
    records: list[dict[str, float]] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"steps": self.steps, "seconds": self.seconds, "records": self.records}


def squared_hinge(scores: torch.Tensor, y: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Sum of ``weight * max(0, 1 - s * (2y - 1))²`` over pairs."""
    margin = 1.0 - scores * (2.0 * y - 1.0)
    return (weight * torch.clamp(margin, min=0.0).square()).sum()


def lr_factor(step: int, total: int, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps, then linear decay to 0 at ``total``."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def precision_at(
    E: np.ndarray, head: LevelHead, problem: LevelProblem, rows: np.ndarray, ks=(1, 3, 5)
) -> dict[str, float]:
    """P@k of the level's clusters over every cluster, on documents ``rows``: ``{"P@k": v}``.

    ``E``: float32 (len(rows), h), the embeddings of those documents; the targets are
    ``problem.Y[rows]``. The head scores every cluster (:func:`top_clusters`), then
    :func:`xmc_core.evaluation.metrics.precision_at_k` ranks and counts.
    """
    if len(rows) == 0:
        return {}
    W, b = head.arrays()
    top = top_clusters(E, W, b, max(ks))
    return {f"P@{k}": v for k, v in precision_at_k(problem.Y[rows], top, ks).items()}


def batches(
    train_rows: np.ndarray, batch_size: int, seed: int, level: int,
    lengths: np.ndarray | None = None, pool_batches: int = 0,
) -> Iterator[np.ndarray]:  # fmt: skip
    """Endless batches of ``batch_size`` rows of ``train_rows``: passes over a fresh permutation
    drawn from ``(seed, level)``; a pass stops before a short last batch. With ``pool_batches``
    > 0, each pass is :func:`~xmc_core.transformer.tokens.epoch_batches` of ``lengths`` (pools
    of that many batches sorted by length: less padding)."""
    rng = np.random.default_rng([seed, level])
    if pool_batches > 0 and lengths is not None:
        while True:
            yield from epoch_batches(train_rows, lengths, batch_size, rng, pool_batches)
    order, cursor = rng.permutation(train_rows), 0
    while True:
        if cursor + batch_size > len(order):
            order, cursor = rng.permutation(train_rows), 0
        rows = order[cursor : cursor + batch_size]
        cursor += len(rows)
        yield rows


class LevelLoop:
    """The encoder, head, optimizers and schedules of one level, as the matcher's part of
    :class:`~xmc_core.neural_loop.TrainingLoop`: its batches (``steps_per_level`` of
    ``train_batches``), one training step at a time, and validation P@k on ``val_rows``.
    Moves ``encoder`` and ``head`` to ``device`` in training mode. ``states``: the documents'
    cached states below the encoder's trainable layers (a warm start's,
    :mod:`~xmc_core.transformer.states`): only the layers above them run."""

    def __init__(
        self, encoder: TextEncoder, head: LevelHead, problem: LevelProblem,
        tokens: TokenizedTexts, cfg: MatcherConfig, device: torch.device,
        train_batches: Iterator[np.ndarray], val_rows: np.ndarray,
        states: DocStates | None = None,
    ) -> None:  # fmt: skip
        self.encoder, self.head, self.problem, self.tokens = encoder, head, problem, tokens
        self.states = states
        self.cfg, self.device = cfg, device
        self.train_batches, self.val_rows = train_batches, val_rows
        encoder.to(device).train()
        head.to(device).train()
        total = cfg.steps_per_level
        self.opt_enc = torch.optim.AdamW(
            [p for p in encoder.parameters() if p.requires_grad], lr=cfg.encoder_lr,
            weight_decay=cfg.weight_decay, fused=device.type == "cuda",
        )  # fmt: skip
        self.opt_head = torch.optim.SparseAdam(list(head.parameters()), lr=cfg.head_lr)
        warmup = int(cfg.warmup_fraction * total)
        self.schedules = [
            torch.optim.lr_scheduler.LambdaLR(o, lambda s: lr_factor(s, total, warmup))
            for o in (self.opt_enc, self.opt_head)
        ]

    def step(self, rows: np.ndarray) -> float:
        """One optimizer step on documents ``rows``; returns the batch's mean loss."""
        r, c, y, w = (torch.from_numpy(a).to(self.device) for a in self.problem.pairs(rows))
        with autocast(self.device, self.cfg.bf16):
            emb = self._embed_batch(rows)
        loss = squared_hinge(self.head.pair_scores(emb.float(), r, c), y, w) / len(rows)
        self.opt_enc.zero_grad(set_to_none=True)
        self.opt_head.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.encoder.parameters(), self.cfg.grad_clip)
        self.opt_enc.step()
        self.opt_head.step()
        for s in self.schedules:
            s.step()
        return float(loss.detach())

    def _embed_batch(self, rows: np.ndarray) -> torch.Tensor:
        if self.states is None:
            return self.encoder(*self.tokens.batch(rows, self.device))
        states, mask = self.states.batch(rows, self.device)
        return upper(self.encoder, states, mask, self.states.cache.k)

    def batches(self, epoch: int) -> list[np.ndarray]:
        """The level's ``steps_per_level`` batches (one pass of the loop: ``epoch`` is 0)."""
        return [next(self.train_batches) for _ in range(self.cfg.steps_per_level)]

    def validate(self) -> dict[str, float]:
        """P@1/3/5 on the held-out documents ``val_rows`` (none: ``{}``)."""
        val_rows = self.val_rows
        if not len(val_rows):
            return {}
        cfg = self.cfg
        tokens, what = self.tokens.take(val_rows), "validation embedding"
        if self.states is None:
            E_val = embed(self.encoder, tokens, self.device, cfg.embed_batch_size, cfg.bf16, what)
        else:
            states = self.states.take(val_rows)
            E_val = embed_states(
                self.encoder, tokens, states, self.device, cfg.embed_batch_size, what
            )
        problem = self.problem
        val_problem = LevelProblem(
            problem.Y[val_rows], problem.positive_weight[val_rows], None, 1.0
        )
        return precision_at(E_val, self.head, val_problem, np.arange(len(val_rows)))

    def describe(self, entry: dict[str, Any]) -> str:
        return "".join(f", {k} {v:.4f}" for k, v in entry.items() if "@" in k)

    def snapshot(self) -> None:
        """Nothing: a level keeps its last weights."""

    def checkpoint(self, state: LoopState) -> None:
        """Nothing: the matcher checkpoints whole levels (:mod:`~xmc_core.transformer.matcher`)."""


def fit_level(
    encoder: TextEncoder, head: LevelHead, problem: LevelProblem, tokens: TokenizedTexts,
    train_rows: np.ndarray, val_rows: np.ndarray, cfg: MatcherConfig, device: torch.device,
    level: int, what: str | None = None, clock: Clock = time.monotonic,
    states: DocStates | None = None,
) -> LevelHistory:  # fmt: skip
    """Fine-tune ``encoder`` and ``head`` in place on ``problem`` for ``cfg.steps_per_level``
    (``states``: only the layers above the cached states, :class:`LevelLoop`).

    ``tokens`` and ``problem`` are indexed by the same document rows; ``train_rows`` are the
    documents trained on, ``val_rows`` the held-out ones evaluated. Logs ``what: step i/n ...``
    (``what`` defaults to ``matcher level <level>``) after the first step, at least every
    :data:`~xmc_core.progress.PROGRESS_EVERY_S` seconds of ``clock`` and at every evaluation
    (with P@k); the history records the loss and docs/s since the previous evaluation.
    """
    what = what or f"matcher level {level}"
    history = LevelHistory()
    total = cfg.steps_per_level
    if total == 0 or len(train_rows) == 0:
        why = "matcher.steps_per_level=0" if total == 0 else "no training documents"
        log.info("%s: training skipped: %s", what, why)
        return history
    if not len(val_rows):  # matcher_rows holds out min(eval_docs, n_docs // 10)
        why = "matcher.eval_docs=0" if cfg.eval_docs == 0 else "fewer than 10 documents"
        log.info("%s: P@k validation skipped: %s", what, why)
    train_batches = batches(
        train_rows, cfg.batch_size, cfg.seed, level, tokens.lengths, cfg.pool_batches
    )
    level_loop = LevelLoop(
        encoder, head, problem, tokens, cfg, device, train_batches, val_rows, states
    )
    loop = TrainingLoop(log, what, 1, total, best=None, validate_every=cfg.eval_every,
                        timing="docs_per_s", clock=clock)  # fmt: skip
    state = loop.run(level_loop)
    history.records, history.steps = state.history, total
    history.seconds = clock() - loop.start
    return history
