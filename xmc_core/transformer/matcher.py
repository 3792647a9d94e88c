"""Multi-resolution matcher training: one checkpoint per tree level, coarse to fine.

A level's checkpoint folder holds the fine-tuned ``encoder/`` (Hugging Face safetensors +
tokenizer), ``head.safetensors``, ``state.npz`` (the matcher documents, their embeddings by
this level's encoder and the level's top ``beam_size`` predicted clusters ``P(t)``) and
``meta.json`` (level, clusters, config, training history, checksums). The next level starts
from it: its encoder carries over, ``P(t)`` gives its matcher-aware shortlist and the embeddings
bootstrap its head. :func:`train_matcher` skips levels whose checkpoint is complete, so a rerun
resumes after the last finished level.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
import torch

from xmc_core.config import EncoderConfig, MatcherConfig
from xmc_core.errors import ArtifactError
from xmc_core.linear.tree import LabelTree
from xmc_core.neural import resolve_device
from xmc_core.progress import duration
from xmc_core.storage.artifacts import load_arrays, meta_fields, read_meta, save_arrays, write_meta
from xmc_core.storage.atomic import atomic_dir
from xmc_core.transformer.encoder import (
    TextEncoder,
    default_encoder_path,
    load_tokenizer,
    seeded,
)
from xmc_core.transformer.head import LevelHead, bootstrap_head
from xmc_core.transformer.onnx_int8 import embed_on
from xmc_core.transformer.shortlist import (
    LevelProblem,
    children_of,
    level_choices,
    level_problem,
    matcher_levels,
    top_clusters,
)
from xmc_core.transformer.states import DocStates, cached_states, embed_final
from xmc_core.transformer.states import embed as embed_states
from xmc_core.transformer.tokens import TokenizedTexts
from xmc_core.transformer.trainer import fit_level

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)


def matcher_rows(n_docs: int, cfg: MatcherConfig) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, held-out validation rows), sorted int64, drawn from ``cfg.seed``.

    ``eval_docs`` documents (at most a tenth of them) are held out; ``train_docs`` subsamples
    the rest for reduced runs.
    """
    order = np.random.default_rng(cfg.seed).permutation(n_docs)
    n_val = min(cfg.eval_docs, n_docs // 10)
    val, train = order[:n_val], order[n_val:]
    if cfg.train_docs is not None:
        train = train[: cfg.train_docs]
    return np.sort(train).astype(np.int64), np.sort(val).astype(np.int64)


def bootstrap_rows(train_rows: np.ndarray, cfg: MatcherConfig) -> np.ndarray:
    """The first level's bootstrap documents: ``cfg.bootstrap_docs`` of ``train_rows`` (sorted
    int64) drawn from ``cfg.seed``, or all of them."""
    if cfg.bootstrap_docs is None or cfg.bootstrap_docs >= len(train_rows):
        return train_rows
    rng = np.random.default_rng([cfg.seed, 1])
    return np.sort(rng.choice(train_rows, cfg.bootstrap_docs, replace=False))


@dataclass(frozen=True)
class MatcherCheckpoint:
    """A finished matcher level, read lazily from its folder."""

    folder: Path
    level: int
    n_clusters: int

    @classmethod
    def open(cls, folder: str | Path) -> MatcherCheckpoint:
        """Check ``meta.json`` and the checksums of the level's files."""
        folder = Path(folder)
        meta = read_meta(folder, "MatcherLevel")
        with meta_fields(folder):
            return cls(folder, int(meta["level"]), int(meta["n_clusters"]))

    @classmethod
    def load(cls, folder: str | Path) -> MatcherCheckpoint:
        """:meth:`open`, as every artifact is loaded."""
        return cls.open(folder)

    def encoder(self) -> tuple[TextEncoder, PreTrainedTokenizerBase]:
        return TextEncoder.load_saved(self.folder / "encoder")

    def head(self) -> LevelHead:
        return LevelHead.load(self.folder / "head.safetensors")

    def state(self, n_docs: int) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix]:
        """(rows int64 (m,), embeddings float32 (n_docs, h) zero outside ``rows``, ``P(t)``
        csr (n_docs, K))."""
        arrays = load_arrays(self.folder / "state.npz")
        try:
            rows, E_rows = arrays["rows"], arrays["embeddings"]
            P = sp.csr_matrix(
                (arrays["p_data"], arrays["p_indices"], arrays["p_indptr"]),
                shape=(n_docs, self.n_clusters),
            )
        except ValueError as err:  # a missing array is an ArtifactError of load_arrays
            raise ArtifactError(
                self.folder, f"bad state.npz ({err})", "re-train the level"
            ) from err
        E = np.zeros((n_docs, E_rows.shape[1]), dtype=np.float32)
        E[rows] = E_rows
        return rows, E, P


