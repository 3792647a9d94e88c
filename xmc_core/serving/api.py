"""What the HTTP server's bodies look like (the OpenAPI schema at ``GET /openapi.json``) and a
self-contained page that documents them (``GET /docs``: no script, no external URL; the
server may have no internet access, and FastAPI's Swagger UI loads its code from a CDN)."""

from __future__ import annotations

import html
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from xmc_core.serving.guard import OPEN_PATHS
from xmc_core.serving.live import ModelInfo

PREDICT_EXAMPLE = {"texts": ["oil prices rose sharply"], "topk": 3}
PREDICT_ANSWER = {"predictions": [{"labels": ["crude", "ship", "gas"], "scores": [0.91, 0.2, 0.1]}]}
ERROR_STATUSES = {
    400: "the body is not JSON, is nested over 16 deep, or has an integer over 4300 digits",
    401: "missing or wrong token (only when the server has one)",
    413: "too many texts, or too large a body",
    422: "wrong schema or types, an empty text, a lone surrogate, topk or beam_size over the limit",
    500: "an unforeseen failure (logged on the server in one line)",
}


class PredictRequest(BaseModel):
    """The body of ``POST /predict`` (strict types: ``"5"`` is not an int). MLflow's scoring
    bodies are accepted too: ``{"dataframe_records": [{"text": ...}]}``, ``{"dataframe_split":
    {"columns": ["text"], "data": [[...]]}}`` or ``{"inputs": [...]}``, with ``topk`` and
    ``beam_size`` in ``"params"``."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [PREDICT_EXAMPLE]}
    )

    texts: list[str] = Field(description="documents to label, each non-empty")
    topk: int | None = Field(None, ge=1, description="labels per text (default: the server's)")
    beam_size: int | None = Field(
        None, ge=1, description="beam width of the tree search (default: the server's)"
    )


class Prediction(BaseModel):
    """The labels of one text, best first, with their scores."""

    labels: list[str]
    scores: list[float]


class PredictResponse(BaseModel):
    """One prediction per text, in the order of the texts."""

    model_config = ConfigDict(json_schema_extra={"examples": [PREDICT_ANSWER]})

    predictions: list[Prediction]


class HealthResponse(BaseModel):
    """The server is up; the model it serves and the defaults of requests. ``kind`` and
    ``n_labels`` repeat ``model.family`` and ``model.n_labels`` (kept for older clients)."""

    status: Literal["ok"]
    model: ModelInfo
    kind: str
    n_labels: int
    topk: int = Field(description="labels per text when a request gives no topk")
    beam_size: int = Field(description="beam width when a request gives no beam_size")


class ReloadResponse(BaseModel):
    """``reloaded``: the reference named another model, now served; ``unchanged``: it still
    names the served one. ``old`` and ``new`` are the same then."""

    status: Literal["reloaded", "unchanged"]
    old: ModelInfo
    new: ModelInfo


class ErrorResponse(BaseModel):
    """Every refusal and failure: one message for a person."""

    detail: str


def predict_openapi(token: bool) -> dict[str, Any]:
    """``openapi_extra`` of ``POST /predict``: the request body (the handler reads it itself)."""
    schema = PredictRequest.model_json_schema()
    body = {"required": True, "content": {"application/json": {"schema": schema}}}
    return {"requestBody": body, **secured(token)}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses`` of a route: ``ErrorResponse`` with what each status means."""
    return {s: {"model": ErrorResponse, "description": ERROR_STATUSES[s]} for s in statuses}


def secured(token: bool) -> dict[str, Any]:
    """``openapi_extra`` of a route that needs the token when the server has one."""
    return {"security": [{"bearer": []}]} if token else {}


def add_security_scheme(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the bearer scheme the secured routes name (``securitySchemes``)."""
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = {"type": "http", "scheme": "bearer"}
    return schema


# ---------------------------------------------------------------- the /docs page
_STYLE = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
line-height:1.45;color:#222}
h2{border-top:1px solid #ccc;padding-top:1rem}code,pre{font-family:ui-monospace,monospace}
pre{background:#f4f4f4;padding:.6rem;overflow-x:auto}.m{font-weight:bold;color:#05a}
"""


def docs_page(schema: dict[str, Any], base_url: str, token: bool) -> str:
    """HTML documenting every path of the OpenAPI ``schema`` (method, summary, body schema,
    answers) with a curl example against ``base_url``; inline CSS, no script, no link out."""
    e = html.escape
    info = schema.get("info", {})
    auth = (
        "This server needs <code>Authorization: Bearer &lt;token&gt;</code> on every path but "
        "<code>/health</code>, <code>/docs</code> and <code>/openapi.json</code> (else 401)."
        if token
        else "This server needs no token."
    )
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>{e(info.get('title', 'xmc'))} API</title><style>{_STYLE}</style></head><body>",
        f"<h1>{e(info.get('title', 'xmc'))} API</h1><p>{e(info.get('description', ''))}</p>",
        f"<p>{auth} The machine-readable schema: <code>GET /openapi.json</code>.</p>",
    ]
    for path, operations in schema.get("paths", {}).items():
        for method, op in operations.items():
            parts.append(_operation_html(schema, path, method, op, base_url, token))
    parts.append("</body></html>")
    return "\n".join(parts)


def _operation_html(
    schema: dict[str, Any], path: str, method: str, op: dict[str, Any], base: str, token: bool
) -> str:
    e = html.escape
    out = [f"<h2><span class=m>{e(method.upper())}</span> <code>{e(path)}</code></h2>"]
    out.append(f"<p>{e(op.get('summary', ''))}</p><p>{e(op.get('description', ''))}</p>")
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    if body:
        out.append(f"<h3>Request body</h3><pre>{e(_pretty(_inline(schema, body['schema'])))}</pre>")
    out.append("<h3>Answers</h3><ul>")
    for status, answer in op.get("responses", {}).items():
        shown = answer.get("content", {}).get("application/json", {}).get("schema")
        text = f"<pre>{e(_pretty(_inline(schema, shown)))}</pre>" if shown else ""
        out.append(f"<li><b>{e(status)}</b> {e(answer.get('description', ''))}{text}</li>")
    out.append("</ul>")
    return "\n".join(out) + f"<h3>Example</h3><pre>{e(_curl(method, path, base, token))}</pre>"


def _curl(method: str, path: str, base: str, token: bool) -> str:
    url = base.rstrip("/") + path
    auth = (
        ' -H "Authorization: Bearer $XMC_SERVE_TOKEN"' if token and path not in OPEN_PATHS else ""
    )
    if path == "/predict":
        body = json.dumps(PREDICT_EXAMPLE)
        return f"curl -s {url}{auth} -H 'Content-Type: application/json' -d '{body}'"
    return f"curl -s{' -X POST' if method == 'post' else ''} {url}{auth}"


def _inline(schema: dict[str, Any], node: Any, depth: int = 0) -> Any:
    """``node`` with its ``$ref`` to ``#/components/schemas/...`` replaced by the schemas."""
    if depth > 8:
        return node
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            target = schema.get("components", {}).get("schemas", {}).get(ref.rsplit("/", 1)[1])
            return _inline(schema, target, depth + 1) if target is not None else node
        return {k: _inline(schema, v, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(schema, v, depth + 1) for v in node]
    return node


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
