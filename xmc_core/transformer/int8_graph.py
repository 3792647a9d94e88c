"""Int8 matrix products with one scale per token: the rewrite of a float32 ONNX graph that
:func:`~xmc_core.transformer.onnx_int8.export_int8` runs.

Every ``MatMul`` whose right operand is a constant float32 matrix ``W`` (K, N) becomes::

    scale = max |A| over the last axis (keepdims) / 127        # (..., 1): one per token
    A_q   = uint8(round(A / scale) + 128)                      # (..., K), zero point 128
    Y     = float(MatMulInteger(A_q, W_q, 128)) * scale * w_scale    # (..., N)

with ``W_q`` int8 (K, N) and ``w_scale`` float32 (N,): one scale per output channel. Each
token (row of ``A``) is quantized by itself, so a document's result never depends on the other
documents of its batch nor on padding; ONNX Runtime's own dynamic quantization
(``quantize_dynamic``: ``DynamicQuantizeLinear``) takes one scale over the whole batch tensor
(issue 34). ``MatMulInteger``'s zero point must be a scalar, which the fixed 128 is.

The weights use 7 bits (``|W_q| <= 64``): CPUs without VNNI multiply uint8 by int8 with
``vpmaddubsw``, which saturates a pair of products at 32,767; 255 * 64 * 2 = 32,640 never does
(with 127, 0.007% of the pairs saturated on MiniLM, errors up to 22% of a layer's largest
output). BENCHMARKS.md "int8 prediction through ONNX Runtime" measures both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnx

ACTIVATION_LEVELS = 127
"""Largest quantized magnitude of an activation (int8 range; stored as uint8 around 128)."""
WEIGHT_LEVELS = 64
"""Largest quantized magnitude of a weight: 255 * 64 * 2 stays under int16's 32,767."""
ZERO_POINT = 128
METADATA_KEY = "xmc.int8.activations"
"""The model's metadata entry naming how it quantizes activations (``per-token``)."""
PER_TOKEN = "per-token"
_SHARED = {"zero_point": (ZERO_POINT, np.uint8), "offset": (ZERO_POINT, np.float32),
           "levels": (ACTIVATION_LEVELS, np.float32), "tiny": (1e-30, np.float32)}  # fmt: skip


def quantize_weights(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``W`` float32 (K, N) -> (int8 (K, N) within ±:data:`WEIGHT_LEVELS`, float32 (N,) scales
    per output channel; an all-zero column gets scale 1)."""
    largest = np.abs(W).max(axis=0)
    scale = np.where(largest > 0, largest / WEIGHT_LEVELS, 1.0).astype(np.float32)
    levels = np.clip(np.rint(W / scale), -WEIGHT_LEVELS, WEIGHT_LEVELS)
    return levels.astype(np.int8), scale


def quantize_per_token(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (modified in place and returned) with every ``MatMul`` of a constant float32
    2-D right operand rewritten as the module docstring says (an activation that feeds several
    products, e.g. the attention's query, key and value, is quantized once); other products
    (activation by activation) stay float32. Marks the model ``METADATA_KEY: per-token``."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    weights = {t.name: t for t in graph.initializer if t.data_type == TensorProto.FLOAT}
    nodes: list[onnx.NodeProto] = []
    added = [numpy_helper.from_array(np.array(v, t), f"q/{k}") for k, (v, t) in _SHARED.items()]
    quantized: dict[str, tuple[str, str]] = {}
    for node in graph.node:
        weight = weights.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None or len(weight.dims) != 2:
            nodes.append(node)
            continue
        if node.input[0] not in quantized:
            steps, quantized[node.input[0]] = _quantize_rows(node.input[0], f"q/a{len(quantized)}")
            nodes += steps
        codes, row_scale = quantized[node.input[0]]
        w = f"q/w{len(added)}"
        W_q, w_scale = quantize_weights(numpy_helper.to_array(weight))
        added += [numpy_helper.from_array(W_q, f"{w}/int8")]
        added += [numpy_helper.from_array(w_scale, f"{w}/scale")]
        nodes += [
            helper.make_node("MatMulInteger", [codes, f"{w}/int8", "q/zero_point"], [f"{w}/int32"]),
            helper.make_node("Cast", [f"{w}/int32"], [f"{w}/float"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"{w}/float", row_scale], [f"{w}/rows"]),
            helper.make_node("Mul", [f"{w}/rows", f"{w}/scale"], [node.output[0]]),
        ]  # fmt: skip
    used = {name for node in nodes for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.node[:], graph.initializer[:]
    graph.node.extend(nodes)
    graph.initializer.extend([*kept, *added])
    helper.set_model_props(model, {METADATA_KEY: PER_TOKEN})
    return model


def _quantize_rows(a: str, p: str) -> tuple[list[onnx.NodeProto], tuple[str, str]]:
    """Nodes quantizing activation ``a`` (..., K) row by row (names prefixed ``p``), and the
    names of its uint8 codes (..., K) and float32 scales (..., 1)."""
    from onnx import TensorProto, helper

    make = helper.make_node
    steps = [
        make("Abs", [a], [f"{p}/abs"]),
        make("ReduceMax", [f"{p}/abs"], [f"{p}/max"], axes=[-1], keepdims=1),
        make("Div", [f"{p}/max", "q/levels"], [f"{p}/scale"]),
        make("Max", [f"{p}/max", "q/tiny"], [f"{p}/nonzero"]),  # an all-zero row stays zero
        make("Div", ["q/levels", f"{p}/nonzero"], [f"{p}/inverse"]),
        make("Mul", [a, f"{p}/inverse"], [f"{p}/scaled"]),
        make("Round", [f"{p}/scaled"], [f"{p}/rounded"]),
        make("Add", [f"{p}/rounded", "q/offset"], [f"{p}/shifted"]),
        make("Cast", [f"{p}/shifted"], [f"{p}/uint8"], to=TensorProto.UINT8),
    ]
    return steps, (f"{p}/uint8", f"{p}/scale")