def train_matcher_level(
    tokens: TokenizedTexts,
    Y: sp.csr_matrix,
    tree: LabelTree,
    level: int,
    previous: MatcherCheckpoint | None,
    encoder_cfg: EncoderConfig,
    cfg: MatcherConfig,
    out: str | Path,
    start: Path | None = None,
    states_root: str | None = None,
) -> MatcherCheckpoint:
    """Train tree level ``level`` starting from ``previous`` (None: the pretrained encoder, or
    the saved encoder folder ``start`` (a warm start's, its champion's), and every cluster
    shortlisted) and write its checkpoint to ``out`` atomically.

    ``tokens``: the training documents; ``Y``: csr (n_docs, n_labels). Torch's random state is
    drawn from ``(cfg.seed, level)``. ``states_root``: the cache of the encoder's states below
    ``cfg.warm_trainable_layers`` (:mod:`~xmc_core.transformer.states`), which a warm start
    trains on and the finest level's embeddings fill; None: no cache.
    """
    device = resolve_device(cfg.device)
    cache = _CacheUse(states_root, start is not None, level == matcher_levels(tree, cfg)[-1])
    with seeded(device, cfg.seed, level):
        return _train_level(
            tokens, Y, tree, level, previous, encoder_cfg, cfg, out, device, start, cache
        )


@dataclass(frozen=True)
class _CacheUse:
    """Where the state cache is (None: nowhere), whether the level starts warm (it trains on
    the cache) and whether it is the finest (its final embeddings fill the cache)."""

    root: str | None
    warm: bool
    finest: bool


NO_CACHE = _CacheUse(None, False, False)


def _train_level(
    tokens: TokenizedTexts, Y: sp.csr_matrix, tree: LabelTree, level: int,
    previous: MatcherCheckpoint | None, encoder_cfg: EncoderConfig, cfg: MatcherConfig,
    out: str | Path, device: torch.device, start_encoder: Path | None = None,
    cache: _CacheUse = NO_CACHE,
) -> MatcherCheckpoint:  # fmt: skip
    start = time.perf_counter()
    n = tokens.n_docs
    train_rows, val_rows = matcher_rows(n, cfg)
    rows = np.union1d(train_rows, val_rows)
    encoder, tokenizer, E_prev, predicted = _level_start(
        level, previous, encoder_cfg, cfg, n, start_encoder
    )
    problem = level_problem(Y, tree, level, predicted, cfg)
    what = level_name(tree, level, cfg)
    log.info(
        "%s: %s clusters, %d steps of %d docs on %s", what, f"{problem.n_clusters:,}",
        cfg.steps_per_level, cfg.batch_size, device,
    )  # fmt: skip
    head = LevelHead(problem.n_clusters, encoder.hidden_size)
    frozen = _warm_states(encoder, tokens, cfg, device, cache, what)

    def embed_rows(rows: np.ndarray, what: str) -> np.ndarray:
        return _embed(encoder, tokens, rows, device, cfg, what, frozen)

    if cfg.bootstrap:
        fit_rows = train_rows
        if E_prev is None:
            fit_rows = bootstrap_rows(train_rows, cfg)
            E_prev = np.zeros((n, encoder.hidden_size), dtype=np.float32)
            E_prev[fit_rows] = embed_rows(fit_rows, what=f"{what}: embedding for the bootstrap")
        sub = _restrict(problem, fit_rows)
        head.set_arrays(*bootstrap_head(E_prev[fit_rows], sub, tree.C[level], cfg.seed))
    history = fit_level(
        encoder, head, problem, tokens, train_rows, val_rows, cfg, device, level, what=what,
        states=frozen,
    )  # fmt: skip
    if frozen is None and cache.finest:
        E = embed_final(encoder, tokens.take(rows), device, cfg, cache.root, f"{what}: embedding")
    else:
        E = embed_rows(rows, what=f"{what}: embedding")
    P = _predicted(E, head, rows, n, predicted, tree.C[level], cfg.beam_size)
    with atomic_dir(out, overwrite=True) as tmp:
        encoder.cpu().save(tmp / "encoder", tokenizer)
        head.save(tmp / "head.safetensors")
        save_arrays(
            tmp / "state.npz", rows=rows, embeddings=E,
            p_data=P.data, p_indices=P.indices, p_indptr=P.indptr,
        )  # fmt: skip
        write_meta(
            tmp, "MatcherLevel",
            {
                "level": level, "n_clusters": problem.n_clusters, "device": str(device),
                "matcher": cfg.model_dump(mode="json"),
                "encoder": encoder_cfg.model_dump(mode="json"),
                "history": history.to_json(), "seconds": time.perf_counter() - start,
            },
        )  # fmt: skip
    log.info("%s: done in %s", what, duration(time.perf_counter() - start))
    return MatcherCheckpoint.open(out)


