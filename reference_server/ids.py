"""Identifiers in the shapes the real API uses: `msg_…`, `toolu_…`, `req_…`."""

from __future__ import annotations

import secrets
import string

from litestar.types import Scope

_ALPHABET = string.ascii_letters + string.digits


def _token(length: int = 24) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def new_message_id() -> str:
    return f"msg_{_token()}"


def new_tool_use_id() -> str:
    return f"toolu_{_token()}"


def new_request_id() -> str:
    return f"req_{_token()}"


def request_id_of(scope: Scope) -> str:
    """The request's id, created on first use and kept in the ASGI scope state, so that the
    `request-id` header and an error body's `request_id` always agree."""
    state = scope.setdefault("state", {})
    rid = state.get("request_id")
    if not isinstance(rid, str):
        rid = new_request_id()
        state["request_id"] = rid
    return rid


def new_server_tool_use_id() -> str:
    return f"srvtoolu_{_token()}"


def new_mcp_tool_use_id() -> str:
    return f"mcptoolu_{_token()}"
