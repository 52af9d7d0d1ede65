"""The request's key and workspace, as the guard found them (kept in the ASGI scope's state)."""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.types import Scope

from reference_server.workspaces.keys import DEFAULT_WORKSPACE, KeyEntry

__all__ = ["key_of", "remember", "workspace_of"]

_KEY = "plumbline.key"


def remember(scope: Scope, entry: KeyEntry | None) -> None:
    scope.setdefault("state", {})[_KEY] = entry


def key_of(scope: Scope) -> KeyEntry | None:
    """The key the request was admitted with (None: the server asks for none)."""
    entry = scope.get("state", {}).get(_KEY)
    return entry if isinstance(entry, KeyEntry) else None


def workspace_of(connection: ASGIConnection[Any, Any, Any, Any] | Scope) -> str:
    """The request's workspace: its key's, else the default one."""
    scope = connection.scope if isinstance(connection, ASGIConnection) else connection
    entry = key_of(scope)
    return entry.workspace if entry is not None else DEFAULT_WORKSPACE
