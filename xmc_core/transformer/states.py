"""The encoder split at a layer boundary, and its lower half's outputs cached across retrains.

A warm XR-Transformer start with ``matcher.warm_trainable_layers`` fine-tunes only the top
layers of its champion's encoder; the token embeddings and the layers below the boundary stay
the champion's. A document's hidden states at the boundary (float32, one row per token) are
then the same in every retrain of the lineage, so they are computed once and kept in a
:class:`StateCache` under ``<work_dir>/encoder-states/<digest>/``, the digest covering the
lower half's weights, its configuration and the boundary. An embedding pass (:func:`embed`)
or a training step then runs only the top layers over the cached states. A run's last matcher
level, and the embedding of its splits by the finished encoder, fill the cache (a cold run's
too: its encoder is what the next warm run starts from).

The embedding of a document is always ``upper(lower(ids))`` over unpadded, same-length batches,
whether its states came from the cache or were just computed: the result does not depend on
what the cache held. It equals the encoder's own forward pass (tests/transformer/test_states).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import uuid
from pathlib import Path

import numpy as np
import torch
from torch import nn

from xmc_core.config import MatcherConfig
from xmc_core.errors import ArtifactError, InputError
from xmc_core.progress import RateLog
from xmc_core.storage.artifacts import (
    load_arrays,
    read_meta,
    save_arrays,
    sha256_file,
    write_meta,
)
from xmc_core.storage.atomic import atomic_dir
from xmc_core.transformer.encoder import TextEncoder, by_length, evaluating
from xmc_core.transformer.onnx_int8 import embed_on
from xmc_core.transformer.tokens import TokenizedTexts

log = logging.getLogger(__name__)

KEPT_DIGESTS = 2
"""Lineages kept in a cache root (the most recently opened ones): the champion's and its
challenger's."""
CHUNK_DOCS = 2048
"""Documents per cache file written."""


def boundary(encoder: TextEncoder, cfg: MatcherConfig) -> int | None:
    """The layer below which a warm start keeps the encoder (``cfg.warm_trainable_layers``
    from the top), or None: every layer is trained (or the encoder has no more layers)."""
    top = cfg.warm_trainable_layers
    n = len(encoder.layers())
    return None if top is None or top >= n else n - top


def _parts(encoder: TextEncoder) -> tuple[nn.Module, nn.ModuleList]:
    body = encoder.body
    embeddings = getattr(body, "embeddings", None)
    if not isinstance(embeddings, nn.Module) or getattr(body.config, "is_decoder", False):
        raise InputError(
            None,
            "matcher.warm_trainable_layers needs a BERT-like encoder (embeddings, then layers)",
            "leave matcher.warm_trainable_layers unset for this encoder",
        )
    return embeddings, encoder.layers()


