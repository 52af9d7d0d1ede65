"""The ASGI side of observability: when a request started, and, as its response goes out, the
request counter and its access log line."""

from __future__ import annotations

import logging
import time

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from reference_server.ids import request_id_of
from reference_server.observability.logs import ACCESS_LOGGER
from reference_server.observability.metrics import ServingMetrics
from reference_server.workspaces import DEFAULT_WORKSPACE, key_of

__all__ = ["observe_response", "timed"]

_access = logging.getLogger(ACCESS_LOGGER)
_STARTED = "plumbline_started"
_STATUS = "plumbline_status"


def timed(app: ASGIApp) -> ASGIApp:
    """Middleware: note when a routed request started (the router answers 404s and 405s before
    any middleware runs: those have no duration)."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        scope.setdefault("state", {})[_STARTED] = time.perf_counter()
        await app(scope, receive, send)

    return middleware


def _workspace(scope: Scope) -> str:
    """The workspace label: the request's key's; `unauthenticated` when keys are required and
    none matched (a 401, or a route answered before the guard)."""
    entry = key_of(scope)
    if entry is not None:
        return entry.workspace
    keyfile = getattr(scope["app"].state, "keyfile", None)
    return "unauthenticated" if keyfile is not None and keyfile.ring.required else DEFAULT_WORKSPACE


async def observe_response(message: Message, scope: Scope) -> None:
    """before_send: count the response when it starts, log it when its last byte goes."""
    if scope["type"] != ScopeType.HTTP:
        return
    state = scope.setdefault("state", {})
    method = str(scope.get("method", ""))
    if message["type"] == "http.response.start":
        state[_STATUS] = message["status"]
        metrics: ServingMetrics | None = getattr(scope["app"].state, "metrics", None)
        if metrics is not None:
            metrics.count_response(scope.get("path_template"), method, message["status"], _workspace(scope))
    elif (
        message["type"] == "http.response.body"
        and not message.get("more_body", False)
        and _access.isEnabledFor(logging.INFO)
        and not _access.disabled
    ):
        started = state.get(_STARTED)
        duration = round((time.perf_counter() - started) * 1000, 1) if started is not None else None
        _access.info(
            "%s %s %s",
            method,
            scope["path"],
            state.get(_STATUS),
            extra={
                "request_id": request_id_of(scope),
                "method": method,
                "path": scope["path"],
                "route": scope.get("path_template"),
                "status": state.get(_STATUS),
                "duration_ms": duration,
            },
        )
