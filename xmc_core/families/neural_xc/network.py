"""The NeuralXC network: two autoencoders and a regressor between their codes; its loss; and
the memory its training needs, estimated before it starts.

Shapes: ``x`` float32 (batch, d) the input columns of a batch, ``y`` float32 (batch, L) its
multi-hot labels. The layers are those of
:class:`~xmc_core.families.neural_xc.config.NeuralXcConfig`.
A network built with ``autoencoders=False`` holds only what predicts (the input encoder, the
regressor and the label decoder): the served model's parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import torch
from torch import nn
from torch.nn import functional as F

from xmc_core.errors import InputError
from xmc_core.families.neural_xc.config import NeuralXcConfig

PREDICT_PARTS = ("input_encoder", "regressor", "label_decoder")
"""The sub-networks a prediction runs through (and a saved model holds)."""


def layers(widths: list[int], activation: Callable[[], nn.Module]) -> list[nn.Module]:
    """Linear layers through ``widths`` (in, hidden..., out), ``activation`` between them (none
    after the last)."""
    out: list[nn.Module] = []
    for i, (a, b) in enumerate(pairwise(widths)):
        out.append(nn.Linear(a, b))
        if i < len(widths) - 2:
            out.append(activation())
    return out


@dataclass(frozen=True)
class LossParts:
    """A batch's loss and its three terms (each a mean over the batch's elements, unweighted):
    ``total = alpha * input_mse + beta * label_mse + bce``."""

    total: torch.Tensor
    input_mse: torch.Tensor
    label_mse: torch.Tensor
    bce: torch.Tensor


class NeuralXc(nn.Module):
    """See the module docstring; ``n_inputs`` d, ``n_labels`` L."""

    def __init__(
        self, cfg: NeuralXcConfig, n_inputs: int, n_labels: int, autoencoders: bool = True
    ) -> None:
        super().__init__()
        d, L, code, lcode = n_inputs, n_labels, cfg.input_code, cfg.label_code
        self.n_inputs, self.n_labels = n_inputs, n_labels
        self.input_encoder = nn.Sequential(*layers([d, *cfg.input_hidden, code], nn.ReLU))
        self.regressor = nn.Sequential(
            *layers([code, *cfg.regressor_hidden, lcode], nn.ReLU), nn.Tanh()
        )
        self.label_decoder = nn.Sequential(*layers([lcode, *cfg.label_hidden[::-1], L], nn.ReLU))
        if autoencoders:
            self.input_decoder = nn.Sequential(
                *layers([code, *cfg.input_hidden[::-1], d], lambda: nn.LeakyReLU(0.2)),
                nn.Sigmoid(),
            )
            self.label_encoder = nn.Sequential(
                *layers([L, *cfg.label_hidden, lcode], lambda: nn.LeakyReLU(0.1)), nn.Tanh()
            )
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Label logits (batch, L) of inputs ``x`` (batch, d): the label decoder on the
        regressed input code (the scores are their sigmoid)."""
        return self.label_decoder(self.regressor(self.input_encoder(x)))

    def losses(self, x: torch.Tensor, y: torch.Tensor, alpha: float, beta: float) -> LossParts:
        """The training loss of a batch (see :class:`LossParts`)."""
        h = self.input_encoder(x)
        input_mse = F.mse_loss(self.input_decoder(h), x)
        y_hat = torch.sigmoid(self.label_decoder(self.label_encoder(y)))
        label_mse = F.mse_loss(y_hat, y)
        bce = F.binary_cross_entropy_with_logits(self.label_decoder(self.regressor(h)), y)
        return LossParts(alpha * input_mse + beta * label_mse + bce, input_mse, label_mse, bce)

    def output_bias(self) -> torch.Tensor:
        """The label decoder's last bias (L,)."""
        last = self.label_decoder[-1]
        assert isinstance(last, nn.Linear)
        return last.bias

    def predict_state(self) -> dict[str, torch.Tensor]:
        """The weights of :data:`PREDICT_PARTS` (what a saved model holds)."""
        return {k: v for k, v in self.state_dict().items() if k.split(".")[0] in PREDICT_PARTS}


def widths(cfg: NeuralXcConfig, n_inputs: int, n_labels: int) -> dict[str, list[int]]:
    """Each sub-network's widths, input to output."""
    d, L, code, lcode = n_inputs, n_labels, cfg.input_code, cfg.label_code
    return {
        "input_encoder": [d, *cfg.input_hidden, code],
        "input_decoder": [code, *cfg.input_hidden[::-1], d],
        "label_encoder": [L, *cfg.label_hidden, lcode],
        "label_decoder": [lcode, *cfg.label_hidden[::-1], L],
        "regressor": [code, *cfg.regressor_hidden, lcode],
    }


def n_parameters(cfg: NeuralXcConfig, n_inputs: int, n_labels: int) -> int:
    """Weights and biases of the whole training network."""
    return sum(a * b + b for w in widths(cfg, n_inputs, n_labels).values() for a, b in pairwise(w))


MB = 1024 * 1024


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a training run needs, by what holds them."""

    parameters: int  # weights, gradients, 2 Adam moments, the best epoch's copy
    activations: int  # a batch's inputs, layer outputs and their gradients
    scoring: int  # a validation batch's logits and the top-k temporaries
    data: int  # the training matrices (input columns and labels, csr)

    @property
    def total(self) -> int:
        return self.parameters + self.activations + self.scoring + self.data

    def describe(self) -> str:
        parts = ("parameters", "activations", "scoring", "data")
        return ", ".join(f"{p} {getattr(self, p) / MB:,.0f} MB" for p in parts)


def memory_estimate(
    cfg: NeuralXcConfig, n_inputs: int, n_labels: int, data_bytes: int
) -> MemoryEstimate:
    """What training on ``n_inputs`` columns and ``n_labels`` labels needs (float32): every
    parameter 5 times; every layer output of a batch (the label decoder twice) 3 times (output,
    activation, gradient); a scoring batch's (eval_batch_size, L) logits and ``top_k_dense``'
    temporaries (about 24 bytes an element); ``data_bytes`` for the matrices."""
    w = widths(cfg, n_inputs, n_labels)
    outputs = sum(sum(ws) for ws in w.values()) + sum(w["label_decoder"][1:])
    return MemoryEstimate(
        parameters=n_parameters(cfg, n_inputs, n_labels) * 4 * 5,
        activations=cfg.batch_size * outputs * 4 * 3,
        scoring=cfg.eval_batch_size * n_labels * 24,
        data=data_bytes,
    )


def check_memory(
    cfg: NeuralXcConfig, n_features: int, n_inputs: int, n_labels: int, data_bytes: int
) -> MemoryEstimate:
    """The estimate, or an InputError naming the dataset's sizes, the estimate, the limit and
    the fix when it exceeds ``memory_limit_mb``."""
    found = memory_estimate(cfg, n_inputs, n_labels, data_bytes)
    if found.total <= cfg.memory_limit_mb * MB:
        return found
    raise InputError(
        None,
        f"neural-xc on {n_features:,} input features ({n_inputs:,} used: "
        f"neural_xc.input_max_features={cfg.input_max_features}) and {n_labels:,} labels needs "
        f"about {found.total / MB:,.0f} MB to train ({found.describe()}), more than "
        f"neural_xc.memory_limit_mb={cfg.memory_limit_mb:,.0f}",
        "lower neural_xc.input_max_features, the layer widths (input_hidden, label_hidden) or "
        "batch_size / eval_batch_size, or raise neural_xc.memory_limit_mb where the machine "
        "has the memory",
    )
