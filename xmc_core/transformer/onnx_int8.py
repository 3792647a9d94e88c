"""The fine-tuned encoder as an int8 ONNX model, to embed on a CPU: the saved model's
prediction (``matcher.predict_runtime: onnx-int8``) and, if asked, training's embedding passes
(``matcher.embed_runtime: onnx-int8``, :func:`embed_on`).

ONNX Runtime (the ``onnx`` extra) runs the encoder with int8 weights (one scale per output
channel) and activations quantized on the fly, one scale per token
(:mod:`~xmc_core.transformer.int8_graph`), on the CPU's int8 instructions (VNNI where
present): a document's embedding is the same whatever the other documents of its batch. The
model is exported from the torch encoder when the model is built and saved beside it as
``encoder-int8.onnx``: an ONNX protobuf, no pickle (a training pass exports the encoder as it
stands and keeps it in memory only). Speed and the P@1 it costs: BENCHMARKS.md (the tables'
int8 rows) and benchmarks/notes/2026-11-25-issue-18-xr-transformer-cpu.md,
"int8 prediction through ONNX Runtime"."""

from __future__ import annotations

import contextlib
import logging
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import torch

from xmc_core.errors import ArtifactError, InputError
from xmc_core.storage.atomic import write_bytes
from xmc_core.transformer.encoder import by_length, embed
from xmc_core.transformer.int8_graph import METADATA_KEY, PER_TOKEN, quantize_per_token

if TYPE_CHECKING:
    from xmc_core.config import MatcherConfig
    from xmc_core.transformer.encoder import TextEncoder
    from xmc_core.transformer.tokens import TokenizedTexts

ONNX_FILE = "encoder-int8.onnx"
OPSET = 17
INPUTS = ("input_ids", "attention_mask")
INSTALL = "install the onnx extra: pip install -e '.[onnx]' (make install does)"


def _runtime() -> ModuleType:
    """``onnxruntime``, or a clear error naming the extra that installs it."""
    try:
        import onnxruntime
    except ImportError as err:
        raise InputError(
            None, "matcher's onnx-int8 runtime needs onnxruntime, which is missing", INSTALL
        ) from err
    return onnxruntime


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the exporter's tracer warnings and the quantizer's advice (logged on the root
    logger): neither is news to the user of a finished model."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        previous = logging.root.manager.disable
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(previous)


def export_int8(encoder: TextEncoder) -> bytes:
    """``encoder`` as a serialized int8 ONNX model: a float32 export with plain ("eager")
    attention, then every matrix product by a weight matrix quantized per token and output
    channel (:func:`~xmc_core.transformer.int8_graph.quantize_per_token`; the token embeddings
    and the attention's products stay float32)."""
    _runtime()
    import onnx

    # a padded example, so that the traced graph keeps the attention mask
    ids = torch.ones((2, 8), dtype=torch.int64)
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3], dtype=torch.int64)
    dims = {0: "batch", 1: "tokens"}
    axes = {"input_ids": dims, "attention_mask": dims, "embedding": {0: "batch"}}
    was_training, attention = encoder.training, encoder.body.config._attn_implementation
    encoder.eval().cpu()
    encoder.body.set_attn_implementation("eager")
    try:
        with tempfile.TemporaryDirectory(prefix="xmc-onnx-") as tmp, _quiet():
            fp32 = Path(tmp) / "encoder.onnx"
            torch.onnx.export(
                encoder, (ids, mask), fp32, input_names=list(INPUTS),
                output_names=["embedding"], dynamic_axes=axes, opset_version=OPSET,
                dynamo=False,
            )  # fmt: skip
            return quantize_per_token(onnx.load(fp32)).SerializeToString()
    finally:
        encoder.body.set_attn_implementation(attention)
        encoder.train(was_training)


class Int8Encoder:
    """An int8 ONNX encoder in an ONNX Runtime session on the CPU (as many threads as torch).

    ``source``: the file ``model`` was read from. The session is then opened from that path, so
    that ONNX Runtime resolves any tensor data the model keeps in other files (external data)
    inside its folder and refuses the rest (absolute paths, ``..``, links out, FIFOs); opened
    from bytes it would read them from the working directory."""

    def __init__(self, model: bytes, hidden_size: int, source: Path | None = None) -> None:
        ort = _runtime()
        options = ort.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        options.log_severity_level = 3  # errors only
        opened = str(source) if source is not None else model
        try:
            self.session = ort.InferenceSession(opened, options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own classes (Fail, InvalidProtobuf)
            where = source if source is not None else "int8 encoder"
            problem = f"cannot load an ONNX model ({type(err).__name__}: {err})"
            raise ArtifactError(where, problem, "re-save the model") from err
        self.model = model
        self.hidden_size = hidden_size
        metadata = self.session.get_modelmeta().custom_metadata_map
        self.per_token = metadata.get(METADATA_KEY) == PER_TOKEN
        """False for a model saved before issue 34 (one scale over the whole batch)."""

    @classmethod
    def from_encoder(cls, encoder: TextEncoder) -> Int8Encoder:
        """Export ``encoder`` (see :func:`export_int8`) and open it."""
        return cls(export_int8(encoder), encoder.hidden_size)

    def save(self, folder: Path) -> None:
        """Write ``ONNX_FILE`` into ``folder`` (atomically)."""
        write_bytes(folder / ONNX_FILE, self.model)

    @classmethod
    def load(cls, folder: Path, hidden_size: int) -> Int8Encoder:
        """Open the ``ONNX_FILE`` that :meth:`save` wrote into ``folder``."""
        path = folder / ONNX_FILE
        if not path.is_file():
            raise ArtifactError(path, "the int8 encoder is missing", "re-save the model")
        return cls(path.read_bytes(), hidden_size, path)

    def embed(self, tokens: TokenizedTexts, batch_size: int, what: str = "embedding") -> np.ndarray:
        """Unit-norm embeddings float32 (n, hidden) of tokenized texts, in input order
        (batched by :func:`~xmc_core.transformer.encoder.by_length`)."""

        def run(rows: np.ndarray) -> np.ndarray:
            ids, mask = tokens.batch(rows, torch.device("cpu"))
            feed = dict(zip(INPUTS, (ids.numpy(), mask.numpy()), strict=True))
            return self.session.run(None, feed)[0]

        return by_length(tokens, batch_size, self.hidden_size, run, what)


def embed_on(
    encoder: TextEncoder, tokens: TokenizedTexts, device: torch.device, cfg: MatcherConfig,
    what: str = "embedding",
) -> np.ndarray:  # fmt: skip
    """A training pass's embeddings, float32 (n, hidden), unit rows, in input order:
    :func:`~xmc_core.transformer.encoder.embed` with ``cfg.embed_batch_size`` and ``cfg.bf16``,
    or through ``encoder``'s int8 export, made for this pass, when ``cfg.embed_runtime`` is
    ``onnx-int8`` and ``device`` a CPU."""
    if cfg.embed_runtime == "onnx-int8" and device.type == "cpu":
        return Int8Encoder.from_encoder(encoder).embed(tokens, cfg.embed_batch_size, what)
    return embed(encoder, tokens, device, cfg.embed_batch_size, cfg.bf16, what)
