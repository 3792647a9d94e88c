"""JSON predictions over HTTP: a small FastAPI app around one loaded ``XmcModel``.

    GET  /health   {"status": "ok", "kind": ..., "n_labels": ..., "topk": ..., "beam_size": ...}
    POST /predict  {"texts": ["...", ...], "topk": 5, "beam_size": 10}
                -> {"predictions": [{"labels": [...], "scores": [...]}, ...]}  (best first)

MLflow-style bodies are accepted too: ``{"dataframe_records": [{"text": ...}, ...]}``,
``{"dataframe_split": {"columns": ["text"], "data": [[...], ...]}}`` or ``{"inputs": [...]}``,
with ``topk`` / ``beam_size`` in ``"params"``. Bad requests get a JSON ``{"detail": message}``:
400 for a body that is not JSON, 413 for too many texts or too large a body, 422 for a wrong
schema, wrong types or an empty text (naming its index). Predictions run in a worker thread,
one at a time (the compiled beam search already uses every core).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from xmc_core.config import XmcConfig
from xmc_core.predictions import ranked_lists
from xmc_core.text_model import XmcModel

MAX_TEXTS = 1000
"""Texts per request."""
MAX_BODY_BYTES = 4 << 20
"""Bytes per request body."""
MAX_TOPK = 1000
MAX_BEAM_SIZE = 1000
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """What one request may ask for; beyond it the request is refused (413 or 422)."""

    max_texts: int = MAX_TEXTS
    max_body_bytes: int = MAX_BODY_BYTES
    max_topk: int = MAX_TOPK
    max_beam_size: int = MAX_BEAM_SIZE


class RequestError(Exception):
    """A request the server refuses: HTTP ``status`` and a message for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class PredictRequest(BaseModel):
    """The body of ``POST /predict`` (strict types: ``"5"`` is not an int)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    texts: list[str]
    topk: int | None = Field(None, ge=1)
    beam_size: int | None = Field(None, ge=1)


def create_app(
    model: XmcModel,
    topk: int | None = None,
    beam_size: int | None = None,
    limits: Limits = Limits(),  # noqa: B008 (frozen dataclass)
) -> FastAPI:
    """The app; ``topk`` / ``beam_size``: defaults of requests (None: the model's own)."""
    defaults = model.ranker.predict_cfg
    default_topk, default_beam = topk or defaults.topk, beam_size or defaults.beam_size
    lock = threading.Lock()
    app = FastAPI(title="xmc", description="extreme multi-label text classification")

    def run_prediction(req: PredictRequest) -> list[dict[str, list]]:
        with lock:
            scores = model.predict(
                req.texts, req.topk or default_topk, req.beam_size or default_beam
            )
        names, values = ranked_lists(model.labels, scores)
        return [{"labels": n, "scores": v} for n, v in zip(names, values, strict=True)]

    @app.exception_handler(RequestError)
    async def refused(_request: Request, err: RequestError) -> JSONResponse:
        return JSONResponse({"detail": err.message}, status_code=err.status)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "kind": model.kind,
            "n_labels": len(model.labels),
            "topk": default_topk,
            "beam_size": default_beam,
        }

    @app.post("/predict")
    async def predict(request: Request) -> dict[str, Any]:
        req = parse_request(await read_body(request, limits.max_body_bytes), limits)
        predictions = await anyio.to_thread.run_sync(run_prediction, req)
        return {"predictions": predictions}

    return app


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The request body, refused with 413 once it exceeds ``max_bytes``."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise RequestError(413, f"body of {declared} bytes exceeds the limit of {max_bytes}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise RequestError(413, f"body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_request(body: bytes, limits: Limits) -> PredictRequest:
    """Validate a JSON body (see the module docstring) into a :class:`PredictRequest`."""
    try:
        raw = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RequestError(400, f"body is not valid JSON ({err})") from err
    if not isinstance(raw, dict):
        raise RequestError(422, 'body must be a JSON object such as {"texts": ["..."]}')
    raw = normalize_body(raw)
    texts = raw.get("texts")
    if isinstance(texts, list) and len(texts) > limits.max_texts:
        raise RequestError(413, f"{len(texts)} texts exceed the limit of {limits.max_texts}")
    try:
        req = PredictRequest.model_validate(raw)
    except ValidationError as err:
        raise RequestError(422, validation_message(err)) from err
    if not req.texts:
        raise RequestError(422, "texts is empty: send at least one text")
    for i, text in enumerate(req.texts):
        if not text.strip():
            raise RequestError(422, f"texts[{i}] is empty or whitespace-only")
    for name, value, most in (
        ("topk", req.topk, limits.max_topk),
        ("beam_size", req.beam_size, limits.max_beam_size),
    ):
        if value is not None and value > most:
            raise RequestError(422, f"{name}={value} exceeds the limit of {most}")
    return req


def normalize_body(raw: dict[str, Any]) -> dict[str, Any]:
    """MLflow scoring-server bodies -> ``{"texts", "topk", "beam_size"}``; others unchanged."""
    forms = [k for k in ("dataframe_records", "dataframe_split", "inputs") if k in raw]
    if not forms:
        return raw
    extra = set(raw) - {forms[0], "params"}
    if len(forms) > 1 or extra:
        raise RequestError(422, f"unexpected keys with {forms[0]}: {sorted(extra) + forms[1:]}")
    params = raw.get("params") or {}
    if not isinstance(params, dict):
        raise RequestError(422, "params must be an object")
    return {"texts": _mlflow_texts(forms[0], raw[forms[0]]), **params}


def _mlflow_texts(form: str, value: Any) -> Any:
    if form == "dataframe_records":
        if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
            raise RequestError(422, 'dataframe_records must be a list of {"text": ...} objects')
        if any("text" not in r for r in value):
            raise RequestError(422, 'every record of dataframe_records needs a "text" field')
        return [r["text"] for r in value]
    if form == "dataframe_split":
        if not isinstance(value, dict) or "text" not in (value.get("columns") or []):
            raise RequestError(422, 'dataframe_split needs "columns" holding "text" and "data"')
        col = value["columns"].index("text")
        rows = value.get("data")
        if not isinstance(rows, list) or not all(
            isinstance(r, list) and len(r) > col for r in rows
        ):
            raise RequestError(422, "dataframe_split data must be a list of rows")
        return [r[col] for r in rows]
    return value["text"] if isinstance(value, dict) and "text" in value else value


def validation_message(err: ValidationError, most: int = 5) -> str:
    """Pydantic errors as ``field.path: message`` lines (the first ``most`` of them)."""
    parts = []
    for e in err.errors()[:most]:
        where = ".".join(str(p) for p in e["loc"]) or "body"
        parts.append(f"{where}: {e['msg']}")
    more = err.error_count() - most
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def serve(
    model: str | Path,
    cfg: XmcConfig,
    host: str = "127.0.0.1",
    port: int = 5005,
    topk: int | None = None,
    beam_size: int | None = None,
) -> None:
    """Resolve ``model`` (folder or MLflow URI), load it once and serve it until stopped."""
    import uvicorn

    from xmc_core.serving.resolve import local_model_dir

    folder = local_model_dir(model, cfg)
    loaded = XmcModel.load(folder)
    app = create_app(loaded, topk, beam_size)
    log.info(
        "serving %s (%s, %d labels, from %s) at http://%s:%d  (POST /predict, GET /health)",
        model, loaded.kind, len(loaded.labels), folder, host, port,
    )  # fmt: skip
    uvicorn.run(app, host=host, port=port, log_level="info")
