"""Int8 matrix products with one scale per token: the rewrite of a float32 ONNX graph that
:func:`~xmc_core.transformer.onnx_int8.export_int8` runs.

Every ``MatMul`` whose right operand is a constant float32 matrix ``W`` (K, N) becomes::

    scale = max |A| over the last axis (keepdims) / 127             # (..., 1): one per token
    A_q   = QuantizeLinear(A, scale, zero point 128), row by row     # (..., K) uint8
    Y     = MatMulIntegerToFloat(A_q, W_q, scale, w_scale, 128)      # (..., N) float32

with ``W_q`` int8 (K, N) and ``w_scale`` float32 (N,), one scale per output channel.
``MatMulIntegerToFloat`` (ONNX Runtime's ``com.microsoft`` operator) multiplies in integers,
then by ``w_scale`` and by each row's ``scale``. Each token (row of ``A``) is quantized by
itself, so a document's result never depends on the other documents of its batch nor on
padding; ONNX Runtime's own dynamic quantization (``quantize_dynamic``:
``DynamicQuantizeLinear``) takes one scale over the whole batch tensor (issue 34).

Two traps of ONNX Runtime 1.32, both measured (cosine of MiniLM's embeddings to float32 0.66
instead of 0.997) and kept out: the standard pattern ``Cast(MatMulInteger) * (scale * w_scale)``
is fused into a ``MatMulIntegerToFloat`` that multiplies the bias too by the row scale, and so
does that operator's own ``bias`` input; the bias stays the graph's own ``Add``.

The weights use 7 bits (``|W_q| <= 64``): CPUs without VNNI multiply uint8 by int8 with
``vpmaddubsw``, which saturates a pair of products at 32,767; 255 * 64 * 2 = 32,640 never does
(with 127, 0.007% of MiniLM's pairs saturated on debian-deps texts, errors up to 22% of a
layer's largest output). benchmarks/notes/2026-11-25-issue-18-xr-transformer-cpu.md,
"int8 prediction through ONNX Runtime", has the figures.
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
CONTRIB = "com.microsoft"
_SHARED = {"zero_point": (ZERO_POINT, np.uint8), "levels": (ACTIVATION_LEVELS, np.float32),
           "tiny": (1e-30, np.float32), "flat": ([-1], np.int64)}  # fmt: skip


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
        a = node.input[0]
        if a not in quantized:
            p = f"q/a{len(quantized)}"
            rows_shape = np.array([-1, weight.dims[0]], np.int64)
            added.append(numpy_helper.from_array(rows_shape, f"{p}/2d"))
            steps, quantized[a] = _quantize_rows(a, p)
            nodes += steps
        codes, row_scale = quantized[a]
        w = f"q/w{len(added)}"
        W_q, w_scale = quantize_weights(numpy_helper.to_array(weight))
        added += [numpy_helper.from_array(W_q, f"{w}/int8")]
        added += [numpy_helper.from_array(w_scale, f"{w}/scale")]
        inputs = [codes, f"{w}/int8", row_scale, f"{w}/scale", "q/zero_point"]
        nodes.append(helper.make_node("MatMulIntegerToFloat", inputs, node.output, domain=CONTRIB))
    used = {name for node in nodes for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.node[:], graph.initializer[:]
    graph.node.extend(nodes)
    graph.initializer.extend([*kept, *added])
    model.opset_import.append(helper.make_opsetid(CONTRIB, 1))
    helper.set_model_props(model, {METADATA_KEY: PER_TOKEN})
    return model


def _quantize_rows(a: str, p: str) -> tuple[list[onnx.NodeProto], tuple[str, str]]:
    """Nodes quantizing activation ``a`` (..., K) row by row (names prefixed ``p``; ``p/2d``
    is the initializer ``[-1, K]``), and the names of its uint8 codes (..., K) and float32
    scales (..., 1). ``QuantizeLinear`` takes one scale per row of a 2-D view (axis 0)."""
    from onnx import helper

    make = helper.make_node
    rows = [f"{p}/row_scales", f"{p}/row_zero_points"]
    steps = [
        make("Abs", [a], [f"{p}/abs"]),
        make("ReduceMax", [f"{p}/abs"], [f"{p}/max"], axes=[-1], keepdims=1),
        make("Max", [f"{p}/max", "q/tiny"], [f"{p}/nonzero"]),  # an all-zero row stays zero
        make("Div", [f"{p}/nonzero", "q/levels"], [f"{p}/scale"]),
        make("Reshape", [f"{p}/scale", "q/flat"], [f"{p}/row_scales"]),
        make("Shape", [f"{p}/row_scales"], [f"{p}/n_rows"]),
        make("Expand", ["q/zero_point", f"{p}/n_rows"], [f"{p}/row_zero_points"]),
        make("Reshape", [a, f"{p}/2d"], [f"{p}/rows"]),
        make("QuantizeLinear", [f"{p}/rows", *rows], [f"{p}/row_codes"], axis=0),
        make("Shape", [a], [f"{p}/shape"]),
        make("Reshape", [f"{p}/row_codes", f"{p}/shape"], [f"{p}/uint8"]),
    ]
    return steps, (f"{p}/uint8", f"{p}/scale")
