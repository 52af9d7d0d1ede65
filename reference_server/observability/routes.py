"""`GET /health` (no key needed: for load balancers and orchestrators) and `GET /metrics`
(Prometheus text; behind the API key when the server has one: a scraper sends it as a Bearer
token). Neither needs `anthropic-version`."""

from __future__ import annotations

import time
from typing import Any

from litestar import Request, Response, get

from reference_server.observability.metrics import CONTENT_TYPE, ServingMetrics

__all__ = ["observability_route_handlers"]


@get("/health", opt={"dialect": "plain", "public": True})
async def health(request: Request[Any, Any, Any]) -> Response[Any]:
    state = request.app.state
    body = {
        "status": "ok",
        "models": [card.id for card in state.service.catalog.cards()],
        "uptime_s": round(time.monotonic() - state.started, 1),
    }
    return Response(body, media_type="application/json")


@get("/metrics", opt={"dialect": "plain"})
async def metrics(request: Request[Any, Any, Any]) -> Response[bytes]:
    served: ServingMetrics = request.app.state.metrics
    return Response(served.render(), media_type=CONTENT_TYPE)


observability_route_handlers = [health, metrics]
