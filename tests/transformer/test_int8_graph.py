"""The per-token int8 rewrite of an ONNX graph's matrix products, run by ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

from xmc_core.transformer.int8_graph import (
    METADATA_KEY,
    PER_TOKEN,
    WEIGHT_LEVELS,
    quantize_per_token,
    quantize_weights,
)


def test_weights_use_7_bits_per_output_channel():
    W = np.array([[1.0, -0.5, 0.0], [-2.0, 0.25, 0.0]], dtype=np.float32)
    W_q, scale = quantize_weights(W)
    assert W_q.dtype == np.int8 and W_q.tolist() == [[32, -64, 0], [-64, 32, 0]]
    np.testing.assert_allclose(scale, [2 / 64, 0.5 / 64, 1.0])  # an all-zero column: 1
    assert 255 * WEIGHT_LEVELS * 2 <= 32767  # a pair of uint8 x int8 products never saturates


def matmul_model(W: np.ndarray, b: np.ndarray) -> onnx.ModelProto:
    """``Y = A @ W + b`` with ``A`` float32 (batch, tokens, K)."""
    from onnx import TensorProto, helper, numpy_helper

    K, N = W.shape
    nodes = [
        helper.make_node("MatMul", ["A", "W"], ["AW"]),
        helper.make_node("Add", ["AW", "b"], ["Y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["batch", "tokens", K])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", "tokens", N])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_each_token_is_quantized_alone_and_runtime_optimizations_keep_it():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((16, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    model = quantize_per_token(matmul_model(W, b))
    assert {p.key: p.value for p in model.metadata_props} == {METADATA_KEY: PER_TOKEN}
    ops = [node.op_type for node in model.graph.node]
    assert "MatMul" not in ops and ops.count("MatMulIntegerToFloat") == 1
    assert ops[-1] == "Add"  # the bias stays out of MatMulIntegerToFloat (it would be scaled)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    # document 0's tokens are small, document 1's 1000x larger; a token of zeros stays zero
    A = rng.standard_normal((2, 3, 16)).astype(np.float32)
    A[1] *= 1000
    A[0, 2] = 0.0
    Y = session.run(None, {"A": A})[0]
    # numpy: each token rounded to 127 levels of its own largest magnitude, integer products
    scale = np.abs(A).max(-1, keepdims=True) / 127
    codes = np.rint(A / np.where(scale > 0, scale, 1))
    W_q, w_scale = quantize_weights(W)
    np.testing.assert_allclose(Y, codes @ W_q.astype("f4") * scale * w_scale + b, rtol=1e-5)
    np.testing.assert_allclose(Y, A @ W + b, rtol=0.05, atol=0.05 * np.abs(A @ W).max())
    assert np.array_equal(Y[0, 2], b)  # the zero token
    alone = session.run(None, {"A": A[:1]})[0]  # the small document without the large one
    assert alone.tobytes() == Y[:1].tobytes()