def _level_start(
    level: int,
    previous: MatcherCheckpoint | None,
    encoder_cfg: EncoderConfig,
    cfg: MatcherConfig,
    n: int,
    start_encoder: Path | None,
) -> tuple[TextEncoder, PreTrainedTokenizerBase, np.ndarray | None, sp.csr_matrix | None]:
    """What a level starts from: (encoder, tokenizer, the previous level's embeddings and
    top clusters (None for the first level)). A warm start's encoder learns only in its top
    ``cfg.warm_trainable_layers``."""
    if previous is None and start_encoder is not None:
        encoder, tokenizer = TextEncoder.load_saved(start_encoder)
        encoder.train_top_only(cfg.warm_trainable_layers)
        return encoder, tokenizer, None, None
    if previous is None:
        encoder = TextEncoder.load(encoder_cfg)
        return encoder, load_tokenizer(encoder_cfg.path or default_encoder_path()), None, None
    if previous.level != level - 1:
        raise ValueError(f"level {level} must follow level {level - 1}, not {previous.level}")
    encoder, tokenizer = previous.encoder()
    _, E_prev, predicted = previous.state(n)
    return encoder, tokenizer, E_prev, predicted


def train_matcher(
    tokens: TokenizedTexts,
    Y: sp.csr_matrix,
    tree: LabelTree,
    encoder_cfg: EncoderConfig,
    cfg: MatcherConfig,
    root: str | Path,
) -> list[MatcherCheckpoint]:
    """Every matcher level, coarse to fine, checkpointed under ``root/level-<t>``; levels with a
    complete checkpoint are reused (resume)."""
    done: list[MatcherCheckpoint] = []
    for line in level_choices(tree, cfg):
        log.info("%s", line)
    for level in matcher_levels(tree, cfg):
        folder = Path(root) / f"level-{level}"
        if (folder / "meta.json").is_file():
            log.info("%s: resumed from checkpoint %s", level_name(tree, level, cfg), folder)
            done.append(MatcherCheckpoint.open(folder))
            continue
        previous = done[-1] if done else None
        done.append(train_matcher_level(tokens, Y, tree, level, previous, encoder_cfg, cfg, folder))
    return done


def level_name(tree: LabelTree, level: int, cfg: MatcherConfig) -> str:
    """``matcher level <t> (<i>/<n>)``: tree level ``t``, the ``i``-th of the ``n`` levels
    the matcher trains (how its log lines name the level)."""
    levels = matcher_levels(tree, cfg)
    if level not in levels:
        return f"matcher level {level}"
    return f"matcher level {level} ({levels.index(level) + 1}/{len(levels)})"


def _warm_states(
    encoder: TextEncoder,
    tokens: TokenizedTexts,
    cfg: MatcherConfig,
    device: torch.device,
    cache: _CacheUse,
    what: str,
) -> DocStates | None:
    """A warm start's documents' states below its trainable layers, from the cache (the new
    documents' computed and added), or None: no cache, a cold level, every layer trained, or
    the int8 embedding runtime."""
    if not cache.warm or cfg.steps_per_level == 0:  # 0 steps: the champion's encoder as it was
        return None
    return cached_states(encoder, tokens, device, cfg, cache.root, what)


def _embed(
    encoder: TextEncoder,
    tokens: TokenizedTexts,
    rows: np.ndarray,
    device: torch.device,
    cfg: MatcherConfig,
    what: str,
    states: DocStates | None = None,
) -> np.ndarray:
    if states is None:
        return embed_on(encoder, tokens.take(rows), device, cfg, what)
    return embed_states(
        encoder, tokens.take(rows), states.take(rows), device, cfg.embed_batch_size, what
    )


def _predicted(
    E: np.ndarray, head: LevelHead, rows: np.ndarray, n: int, above: sp.csr_matrix | None,
    C: sp.csr_matrix, beam_size: int,
) -> sp.csr_matrix:  # fmt: skip
    """``P(t)``: csr (n, K), the top ``beam_size`` clusters of documents ``rows`` (embeddings
    ``E``), among the children (``C``) of their clusters predicted above (None: all)."""
    W, b = head.arrays()
    candidates = None
    if above is not None:
        chosen = sp.csr_matrix(above[rows], copy=True)
        chosen.data[:] = 1.0
        candidates = children_of(chosen, C)
    return sp.csr_matrix(_scatter_rows(top_clusters(E, W, b, beam_size, candidates), rows, n))


def _restrict(problem: LevelProblem, rows: np.ndarray) -> LevelProblem:
    """The level problem on documents ``rows`` only."""
    cand = None if problem.candidates is None else problem.candidates[rows]
    return LevelProblem(problem.Y[rows], problem.positive_weight[rows], cand, problem.alpha)


def _scatter_rows(M: sp.csr_matrix, rows: np.ndarray, n: int) -> sp.csr_matrix:
    """Rows of ``M`` placed at ``rows`` of an (n, K) matrix (other rows empty)."""
    coo = M.tocoo()
    return sp.csr_matrix((coo.data, (rows[coo.row], coo.col)), shape=(n, M.shape[1]))
