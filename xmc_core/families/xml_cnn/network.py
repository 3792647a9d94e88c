"""The XML-CNN network (Liu et al. 2017).

Word ids (B, T) -> embeddings (B, T, E) (dropout ``embedding_dropout``) -> one Conv1d per
filter size (``num_filters`` maps, its stride) + ReLU -> dynamic max pooling of each feature map
into ``pool_chunks`` chunks (``dynamic_pooling=False``: one max over time) -> concatenation ->
the bottleneck ``Linear(hidden_dim)`` + ReLU + dropout (``bottleneck=False``: dropout only) ->
the output ``Linear`` over the targets (labels, or tree clusters in the xr placement).

Pooling reads each document's own feature map: its length is set by the document's word count
``n`` (``(max(n, k) - k) // stride + 1`` windows), and chunk ``j`` of ``p`` holds the windows
``t`` with ``j <= t * p / m < j + 1``. So a batch's padding never changes a document's features
(``nn.AdaptiveMaxPool1d`` over the padded map would: its chunks move with the batch's longest
document), and batches are padded only to their longest document, not to ``max_length``.
A chunk without windows (a document shorter than ``p`` windows) is 0, the ReLU's floor.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from xmc_core.families.xml_cnn.config import XmlCnnConfig


def window_counts(lengths: torch.Tensor, size: int, stride: int) -> torch.Tensor:
    """Convolution windows of each document: ``(max(n, size) - size) // stride + 1``."""
    return (lengths.clamp(min=size) - size) // stride + 1


def chunk_max(maps: torch.Tensor, windows: torch.Tensor, chunks: int) -> torch.Tensor:
    """Max of each document's feature maps over ``chunks`` equal chunks of its own windows.

    ``maps``: (B, F, M) float, non-negative; ``windows``: int64 (B,) the windows of each
    document (<= M; the rest is padding). Returns (B, F, chunks).
    """
    B, F, M = maps.shape
    t = torch.arange(M, device=maps.device)[None, :]
    chunk = torch.div(t * chunks, windows[:, None], rounding_mode="floor")
    chunk = torch.where(t < windows[:, None], chunk, chunks)  # padding: a discarded chunk
    out = maps.new_zeros(B, F, chunks + 1)
    out = out.scatter_reduce(2, chunk[:, None, :].expand(B, F, M), maps, "amax")
    return out[:, :, :chunks]


class XmlCnn(nn.Module):
    """The network of ``cfg`` over ``n_words`` words of dimension ``dim``, with ``n_outputs``
    sigmoid outputs."""

    def __init__(self, cfg: XmlCnnConfig, n_words: int, dim: int, n_outputs: int) -> None:
        super().__init__()
        self.sizes, self.strides = list(cfg.filter_sizes), list(cfg.strides)
        self.chunks = cfg.pool_chunks if cfg.dynamic_pooling else 1
        self.embedding = nn.Embedding(n_words, dim, padding_idx=0, sparse=True)
        self.embedding_dropout = nn.Dropout(cfg.embedding_dropout)
        self.convs = nn.ModuleList(
            nn.Conv1d(dim, cfg.num_filters, k, stride=s)
            for k, s in zip(self.sizes, self.strides, strict=True)
        )
        pooled = len(self.sizes) * cfg.num_filters * self.chunks
        self.bottleneck = nn.Linear(pooled, cfg.hidden_dim) if cfg.bottleneck else None
        self.dropout = nn.Dropout(cfg.dropout)
        self.n_features = cfg.hidden_dim if cfg.bottleneck else pooled
        self.output = nn.Linear(self.n_features, n_outputs)

    @property
    def min_width(self) -> int:
        """The narrowest input: the widest filter."""
        return max(self.sizes)

    def features(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """``ids`` int64 (B, T >= the widest filter), ``lengths`` int64 (B,) -> the input of
        the output layer (B, n_features), after dropout (none in eval mode)."""
        x = self.embedding_dropout(self.embedding(ids)).transpose(1, 2).contiguous()  # (B, E, T)
        pooled = []
        for conv, k, s in zip(self.convs, self.sizes, self.strides, strict=True):
            maps = torch.relu(conv(x))
            pooled.append(chunk_max(maps, window_counts(lengths, k, s), self.chunks).flatten(1))
        z = torch.cat(pooled, dim=1)
        if self.bottleneck is not None:
            z = torch.relu(self.bottleneck(z))
        return self.dropout(z)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Logits (B, n_outputs)."""
        return self.output(self.features(ids, lengths))

    def encoder_state(self) -> dict[str, torch.Tensor]:
        """Every weight but the output layer's (the encoder part), on the CPU."""
        return {
            k: v.detach().cpu().contiguous()
            for k, v in self.state_dict().items()
            if not k.startswith("output.")
        }

    def output_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The output layer as (W float32 (n_features, n_outputs), b float32 (n_outputs,))."""
        W = self.output.weight.detach().cpu().numpy().T.copy()
        return np.ascontiguousarray(W), self.output.bias.detach().cpu().numpy().copy()


def batch_tensors(
    input_ids: np.ndarray, lengths: np.ndarray, rows: np.ndarray, min_width: int,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """``(ids int64 (B, W), lengths int64 (B,))`` of documents ``rows``, cut to the longest of
    them (at least ``min_width``)."""
    n = lengths[rows]
    width = min(max(int(n.max()) if len(rows) else 0, min_width), input_ids.shape[1])
    ids = input_ids[rows, :width]
    if ids.shape[1] < min_width:  # max_length below the widest filter is refused by the config
        ids = np.pad(ids, ((0, 0), (0, min_width - ids.shape[1])))
    return (
        torch.from_numpy(ids.astype(np.int64)).to(device),
        torch.from_numpy(n.astype(np.int64)).to(device),
    )


@torch.no_grad()
def encode(
    net: XmlCnn, input_ids: np.ndarray, lengths: np.ndarray, batch_size: int,
    device: torch.device, logits: bool = False,
) -> np.ndarray:  # fmt: skip
    """Features float32 (n, n_features) (``logits``: outputs (n, n_outputs)) of documents in
    eval mode, ``batch_size`` at a time, shortest first (little padding); input order kept."""
    was_training = net.training
    net.eval()
    n = len(lengths)
    width = net.output.out_features if logits else net.n_features
    out = np.empty((n, width), dtype=np.float32)
    order = np.argsort(lengths, kind="stable")
    try:
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]
            ids, lens = batch_tensors(input_ids, lengths, rows, net.min_width, device)
            y = net(ids, lens) if logits else net.features(ids, lens)
            out[rows] = y.float().cpu().numpy()
    finally:
        net.train(was_training)
    return out
