"""Faults of the API versions (VER-*), and the API's own behaviour as a proxy.

`version_fault_catalogue`: a server that ignores `anthropic-version` (every request served as
2023-06-01), which each VER property must FAIL. `NEWEST_API`: not a fault but what the API does
with the newest models, at any version: only the default sampling values (temperature 1.0,
top_p >= 0.99, no top_k) and no prefill, each refused with a 400 that names it. The whole
catalogue, run through it, must find no FAIL: nothing may blame a target for that.
"""

from __future__ import annotations

from typing import Any

from .fault_proxy import Fault, Request, Response
from .faults import error

__all__ = ["NEWEST_API", "served_as", "version_fault_catalogue"]


def served_as(version: str) -> Fault:
    """Every request reaches the server as `version`: the version the client sent is ignored."""

    def apply(request: Request) -> Request:
        headers = {k: v for k, v in request.headers.items() if k.lower() != "anthropic-version"}
        return Request(request.method, request.path, {**headers, "anthropic-version": version}, request.body)

    return Fault(f"anthropic-version ignored: every request served as {version}", request=apply)


def version_fault_catalogue() -> dict[str, Fault]:
    ignored = served_as("2023-06-01")
    return {"VER-001": ignored, "VER-002": ignored, "VER-003": ignored, "VER-004": ignored}


def _newest_model_refusal(body: dict[str, Any]) -> str | None:
    """What the newest models refuse in `body` (the API's words where the docs give them)."""
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1.0:
        return (
            "temperature: Models released after Claude Opus 4.6 do not support setting "
            "temperature. A value of 1.0 will be accepted for backwards compatibility."
        )
    top_p = body.get("top_p")
    if top_p is not None and (not isinstance(top_p, (int, float)) or top_p < 0.99):
        return "top_p: this model accepts only values of at least 0.99"
    if body.get("top_k") is not None:
        return "top_k: this model does not support top_k"
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if isinstance(last, dict) and last.get("role") == "assistant" and _text_only(last.get("content")):
        return (
            "This model does not support assistant message prefill. The conversation must end "
            "with a user message."
        )
    return None


def _text_only(content: Any) -> bool:
    """A prefill is text the model should go on from; a turn a server tool paused (its
    server_tool_use and result blocks) is resumed as it was sent back, as the docs say."""
    if isinstance(content, str):
        return True
    blocks = content if isinstance(content, list) else []
    return all(isinstance(b, dict) and b.get("type") == "text" for b in blocks)


def _newest(request: Request) -> Request | Response:
    body = request.json
    on_messages = request.path.split("?")[0].startswith("/v1/messages")
    refusal = _newest_model_refusal(body) if on_messages and isinstance(body, dict) else None
    return error(400, "invalid_request_error", refusal) if refusal else request


NEWEST_API = Fault(
    "the newest models: default sampling only, no prefill (a 400 naming each)", request=_newest
)