def _mask(encoder: TextEncoder, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
    from transformers.masking_utils import create_bidirectional_mask

    return create_bidirectional_mask(
        config=encoder.body.config, inputs_embeds=hidden, attention_mask=mask
    )


def lower(encoder: TextEncoder, ids: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """Hidden states (B, L, hidden) after the token embeddings and the first ``k`` layers."""
    embeddings, layers = _parts(encoder)
    hidden = embeddings(input_ids=ids)
    attention = _mask(encoder, hidden, mask)
    for layer in layers[:k]:
        hidden = layer(hidden, attention)
    return hidden


def upper(encoder: TextEncoder, states: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """Unit embeddings (B, hidden) of hidden states ``states`` (B, L, hidden) at layer ``k``:
    the layers above it, then the encoder's pooling."""
    _, layers = _parts(encoder)
    attention = _mask(encoder, states, mask)
    hidden = states
    for layer in layers[k:]:
        hidden = layer(hidden, attention)
    return encoder.pool(hidden, mask)


def lower_digest(encoder: TextEncoder, k: int) -> str:
    """sha256 of the boundary, the body's configuration and every weight below it."""
    embeddings, layers = _parts(encoder)
    h = hashlib.sha256(f"{k}\n{encoder.body.config.to_json_string()}\n".encode())
    for part in (embeddings, *layers[:k]):
        for name, tensor in sorted(part.state_dict().items()):
            h.update(name.encode())
            h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def doc_keys(tokens: TokenizedTexts) -> list[bytes]:
    """One 16-byte key per document: a hash of its token ids."""
    return [
        hashlib.blake2b(tokens.input_ids[i, :n].tobytes(), digest_size=16).digest()
        for i, n in enumerate(tokens.lengths.tolist())
    ]


class StateCache:
    """Hidden states by document key, in ``folder`` (one lineage's digest): files of
    ``CHUNK_DOCS`` documents, each a folder written atomically (so concurrent runs only add
    files) with ``index.npz`` (``keys`` (n, 16) uint8, ``offsets`` (n + 1,)), ``states.npz``
    (``states`` (tokens, hidden) float32) and ``meta.json`` (checksums). The index is read
    when the cache opens, a file's states when a document of it is first asked for; both are
    checked against the checksums and each other first."""

    def __init__(self, folder: Path, width: int, k: int) -> None:
        self.folder, self.width, self.k = folder, width, k
        self._index: dict[bytes, tuple[int, int]] = {}
        self._chunks: list[Path] = []
        self._offsets: list[np.ndarray] = []
        self._states: dict[int, np.ndarray] = {}
        for chunk in sorted(_finished(folder)):
            self._load_index(chunk)

    @classmethod
    def open(cls, root: str | Path, encoder: TextEncoder, k: int) -> StateCache:
        """The cache of ``encoder``'s states at layer ``k`` under ``root`` (made if missing);
        other lineages but the most recently opened are removed."""
        folder = Path(root) / lower_digest(encoder, k)
        folder.mkdir(parents=True, exist_ok=True)
        folder.touch()
        others = sorted(
            (p for p in _finished(Path(root)) if p != folder),
            key=lambda p: p.stat().st_mtime, reverse=True,
        )  # fmt: skip
        for old in others[KEPT_DIGESTS - 1 :]:
            shutil.rmtree(old, ignore_errors=True)
        return cls(folder, encoder.hidden_size, k)

    def _checked(self, chunk: Path, name: str) -> dict[str, np.ndarray]:
        meta = read_meta(chunk, "EncoderStates", verify=False)
        if sha256_file(chunk / name) != meta.get("files", {}).get(name):
            raise ArtifactError(chunk / name, "checksum mismatch: file is corrupt or was edited",
                                f"delete {self.folder}")  # fmt: skip
        return load_arrays(chunk / name)

    def _load_index(self, chunk: Path) -> None:
        arrays = self._checked(chunk, "index.npz")
        keys, offsets = arrays["keys"], arrays["offsets"]
        n = len(keys)
        if (
            keys.shape != (n, 16) or offsets.shape != (n + 1,) or n == 0 or offsets[0] != 0
            or np.any(np.diff(offsets) < 1)
        ):  # fmt: skip
            raise ArtifactError(chunk, "inconsistent cached states", f"delete {self.folder}")
        c = len(self._chunks)
        self._chunks.append(chunk)
        self._offsets.append(offsets)
        for row, key in enumerate(keys):
            self._index.setdefault(key.tobytes(), (c, row))

    def __contains__(self, key: bytes) -> bool:
        return key in self._index

    def get(self, key: bytes) -> np.ndarray:
        """The states (length, hidden) of one document."""
        c, row = self._index[key]
        if c not in self._states:
            states = self._checked(self._chunks[c], "states.npz")["states"]
            if states.shape != (self._offsets[c][-1], self.width) or states.dtype != np.float32:
                raise ArtifactError(self._chunks[c], "inconsistent cached states",
                                    f"delete {self.folder}")  # fmt: skip
            self._states[c] = states
        offsets = self._offsets[c]
        return self._states[c][offsets[row] : offsets[row + 1]]

    def add(self, keys: list[bytes], states: list[np.ndarray]) -> None:
        """Store the states of documents ``keys`` (one new file)."""
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in states])]).astype(np.int64)
        key_array = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 16)
        out = self.folder / uuid.uuid4().hex
        with atomic_dir(out) as tmp:
            save_arrays(tmp / "index.npz", keys=key_array, offsets=offsets)
            save_arrays(tmp / "states.npz", states=np.concatenate(states).astype(np.float32))
            write_meta(tmp, "EncoderStates", {"documents": len(keys), "width": self.width})
        self._load_index(out)


def _finished(folder: Path) -> list[Path]:
    """The sub-folders of ``folder`` that writers finished (not the hidden temporaries of
    :func:`~xmc_core.storage.atomic.atomic_dir`, which a killed writer leaves)."""
    return [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]


