"""What the HTTP server's bodies look like: the models of its OpenAPI schema
(``GET /openapi.json``; rendered as a page by :mod:`xmc_core.serving.docs_page`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from xmc_core.serving.live import ModelInfo

PREDICT_EXAMPLE = {"texts": ["oil prices rose sharply"], "topk": 3}
PREDICT_ANSWER = {
    "predictions": [
        {"labels": ["crude", "ship", "gas"], "scores": [0.91, 0.2, 0.1],
         "probabilities": [0.93, 0.31, 0.12]}
    ]
}  # fmt: skip
ERROR_STATUSES = {
    400: "the body is not JSON, is nested over 16 deep, or has an integer over 4300 digits",
    401: "missing or wrong token (only when the server has one)",
    413: "too many texts, or too large a body",
    422: "wrong schema or types, an empty text, a lone surrogate, topk or beam_size over the "
    "limit, a threshold for an uncalibrated model",
    500: "an unforeseen failure (logged on the server in one line)",
}


class PredictRequest(BaseModel):
    """The body of ``POST /predict`` (strict types: ``"5"`` is not an int). MLflow's scoring
    bodies are accepted too: ``{"dataframe_records": [{"text": ...}]}``, ``{"dataframe_split":
    {"columns": ["text"], "data": [[...]]}}`` or ``{"inputs": [...]}``, with ``topk``,
    ``beam_size`` and ``threshold`` in ``"params"``."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [PREDICT_EXAMPLE]}
    )

    texts: list[str] = Field(description="documents to label, each non-empty")
    topk: int | None = Field(None, ge=1, description="labels per text (default: the server's)")
    beam_size: int | None = Field(
        None, ge=1, description="beam width of the tree search (default: the server's)"
    )
    threshold: float | None = Field(
        None, ge=0, le=1, description="return only the labels of at least this probability, "
        "at most topk (default: the model's predict.threshold; a calibrated model only)",
    )  # fmt: skip


class Prediction(BaseModel):
    """The labels of one text, best first, with their scores and probabilities."""

    labels: list[str] = Field(description="label names, best first")
    scores: list[float] = Field(description="their scores, highest first")
    probabilities: list[float] | None = Field(
        description="the chance that each label is relevant (null: an uncalibrated model)"
    )


class PredictResponse(BaseModel):
    """One prediction per text, in the order of the texts."""

    model_config = ConfigDict(json_schema_extra={"examples": [PREDICT_ANSWER]})

    predictions: list[Prediction]


class HealthResponse(BaseModel):
    """The server is up; the model it serves and the defaults of requests. ``kind`` and
    ``n_labels`` repeat ``model.family`` and ``model.n_labels`` (kept for older clients)."""

    status: Literal["ok"]
    model: ModelInfo = Field(description="the model served now")
    kind: str = Field(description="the same as model.family")
    n_labels: int = Field(description="the same as model.n_labels")
    topk: int = Field(description="labels per text when a request gives no topk")
    beam_size: int = Field(description="beam width when a request gives no beam_size")


class ReloadResponse(BaseModel):
    """``reloaded``: the reference named another model, now served; ``unchanged``: it still
    names the served one. ``old`` and ``new`` are the same then."""

    status: Literal["reloaded", "unchanged"]
    old: ModelInfo = Field(description="the model served before")
    new: ModelInfo = Field(description="the model served now")


class ErrorResponse(BaseModel):
    """Every refusal and failure: one message for a person."""

    detail: str = Field(description="what went wrong, and what to do about it")


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
