"""The NeuralXC network: its layers are the configured ones, its loss is alpha * input MSE +
beta * label MSE + BCE (checked by hand on a tiny network with fixed weights), and the memory
estimate refuses a run over the limit with a message naming it."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from xmc_core.errors import InputError
from xmc_core.families.neural_xc.config import NeuralXcConfig
from xmc_core.families.neural_xc.network import (
    MB,
    NeuralXc,
    check_memory,
    memory_estimate,
    n_parameters,
)


def linear_shapes(seq: nn.Sequential) -> list[tuple[int, int]]:
    return [(m.in_features, m.out_features) for m in seq if isinstance(m, nn.Linear)]


def test_the_defaults_build_the_reference_bibtex_network() -> None:
    net = NeuralXc(NeuralXcConfig(), n_inputs=1836, n_labels=159)
    assert linear_shapes(net.input_encoder) == [(1836, 1152), (1152, 600), (600, 256)]
    assert linear_shapes(net.input_decoder) == [(256, 600), (600, 1152), (1152, 1836)]
    assert linear_shapes(net.label_encoder) == [(159, 96), (96, 32)]
    assert linear_shapes(net.label_decoder) == [(32, 96), (96, 159)]
    assert linear_shapes(net.regressor) == [(256, 112), (112, 32)]
    acts = [type(m).__name__ for m in net.regressor if not isinstance(m, nn.Linear)]
    assert acts == ["ReLU", "Tanh"]
    assert isinstance(net.input_decoder[-1], nn.Sigmoid)
    assert isinstance(net.label_encoder[-1], nn.Tanh)
    assert n_parameters(NeuralXcConfig(), 1836, 159) == sum(p.numel() for p in net.parameters())
    assert net(torch.zeros(3, 1836)).shape == (3, 159)


def test_a_predicting_network_holds_only_the_predicting_parts() -> None:
    net = NeuralXc(NeuralXcConfig(), 40, 7, autoencoders=False)
    assert not hasattr(net, "input_decoder") and not hasattr(net, "label_encoder")
    full = NeuralXc(NeuralXcConfig(), 40, 7)
    assert set(full.predict_state()) == set(net.state_dict())


def set_linear(layer: nn.Module, weight: list[list[float]]) -> None:
    assert isinstance(layer, nn.Linear)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.zero_()


def tiny_network() -> NeuralXc:
    """d=2, L=2, every width 1 but the input encoder's hidden (2), fixed weights, no biases."""
    cfg = NeuralXcConfig(
        input_hidden=[2], input_code=1, label_hidden=[1], label_code=1, regressor_hidden=[1]
    )
    net = NeuralXc(cfg, n_inputs=2, n_labels=2)
    set_linear(net.input_encoder[0], [[1, 0], [0, 1]])  # ReLU(x) = x
    set_linear(net.input_encoder[2], [[1, 1]])  # h = x1 + x2
    set_linear(net.input_decoder[0], [[1], [-1]])  # LeakyReLU(0.2): [h, -0.2 h]
    set_linear(net.input_decoder[2], [[1, 0], [0, 1]])  # then sigmoid
    set_linear(net.label_encoder[0], [[1, 1]])  # LeakyReLU(0.1), then
    set_linear(net.label_encoder[2], [[1]])  # tanh
    set_linear(net.label_decoder[0], [[1]])  # ReLU, then logits
    set_linear(net.label_decoder[2], [[1], [-1]])
    set_linear(net.regressor[0], [[1]])  # ReLU, then
    set_linear(net.regressor[2], [[0.5]])  # tanh
    return net


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def test_the_loss_is_alpha_input_mse_plus_beta_label_mse_plus_bce() -> None:
    net = tiny_network()
    x, y = torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0]])
    # input: h = 1; decoder hidden [1, -0.2]; x_hat = sigmoid([1, -0.2])
    input_mse = ((sigmoid(1) - 1) ** 2 + sigmoid(-0.2) ** 2) / 2
    # labels: code tanh(1); logits [tanh 1, -tanh 1]; y_hat their sigmoid
    t = math.tanh(1)
    label_mse = ((sigmoid(t) - 1) ** 2 + sigmoid(-t) ** 2) / 2
    # regressor: tanh(0.5 * 1); logits [r, -r]; BCE of [1, 0] = -log sigmoid(r) twice
    r = math.tanh(0.5)
    bce = -math.log(sigmoid(r))
    with torch.no_grad():
        parts = net.losses(x, y, alpha=0.3, beta=0.7)
    assert float(parts.input_mse) == pytest.approx(input_mse, rel=1e-6)
    assert float(parts.label_mse) == pytest.approx(label_mse, rel=1e-6)
    assert float(parts.bce) == pytest.approx(bce, rel=1e-6)
    assert float(parts.total) == pytest.approx(0.3 * input_mse + 0.7 * label_mse + bce, rel=1e-6)
    assert net(x)[0].tolist() == pytest.approx([r, -r])
    assert float(net.losses(x, y, 0.0, 0.0).total.detach()) == pytest.approx(bce, rel=1e-6)


def test_the_memory_estimate_counts_five_copies_of_the_parameters() -> None:
    cfg = NeuralXcConfig(batch_size=10, eval_batch_size=4)
    found = memory_estimate(cfg, 1836, 159, data_bytes=1000)
    assert found.parameters == n_parameters(cfg, 1836, 159) * 4 * 5
    assert found.scoring == 4 * 159 * 24 and found.data == 1000
    assert found.total == found.parameters + found.activations + found.scoring + 1000


def test_the_shared_datasets_fit_the_default_limit_once_the_input_is_capped() -> None:
    cfg = NeuralXcConfig()  # 10,000 input columns; debian-deps: 42,850 labels
    assert check_memory(cfg, 200_000, 10_000, 42_850, 50 * MB).total < 1200 * MB
    with pytest.raises(InputError) as err:  # every column of debian-deps' 200,000
        check_memory(cfg.model_copy(update={"input_max_features": None}), 200_000, 200_000,
                     42_850, 50 * MB)  # fmt: skip
    text = str(err.value)
    assert "200,000 input features (200,000 used" in text and "42,850 labels" in text
    assert "neural_xc.memory_limit_mb=4,096" in text and "MB to train (parameters" in text
    assert "lower neural_xc.input_max_features" in text