class DocStates:
    """The cached states of a tokenized collection's documents (every one present), batched
    for the top layers."""

    def __init__(self, cache: StateCache, keys: list[bytes]) -> None:
        self.cache, self.keys = cache, keys

    def take(self, rows: np.ndarray) -> DocStates:
        """The documents ``rows``, in that order."""
        return DocStates(self.cache, [self.keys[r] for r in rows])

    def batch(self, rows: np.ndarray, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``(states (B, longest, hidden) float32 zero-padded, attention_mask (B, longest))``."""
        parts = [self.cache.get(self.keys[r]) for r in rows]
        width = max(len(p) for p in parts)
        states = np.zeros((len(parts), width, self.cache.width), dtype=np.float32)
        for i, p in enumerate(parts):
            states[i, : len(p)] = p
        lengths = torch.tensor([len(p) for p in parts])
        mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
        return torch.from_numpy(states).to(device), mask.to(device)


@torch.no_grad()
def doc_states(
    encoder: TextEncoder, tokens: TokenizedTexts, cache: StateCache, device: torch.device,
    batch_size: int, what: str,
) -> DocStates:  # fmt: skip
    """Every document's states at the cache's layer: the cache's, the others computed
    (same-length batches of ``batch_size``) and added to it."""
    keys = doc_keys(tokens)
    first: dict[bytes, int] = {}
    for i, key in enumerate(keys):
        if key not in cache:
            first.setdefault(key, i)
    missing = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    if missing.size:
        with evaluating(encoder, device):
            _compute(encoder, tokens.take(missing), [keys[i] for i in missing], cache, device,
                     batch_size, what)  # fmt: skip
    return DocStates(cache, keys)


def _compute(
    encoder: TextEncoder, sub: TokenizedTexts, keys: list[bytes], cache: StateCache,
    device: torch.device, batch_size: int, what: str,
) -> None:  # fmt: skip
    """The states of every document of ``sub`` (keys ``keys``), added to ``cache`` in files of
    ``CHUNK_DOCS``, with a progress line."""
    progress = RateLog(log, what, total=sub.n_docs, unit="docs")
    order = np.argsort(-sub.lengths, kind="stable")
    pending: tuple[list[bytes], list[np.ndarray]] = ([], [])
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        for length in np.unique(sub.lengths[rows]):
            same = rows[sub.lengths[rows] == length]  # unpadded: no batch companion matters
            ids, mask = sub.batch(same, device)
            out = lower(encoder, ids, mask, cache.k).float().cpu().numpy()
            pending[0].extend(keys[r] for r in same)
            pending[1].extend(out[j, :length] for j in range(len(same)))
        if len(pending[0]) >= CHUNK_DOCS:
            cache.add(*pending)
            pending = ([], [])
        progress.update(len(rows))
    if pending[0]:
        cache.add(*pending)
    progress.done()


@torch.no_grad()
def embed(
    encoder: TextEncoder, tokens: TokenizedTexts, states: DocStates, device: torch.device,
    batch_size: int, what: str,
) -> np.ndarray:  # fmt: skip
    """Unit embeddings float32 (n, hidden) of ``tokens``' documents from their ``states``: the
    top layers only, over unpadded same-length batches (:func:`by_length`)."""

    def run(rows: np.ndarray) -> np.ndarray:
        s, mask = states.batch(rows, device)
        return upper(encoder, s, mask, states.cache.k).float().cpu().numpy()

    with evaluating(encoder, device):
        return by_length(tokens, batch_size, encoder.hidden_size, run, what)


def cached_states(
    encoder: TextEncoder,
    tokens: TokenizedTexts,
    device: torch.device,
    cfg: MatcherConfig,
    root: str | None,
    what: str,
) -> DocStates | None:
    """``tokens``' states below ``encoder``'s trainable layers from the cache under ``root``
    (the missing ones computed and added), or None when there is no cache to use: no
    ``root``, every layer trained (``cfg.warm_trainable_layers``), or the int8 runtime."""
    k = boundary(encoder, cfg)
    if root is None or k is None or cfg.embed_runtime != "torch":
        return None
    cache = StateCache.open(root, encoder, k)
    return doc_states(encoder, tokens, cache, device, cfg.embed_batch_size, f"{what}: states")


def embed_final(
    encoder: TextEncoder,
    tokens: TokenizedTexts,
    device: torch.device,
    cfg: MatcherConfig,
    root: str | None,
    what: str,
) -> np.ndarray:
    """A finished encoder's embeddings of ``tokens`` (float32 (n, hidden), unit rows): through
    the cache under ``root`` (:func:`cached_states`, filling it) when there is one to use;
    else :func:`~xmc_core.transformer.onnx_int8.embed_on`."""
    states = cached_states(encoder, tokens, device, cfg, root, what)
    if states is None:
        return embed_on(encoder, tokens, device, cfg, what)
    return embed(encoder, tokens, states, device, cfg.embed_batch_size, what)
