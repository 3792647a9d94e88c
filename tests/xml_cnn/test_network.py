"""The XML-CNN network: shapes of both ablations, chunk pooling, padding invariance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.families.xml_cnn.network import XmlCnn, chunk_max, encode, window_counts

CFG = XmlCnnConfig(
    filter_sizes=[2, 3], strides=[2, 1], num_filters=5, pool_chunks=4, hidden_dim=7,
    max_length=16,
)  # fmt: skip


@pytest.mark.parametrize(
    ("bottleneck", "dynamic", "width"),
    [(True, True, 7), (True, False, 7), (False, True, 2 * 5 * 4), (False, False, 2 * 5)],
)
def test_shapes_of_the_ablations(bottleneck: bool, dynamic: bool, width: int) -> None:
    cfg = CFG.model_copy(update={"bottleneck": bottleneck, "dynamic_pooling": dynamic})
    net = XmlCnn(cfg, n_words=20, dim=6, n_outputs=11).eval()
    ids = torch.randint(2, 20, (3, 16))
    lengths = torch.tensor([16, 9, 1])
    assert net.features(ids, lengths).shape == (3, width)
    assert net(ids, lengths).shape == (3, 11)
    assert net.n_features == width
    assert (net.bottleneck is None) == (not bottleneck)


def test_chunks_equal_adaptive_max_pool_when_they_divide_the_map() -> None:
    maps = torch.rand(2, 3, 12)
    full = torch.tensor([12, 12])
    assert torch.equal(chunk_max(maps, full, 4), torch.nn.AdaptiveMaxPool1d(4)(maps))
    assert torch.equal(chunk_max(maps, full, 1)[..., 0], maps.amax(-1))


def test_chunks_follow_each_documents_own_windows() -> None:
    maps = torch.arange(10, dtype=torch.float32).repeat(2, 1, 1)  # (2, 1, 10): 0..9
    pooled = chunk_max(maps, torch.tensor([10, 5]), 2)
    assert pooled.tolist() == [[[4.0, 9.0]], [[2.0, 4.0]]]  # 0-4 | 5-9 ; 0-2 | 3-4
    few = chunk_max(maps, torch.tensor([10, 2]), 4)  # 2 windows in 4 chunks: 2 empty (0)
    assert few[1, 0].tolist() == [0.0, 0.0, 1.0, 0.0]
    assert window_counts(torch.tensor([0, 3, 8, 9]), 4, 2).tolist() == [1, 1, 3, 3]


def test_padding_never_changes_a_documents_features() -> None:
    torch.manual_seed(0)
    net = XmlCnn(CFG, n_words=20, dim=6, n_outputs=3)
    ids = np.zeros((2, 16), dtype=np.int32)
    ids[0, :5] = [2, 3, 4, 5, 6]
    ids[1, :] = np.arange(16) + 2
    lengths = np.array([5, 16], dtype=np.int32)
    alone = encode(net, ids[:1], lengths[:1], 8, torch.device("cpu"))
    batched = encode(net, ids, lengths, 8, torch.device("cpu"))  # padded to 16 there
    np.testing.assert_allclose(batched[0], alone[0], rtol=1e-6, atol=1e-7)
    assert net.training  # encode restores the mode


def test_encoder_state_leaves_out_the_output_layer() -> None:
    net = XmlCnn(CFG, n_words=20, dim=6, n_outputs=3)
    assert not [k for k in net.encoder_state() if k.startswith("output.")]
    W, b = net.output_arrays()
    assert W.shape == (7, 3) and b.shape == (3,)
