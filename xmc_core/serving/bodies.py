"""The body of ``POST /predict``: read within a size limit, parsed, checked and normalized.

    {"texts": ["...", ...], "topk": 5, "beam_size": 10, "threshold": 0.5}

MLflow-style bodies are accepted too: ``{"dataframe_records": [{"text": ...}, ...]}``,
``{"dataframe_split": {"columns": ["text"], "data": [[...], ...]}}`` or ``{"inputs": [...]}``,
with ``topk`` / ``beam_size`` / ``threshold`` in ``"params"``. A refusal is a
:class:`RequestError`: 400 for a body that is not JSON (or nested too deeply, or with an integer
over 4300 digits), 413 for too many texts or too large a body, 422 for a wrong schema, wrong
types, an empty text or one that is not valid Unicode (a lone surrogate; naming its index).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.requests import ClientDisconnect, Request

from xmc_core.serving.api import PredictRequest

if TYPE_CHECKING:
    from xmc_core.serving.limits import Limits

MAX_DEPTH = 16
"""Nesting of a request body (the deepest valid form, ``dataframe_split``, needs 4)."""


class RequestError(Exception):
    """A request the server refuses: HTTP ``status`` and a message for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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
    """MLflow scoring-server bodies -> ``{"texts", "topk", "beam_size", "threshold"}``; others
    unchanged."""
    forms = [k for k in ("dataframe_records", "dataframe_split", "inputs") if k in raw]
    if not forms:
        return raw
    extra = set(raw) - {forms[0], "params"}
    if len(forms) > 1 or extra:
        raise RequestError(422, f"unexpected keys with {forms[0]}: {sorted(extra) + forms[1:]}")
    params = raw.get("params") or {}
    if not isinstance(params, dict):
        raise RequestError(422, "params must be an object")
    if unknown := sorted(set(params) - {"topk", "beam_size", "threshold"}):
        raise RequestError(422, f"unexpected params {unknown}: only topk, beam_size, threshold")
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
