"""JSON predictions over HTTP: a small FastAPI app around one served ``XmcModel``.

    GET  /health        {"status": "ok", "model": {"uri", "name", "version", "alias", "run_id",
                        "family", "n_labels", "fingerprint", "loaded_at", ...}, "topk", ...}
    POST /predict       {"texts": ["...", ...], "topk": 5, "beam_size": 10}
                     -> {"predictions": [{"labels": [...], "scores": [...]}, ...]}  (best first)
    POST /reload        serve the model the reference names now -> {"status", "old", "new"}
    GET  /docs          a self-contained page documenting the API
    GET  /openapi.json  its OpenAPI schema

Bodies of ``/predict`` (MLflow's forms too) and their refusals: :mod:`xmc_core.serving.bodies`;
bad requests get a JSON ``{"detail": message}``. An unforeseen failure answers 500
``{"detail": ...}`` and logs one line, never a traceback. Predictions run in a worker thread,
one at a time (the compiled beam search already uses every core). Reloading (explicit, or every
``serve.reload_interval_s`` for an MLflow URI): :mod:`xmc_core.serving.live`.

Exposure (token, bind policy, read deadlines, connection limit): :mod:`xmc_core.serving.guard`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse

from xmc_core.app.predictions import ranked_lists
from xmc_core.config import ServeConfig, XmcConfig
from xmc_core.errors import XmcError
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.api import (
    ErrorResponse,
    HealthResponse,
    PredictRequest,
    PredictResponse,
    ReloadResponse,
    add_security_scheme,
    error_responses,
    predict_openapi,
    secured,
)
from xmc_core.serving.bodies import RequestError, parse_request, read_body
from xmc_core.serving.docs_page import docs_page
from xmc_core.serving.guard import BearerAuth, check_exposure, guarded_protocol, read_token
from xmc_core.serving.limits import Limits
from xmc_core.serving.live import LiveModel, ReloadError, Served, watch

DESCRIPTION = (
    "Extreme multi-label text classification: POST texts to /predict, get their labels. "
    "GET /health names the model served; POST /reload serves the model its reference names now."
)
RELOAD_DOC = (
    "Look the model reference up again (a models:/NAME@ALIAS URI: the version the alias names "
    "now; a folder: its files) and, when it names another model, load that one beside the "
    "served one and swap it in: requests in flight finish on the old model. Needs the token "
    "when the server has one."
)
RELOAD_FAILED = "the look-up, download, checksums or load failed: the old model keeps serving"
log = logging.getLogger(__name__)


def create_app(
    model: XmcModel | LiveModel,
    topk: int | None = None,
    beam_size: int | None = None,
    limits: Limits | None = None,
    token: str | None = None,
    reload_interval_s: float = 0,
) -> FastAPI | BearerAuth:
    """The app serving ``model`` (a :class:`LiveModel` can be reloaded; an ``XmcModel`` is
    served as given, ``POST /reload`` answers 409); ``topk`` / ``beam_size``: defaults of
    requests (None: the served model's own); ``limits`` None: those of the default
    ``ServeConfig``; ``token``: required as ``Authorization: Bearer`` on every path but
    ``OPEN_PATHS``; ``reload_interval_s`` > 0: a background check reloads a model named by an
    MLflow URI that often (:func:`~xmc_core.serving.live.watch`)."""
    limits = Limits.from_config(ServeConfig()) if limits is None else limits
    limits.check_defaults(topk, beam_size)
    live = model if isinstance(model, LiveModel) else LiveModel.fixed(model)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tasks:
            if reload_interval_s > 0 and live.watchable:
                tasks.start_soon(watch, live, reload_interval_s)
            yield
            tasks.cancel_scope.cancel()

    app = FastAPI(
        title="xmc", description=DESCRIPTION, lifespan=lifespan, docs_url=None, redoc_url=None
    )

    @app.exception_handler(RequestError)
    async def refused(_request: Request, err: RequestError) -> JSONResponse:
        message = err.message.encode("utf-8", "backslashreplace").decode("utf-8")
        return JSONResponse({"detail": message}, status_code=err.status)

    add_model_routes(app, live, Defaults(topk, beam_size), limits, token is not None)
    add_docs_routes(app, token is not None)
    return app if token is None else BearerAuth(app, token)


@dataclass(frozen=True)
class Defaults:
    """``topk`` / ``beam_size`` of requests that give none (None: the served model's own)."""

    topk: int | None
    beam_size: int | None

    def of(self, served: Served) -> tuple[int, int]:
        """(topk, beam size) with which ``served`` answers a request that gives neither."""
        own = served.model.ranker.predict_cfg
        return (
            own.topk if self.topk is None else self.topk,
            own.beam_size if self.beam_size is None else self.beam_size,
        )


def request_cut(model: XmcModel, threshold: float | None) -> tuple[Any, bool]:
    """The cut of a request (its ``threshold``, else the model's own); a threshold for an
    uncalibrated model is a 422."""
    cut = model.cut(threshold)
    if cut[0] is not None and model.calibrator is None:
        raise RequestError(422, "threshold: the served model is uncalibrated (no probability)")
    return cut


def add_model_routes(
    app: FastAPI, live: LiveModel, defaults: Defaults, limits: Limits, token: bool
) -> None:
    """``GET /health``, ``POST /predict`` and ``POST /reload`` of ``live``."""
    lock = threading.Lock()

    def run_prediction(req: PredictRequest) -> list[dict[str, list]]:
        served = live.current  # one model for the whole request, even if a reload swaps it
        topk, beam_size = defaults.of(served)
        cut = request_cut(served.model, req.threshold)
        with lock:
            scores = served.model.predict(req.texts, req.topk or topk, req.beam_size or beam_size)
        cols = ranked_lists(served.model, scores, *cut)
        return [dict(zip(cols, row, strict=True)) for row in zip(*cols.values(), strict=True)]

    @app.get(
        "/health",
        response_model=HealthResponse,
        summary="the served model",
        description="Open without the token: for load balancers and people.",
        response_description="the server is up",
    )
    async def health() -> dict[str, Any]:
        served = live.current
        topk, beam_size = defaults.of(served)
        return {
            "status": "ok",
            "model": served.info.as_dict(),
            "kind": served.info.family,
            "n_labels": served.info.n_labels,
            "topk": topk,
            "beam_size": beam_size,
        }

    @app.post(
        "/predict",
        response_model=PredictResponse,
        responses=error_responses(400, 401, 413, 422, 500),
        openapi_extra=predict_openapi(token),
        summary="labels of texts, best first",
        response_description="one prediction per text",
        description="Texts are predicted one request at a time. Needs the token when the "
        "server has one.",
    )
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

    @app.post(
        "/reload",
        response_model=ReloadResponse,
        responses={
            401: error_responses(401)[401],
            409: {"model": ErrorResponse, "description": "no reference to reload from"},
            502: {"model": ErrorResponse, "description": RELOAD_FAILED},
        },
        openapi_extra=secured(token),
        summary="serve the model the reference names now",
        response_description="the served model before and after",
        description=RELOAD_DOC,
    )
    async def reload() -> dict[str, Any]:
        try:
            outcome = await anyio.to_thread.run_sync(live.reload)
        except ReloadError as err:
            raise RequestError(err.status, str(err)) from None
        return {
            "status": "reloaded" if outcome.reloaded else "unchanged",
            "old": outcome.old.as_dict(),
            "new": outcome.new.as_dict(),
        }


def add_docs_routes(app: FastAPI, token: bool) -> None:
    """``GET /openapi.json`` (FastAPI's, plus the bearer scheme) and ``GET /docs`` (a page
    generated from it, self-contained); both open without the token."""
    plain_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        return add_security_scheme(plain_openapi()) if token else plain_openapi()

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        return HTMLResponse(docs_page(app.openapi(), str(request.base_url), token))


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
    An MLflow URI is looked up again every ``cfg.serve.reload_interval_s`` (0: never) and on
    ``POST /reload`` (:mod:`xmc_core.serving.live`).
    """
    limits.check_defaults(topk, beam_size)
    if not 1 <= port <= 65535:
        raise XmcError(f"port {port} is out of range\n  fix: pass 1 to 65535")
    token = read_token(token_file)
    check_exposure(host, token, insecure_public)
    live = LiveModel.open(model, cfg)
    interval = cfg.serve.reload_interval_s
    app = create_app(live, topk, beam_size, limits, token, interval)
    info = live.current.info
    version = f"version {info.version} of {info.name}, " if info.version is not None else ""
    notes = [
        f"checks for a new version every {interval:g} s" if interval and live.watchable else "",
        "token required except on /health and /docs" if token else "",
    ]
    log.info(
        "serving %s (%s%s, %d labels) at http://%s:%d (API: /docs%s)",
        model, version, info.family, info.n_labels, host, port,
        "".join(f"; {note}" for note in notes if note),
    )  # fmt: skip
    build_server(app, host, port, limits).run()
