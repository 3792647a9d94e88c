"""The explicit fine-tuning loop of one matcher level.

AdamW for the encoder, SparseAdam for the head (only shortlisted rows get gradients), linear
warm-up then linear decay, encoder gradient clipping, bf16 autocast on CUDA. The loss is the
weighted squared hinge over the shortlisted (document, cluster) pairs, summed per document and
averaged over the batch. Every ``eval_every`` steps it logs the running loss, the throughput and
the level's P@1/3/5 on held-out documents.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from xmc_core.config import MatcherConfig
from xmc_core.evaluation.metrics import precision_at_k
from xmc_core.transformer.encoder import TextEncoder, autocast, embed
from xmc_core.transformer.head import LevelHead
from xmc_core.transformer.shortlist import LevelProblem, top_clusters
from xmc_core.transformer.tokens import TokenizedTexts

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


def fit_level(
    encoder: TextEncoder,
    head: LevelHead,
    problem: LevelProblem,
    tokens: TokenizedTexts,
    train_rows: np.ndarray,
    val_rows: np.ndarray,
    cfg: MatcherConfig,
    device: torch.device,
    level: int,
) -> LevelHistory:
    """Fine-tune ``encoder`` and ``head`` in place on ``problem`` for ``cfg.steps_per_level``.

    ``tokens`` and ``problem`` are indexed by the same document rows; ``train_rows`` are the
    documents trained on, ``val_rows`` the held-out ones evaluated.
    """
    history = LevelHistory()
    total = cfg.steps_per_level
    if total == 0 or len(train_rows) == 0:
        return history
    encoder.to(device).train()
    head.to(device).train()
    fused = device.type == "cuda"
    opt_enc = torch.optim.AdamW(
        encoder.parameters(), lr=cfg.encoder_lr, weight_decay=cfg.weight_decay, fused=fused
    )
    opt_head = torch.optim.SparseAdam(list(head.parameters()), lr=cfg.head_lr)
    warmup = int(cfg.warmup_fraction * total)
    schedules = [
        torch.optim.lr_scheduler.LambdaLR(o, lambda s: lr_factor(s, total, warmup))
        for o in (opt_enc, opt_head)
    ]
    rng = np.random.default_rng([cfg.seed, level])
    order, cursor = rng.permutation(train_rows), 0
    start = last = time.perf_counter()
    running, seen, n_steps = 0.0, 0, 0
    for step in range(total):
        if cursor + cfg.batch_size > len(order):
            order, cursor = rng.permutation(train_rows), 0
        rows = order[cursor : cursor + cfg.batch_size]
        cursor += len(rows)
        r, c, y, w = (torch.from_numpy(a).to(device) for a in problem.pairs(rows))
        ids, mask = tokens.batch(rows, device)
        with autocast(device, cfg.bf16):
            emb = encoder(ids, mask)
        loss = squared_hinge(head.pair_scores(emb.float(), r, c), y, w) / len(rows)
        opt_enc.zero_grad(set_to_none=True)
        opt_head.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(encoder.parameters(), cfg.grad_clip)
        opt_enc.step()
        opt_head.step()
        for s in schedules:
            s.step()
        running += float(loss.detach())
        seen += len(rows)
        n_steps += 1
        if (step + 1) % cfg.eval_every == 0 or step + 1 == total:
            now = time.perf_counter()
            record = {
                "step": step + 1,
                "loss": running / n_steps,
                "docs_per_s": seen / max(now - last, 1e-9),
            }
            if len(val_rows):
                E_val = embed(
                    encoder, tokens.take(val_rows), device, cfg.embed_batch_size, cfg.bf16
                )
                val_problem = LevelProblem(
                    problem.Y[val_rows], problem.positive_weight[val_rows], None, 1.0
                )
                record |= precision_at(E_val, head, val_problem, np.arange(len(val_rows)))
            history.records.append(record)
            log.info(
                "matcher level %d (%d clusters): step %d/%d, loss %.4f, %.1f docs/s%s",
                level, problem.n_clusters, step + 1, total, record["loss"],
                record["docs_per_s"],
                "".join(f", {k} {v:.4f}" for k, v in record.items() if k.startswith("P@")),
            )  # fmt: skip
            running, seen, n_steps, last = 0.0, 0, 0, time.perf_counter()
    history.steps = total
    history.seconds = time.perf_counter() - start
    return history
