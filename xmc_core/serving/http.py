"""JSON predictions over HTTP: a small FastAPI app around one loaded ``XmcModel``.

    GET  /health   {"status": "ok", "kind": ..., "n_labels": ..., "topk": ..., "beam_size": ...}
    POST /predict  {"texts": ["...", ...], "topk": 5, "beam_size": 10}
                -> {"predictions": [{"labels": [...], "scores": [...]}, ...]}  (best first)

MLflow-style bodies are accepted too: ``{"dataframe_records": [{"text": ...}, ...]}``,
``{"dataframe_split": {"columns": ["text"], "data": [[...], ...]}}`` or ``{"inputs": [...]}``,
with ``topk`` / ``beam_size`` in ``"params"``. Bad requests get a JSON ``{"detail": message}``:
400 for a body that is not JSON (or nested too deeply, or with an integer over 4300 digits),
413 for too many texts or too large a body, 422 for a wrong schema, wrong types, an empty text
or one that is not valid Unicode (a lone surrogate; naming its index). An unforeseen failure
answers 500 ``{"detail": ...}`` and logs one line, never a traceback. Predictions run in a
worker thread, one at a time (the compiled beam search already uses every core).

Exposure (token, bind policy, read deadlines, connection limit): :mod:`xmc_core.serving.guard`.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import ClientDisconnect

from xmc_core.app.predictions import ranked_lists
from xmc_core.config import ServeConfig, XmcConfig
from xmc_core.errors import XmcError
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.guard import BearerAuth, check_exposure, guarded_protocol, read_token

MAX_DEPTH = 16
"""Nesting of a request body (the deepest valid form, ``dataframe_split``, needs 4)."""
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """What one request may ask for (beyond it: 413 or 422) and what a connection may take:
    seconds to send the request head and body (then 408 / closed), open connections (then 503).

    The values of :class:`~xmc_core.config.ServeConfig` (the defaults live there), possibly
    overridden on the command line: :meth:`check_defaults` checks them before serving.
    """

    max_texts: int
    max_body_bytes: int
    max_topk: int
    max_beam_size: int
    header_timeout_s: float
    body_timeout_s: float
    max_connections: int

    @classmethod
    def from_config(cls, cfg: ServeConfig, **given: Any) -> Limits:
        """The limits of ``cfg``, with the ``given`` fields replaced (e.g. command-line flags)."""
        values = {f.name: getattr(cfg, f.name) for f in fields(cls)}
        return cls(**(values | given))

    def check_defaults(self, topk: int | None, beam_size: int | None) -> None:
        """Refuse server defaults that every request would be refused for (or stuck on)."""
        for name, value, most in (
            ("topk", topk, self.max_topk),
            ("beam_size", beam_size, self.max_beam_size),
        ):
            if value is not None and not 1 <= value <= most:
                raise XmcError(f"{name}={value} is out of range\n  fix: pass 1 to {most}")
        for name, seconds in (
            ("header timeout", self.header_timeout_s),
            ("body timeout", self.body_timeout_s),
        ):
            if not 0 < seconds <= 3600:
                raise XmcError(f"{name} of {seconds} s is out of range\n  fix: pass 0.1 to 3600")
        if not 1 <= self.max_connections <= 10_000:
            raise XmcError(
                f"max_connections={self.max_connections} is out of range\n  fix: pass 1 to 10000"
            )


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
    limits: Limits | None = None,
    token: str | None = None,
) -> FastAPI | BearerAuth:
    """The app; ``topk`` / ``beam_size``: defaults of requests (None: the model's own);
    ``limits`` None: those of the default ``ServeConfig``; ``token``: required as
    ``Authorization: Bearer`` on every path but ``/health``."""
    limits = Limits.from_config(ServeConfig()) if limits is None else limits
    limits.check_defaults(topk, beam_size)
    defaults = model.ranker.predict_cfg
    default_topk = defaults.topk if topk is None else topk
    default_beam = defaults.beam_size if beam_size is None else beam_size
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
        message = err.message.encode("utf-8", "backslashreplace").decode("utf-8")
        return JSONResponse({"detail": message}, status_code=err.status)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "kind": model.family,
            "n_labels": len(model.labels),
            "topk": default_topk,
            "beam_size": default_beam,
        }

    @app.post("/predict")
    async def predict(request: Request) -> JSONResponse:
        try:
            req = parse_request(await read_body(request, limits.max_body_bytes), limits)
            predictions = await anyio.to_thread.run_sync(run_prediction, req)
            return JSONResponse({"predictions": predictions})
        except RequestError:
            raise
        except Exception as err:  # unforeseen: one log line, no traceback to the client
            what = " ".join(f"{type(err).__name__}: {err}".split())[:500]
            log.error("POST /predict failed: %s", what)
            raise RequestError(500, "prediction failed on the server: see the server log") from None

    return app if token is None else BearerAuth(app, token)


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The request body, refused with 413 once it exceeds ``max_bytes``."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:  # h11 refuses over 20 digits
        raise RequestError(413, f"body of {declared} bytes exceeds the limit of {max_bytes}")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise RequestError(413, f"body exceeds the limit of {max_bytes} bytes")
            chunks.append(chunk)
    except ClientDisconnect:  # gone, or cut for sending too slowly: nobody reads the answer
        raise RequestError(408, "the connection closed before the body was complete") from None
    return b"".join(chunks)


def parse_request(body: bytes, limits: Limits) -> PredictRequest:
    """Validate a JSON body (see the module docstring) into a :class:`PredictRequest`."""
    raw = load_json(body)
    if not isinstance(raw, dict):
        raise RequestError(422, 'body must be a JSON object such as {"texts": ["..."]}')
    check_strings(raw)
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


def load_json(body: bytes) -> Any:
    """The parsed body; 400 for invalid JSON, deep nesting or integers over 4300 digits."""
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RequestError(400, f"body is not valid JSON ({err})") from err
    except RecursionError:
        raise RequestError(400, f"body is nested too deeply (limit: {MAX_DEPTH} levels)") from None
    except ValueError as err:  # e.g. "Exceeds the limit (4300 digits) for integer string ..."
        raise RequestError(400, f"body has a number that cannot be read: {err}") from None


def check_strings(raw: Any) -> None:
    """Refuse nesting over MAX_DEPTH and strings (keys too) UTF-8 cannot encode (lone
    surrogates such as ``"\\ud800"``), naming where; iterative, so deep input cannot overflow."""
    stack: list[tuple[Any, str, int]] = [(raw, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise RequestError(400, f"body is nested too deeply (limit: {MAX_DEPTH} levels)")
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as err:
                char = f"\\u{ord(value[err.start]):04x}"
                raise RequestError(
                    422, f"{where or 'body'} is not valid Unicode: lone surrogate {char} at "
                    f"character {err.start}; send UTF-8 text",
                ) from None  # fmt: skip
        elif isinstance(value, dict):
            for key, item in value.items():
                stack.append((key, f"key {where or 'of the body'}", depth + 1))
                stack.append((item, f"{where}.{key}" if where else str(key), depth + 1))
        elif isinstance(value, list):
            items = reversed(list(enumerate(value)))  # popped first to last
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in items)


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
    if unknown := sorted(set(params) - {"topk", "beam_size"}):
        raise RequestError(422, f"unexpected params {unknown}: only topk and beam_size")
    return {"texts": _mlflow_texts(forms[0], raw[forms[0]]), **params}


def _mlflow_texts(form: str, value: Any) -> Any:
    if form == "dataframe_records":
        if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
            raise RequestError(422, 'dataframe_records must be a list of {"text": ...} objects')
        if any("text" not in r for r in value):
            raise RequestError(422, 'every record of dataframe_records needs a "text" field')
        return [r["text"] for r in value]
    if form == "dataframe_split":
        columns = value.get("columns") if isinstance(value, dict) else None
        if not isinstance(columns, list) or "text" not in columns:
            raise RequestError(
                422, 'dataframe_split needs "columns", a list holding "text", and "data"'
            )
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


def build_server(app: Any, host: str, port: int, limits: Limits) -> Any:
    """A ``uvicorn.Server`` for ``app`` with the read deadlines and connection limit of
    ``limits`` (:class:`xmc_core.serving.guard.GuardedH11Protocol`); ``.run()`` serves."""
    import uvicorn

    protocol = guarded_protocol(
        limits.header_timeout_s, limits.body_timeout_s, limits.max_connections
    )
    config = uvicorn.Config(app, host=host, port=port, http=protocol, log_level="info")
    return uvicorn.Server(config)


def serve(
    model: str | Path,
    cfg: XmcConfig,
    host: str,
    port: int,
    topk: int | None,
    beam_size: int | None,
    limits: Limits,
    token_file: Path | None = None,
    insecure_public: bool = False,
) -> None:
    """Resolve ``model`` (folder or MLflow URI), load it once and serve it until stopped.

    ``host``, ``port``, ``limits``: ``cfg.serve``'s unless the command line gave others;
    ``topk`` / ``beam_size`` None: the model's own. Every option is checked before the model is
    loaded or the port bound (:class:`XmcError`):
    ``topk`` / ``beam_size`` within ``limits``, the port, the token (``token_file`` or
    ``$XMC_SERVE_TOKEN``) and the bind policy of :func:`~xmc_core.serving.guard.check_exposure`.
    """
    from xmc_core.serving.resolve import local_model_dir

    limits.check_defaults(topk, beam_size)
    if not 1 <= port <= 65535:
        raise XmcError(f"port {port} is out of range\n  fix: pass 1 to 65535")
    token = read_token(token_file)
    check_exposure(host, token, insecure_public)
    folder = local_model_dir(model, cfg)
    loaded = XmcModel.load(folder)
    app = create_app(loaded, topk, beam_size, limits, token)
    log.info(
        "serving %s (%s, %d labels, from %s) at http://%s:%d  (POST /predict, GET /health%s)",
        model, loaded.family, len(loaded.labels), folder, host, port,
        "; token required except on /health" if token else "",
    )  # fmt: skip
    build_server(app, host, port, limits).run()
