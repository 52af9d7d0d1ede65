"""What the server-tool loop adds to a generation's pieces (assembly.py turns them into blocks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reference_server.protocol import ServerToolResultBlock

__all__ = ["ProgrammaticCall", "ServerCallStart", "ServerResult"]


@dataclass(frozen=True, slots=True)
class ServerCallStart:
    """A call of a server tool begins: a `server_tool_use` block, or an `mcp_tool_use` one when it
    names an MCP server (its input follows as ArgsPieces)."""

    id: str
    name: str
    server_name: str | None = None


@dataclass(frozen=True, slots=True)
class ServerResult:
    """The server ran the call: its result block, whole."""

    block: ServerToolResultBlock


@dataclass(frozen=True, slots=True)
class ProgrammaticCall:
    """The code of a code execution call called a client tool: a `tool_use` block, whole, whose
    `caller` names that call (`caller_type`, `caller_id`); the turn ends `tool_use`."""

    id: str
    name: str
    input: dict[str, Any]
    caller_type: str
    caller_id: str
