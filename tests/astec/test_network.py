"""Astec's networks: the residual block is the identity at initialisation and learns away from
it; the exported numpy arithmetic is the torch networks' own."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from xmc_core.families.astec.dense import Block, encode_rows
from xmc_core.families.astec.network import ResidualBlock, SurrogateNet, bag_inputs


def test_the_residual_block_is_the_identity_at_initialisation() -> None:
    torch.manual_seed(0)
    block = ResidualBlock(6, dropout=0.5)
    z = torch.randn(4, 6)
    assert torch.equal(block.train()(z), z) and torch.equal(block.eval()(z), z)
    exported = block.export()
    assert exported.gate == 0.0
    np.testing.assert_allclose(exported.A, np.eye(6), atol=1e-6)  # SN(I) = I: sigma(I) = 1
    assert np.array_equal(exported(z.numpy()), z.numpy())


def test_the_block_learns_away_from_the_identity() -> None:
    torch.manual_seed(0)
    block = ResidualBlock(3, dropout=0.0)
    opt = torch.optim.SGD(block.parameters(), lr=0.1)
    z = torch.rand(5, 3)
    loss = ((block(z) - 2 * z) ** 2).mean()  # the target needs z + 1 * relu(z)
    loss.backward()
    opt.step()
    assert float(block.gate.detach()) > 0.0
    with torch.no_grad():
        assert float(((block(z) - 2 * z) ** 2).mean()) < float(loss.detach())


def test_numpy_block_matches_the_torch_block_in_eval_mode() -> None:
    torch.manual_seed(1)
    block = ResidualBlock(5, dropout=0.3)
    with torch.no_grad():
        block.gate.fill_(0.7)
        block.linear.parametrizations.weight.original.copy_(torch.randn(5, 5))
        block.linear.bias.copy_(torch.randn(5))
    z = torch.randn(8, 5)
    for _ in range(50):  # training-mode passes run the power iteration that estimates sigma
        block.train()(z)
    exported = block.export()  # eval mode: the weight divided by that estimate
    with torch.no_grad():
        want = block(z).numpy()
    np.testing.assert_allclose(exported(z.numpy()), want, rtol=1e-5, atol=1e-5)
    assert np.linalg.norm(exported.A, 2) <= 1.0 + 1e-3  # spectrally normalised


def test_encode_rows_by_hand() -> None:
    X = sp.csr_matrix(np.array([[0.5, 0.0, 2.0], [0.0, 1.0, 0.0]], np.float32))
    E = np.array([[1.0, -1.0], [-5.0, 5.0], [0.0, 1.0]], np.float32)
    # X E = [[0.5, 1.5], [-5, 5]] -> relu -> identity block
    got = encode_rows(X, E, Block.identity(2))
    assert np.array_equal(got, np.array([[0.5, 1.5], [0.0, 5.0]], np.float32))
    block = Block(np.eye(2, dtype=np.float32), np.array([1.0, -10.0], np.float32), 0.5)
    # z + 0.5 * relu(z + a): [0.5, 1.5] + 0.5 * [1.5, 0] ; [0, 5] + 0.5 * [1, 0]
    got = encode_rows(X, E, block)
    assert np.allclose(got, [[1.25, 1.5], [0.5, 5.0]])


def test_the_surrogate_encoding_is_the_numpy_encoders() -> None:
    torch.manual_seed(2)
    net = SurrogateNet(n_features=7, dim=4, n_meta=3, dropout=0.5, block_dropout=0.5)
    with torch.no_grad():
        net.block.gate.fill_(0.3)
    X = sp.random(5, 7, density=0.5, format="csr", dtype=np.float32, random_state=0)
    net.eval()
    with torch.no_grad():
        want = net.encode(*bag_inputs(X, torch.device("cpu"))).numpy()
    E = net.embedding.weight.detach().numpy()
    np.testing.assert_allclose(encode_rows(X, E, net.block.export()), want, rtol=1e-5, atol=1e-6)
