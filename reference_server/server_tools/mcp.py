"""The MCP connector (`mcp_servers`, beta `mcp-client-2025-04-04` or `mcp-client-2025-11-20`):
the server connects to the remote MCP servers a request lists, with the official `mcp` SDK over
streamable HTTP, offers their tools to the model, and calls them when the model does.

Which tools are offered: with `mcp-client-2025-04-04`, each server's `tool_configuration`
(`enabled`, `allowed_tools`); with `mcp-client-2025-11-20`, the `mcp_toolset` tool that names the
server (`default_config` and per-tool `configs`: `enabled`, `defer_loading`); a server no toolset
names offers nothing. `authorization_token` goes to the server as a bearer token. A server URL
passes the same address check as web fetch (public addresses only, unless the operator passes
`--allow-private-mcp`); a server that cannot be reached or listed is a 400 naming it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from reference_server.errors import InvalidRequestError
from reference_server.protocol import McpServerParam, McpToolResultBlock

from .definitions import McpToolConfig, ToolConfigParam, ToolsetParam, check_toolset
from .fetch import FetchFailed, WebFetcher

__all__ = ["MCP_BETAS", "McpConnector", "OfferedTool"]

MCP_BETAS = ("mcp-client-2025-04-04", "mcp-client-2025-11-20")
TOOLSET_BETA = "mcp-client-2025-11-20"
TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class OfferedTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    config: McpToolConfig


class McpConnector:
    """Lists and calls the tools of the MCP servers requests name."""

    def __init__(self, fetcher: WebFetcher) -> None:
        self._fetcher = fetcher  # its address policy guards the server URLs too

    async def offered(
        self,
        servers: Sequence[McpServerParam] | None,
        tools: Sequence[dict[str, Any]] | None,
        betas: Collection[str],
    ) -> list[OfferedTool]:
        """The MCP tools a request offers the model (none without `mcp_servers`)."""
        toolsets = {
            index: check_toolset(raw, f"tools.{index}")
            for index, raw in enumerate(tools or ())
            if raw.get("type") == "mcp_toolset"
        }
        if not servers:
            if toolsets:
                index = next(iter(toolsets))
                raise InvalidRequestError(
                    f"tools.{index}.mcp_server_name: no mcp_servers entry has this name"
                )
            return []
        beta = next((b for b in MCP_BETAS if b in betas), None)
        if beta is None:
            raise InvalidRequestError(
                f"mcp_servers: the MCP connector needs the beta header ({' or '.join(MCP_BETAS)})"
            )
        names = [server.name for server in servers]
        if len(set(names)) != len(names):
            raise InvalidRequestError("mcp_servers: server names must be unique")
        by_server = {toolset.mcp_server_name: (index, toolset) for index, toolset in toolsets.items()}
        for name, (index, _) in by_server.items():
            if name not in names:
                raise InvalidRequestError(
                    f"tools.{index}.mcp_server_name: no mcp_servers entry is named {name!r}"
                )
        offered: list[OfferedTool] = []
        for index, server in enumerate(servers):
            listed = await self._list(server, f"mcp_servers.{index}")
            for name, description, schema in listed:
                chosen = _choose(server, name, by_server.get(server.name), beta == TOOLSET_BETA)
                if chosen is not None:
                    config = McpToolConfig(server.name, server.url, server.authorization_token, chosen)
                    offered.append(OfferedTool(name, description, schema, config))
        return offered

    async def _list(self, server: McpServerParam, path: str) -> list[tuple[str, str, dict[str, Any]]]:
        await self._guard(server, path)
        try:
            async with self._client(server) as client:
                listed = await client.list_tools()
        except Exception as exc:  # the SDK raises many kinds: any failure is the server's to name
            raise InvalidRequestError(
                f"{path}: could not list the tools of MCP server {server.name!r}: {type(exc).__name__}"
            ) from None
        return [
            (tool.name, tool.description or "", dict(tool.input_schema) or {"type": "object"})
            for tool in listed.tools
        ]

    async def call(
        self, config: McpToolConfig, tool_use_id: str, name: str, arguments: dict[str, Any]
    ) -> McpToolResultBlock:
        """Call the tool; any failure is an error result, never an HTTP error (the turn goes on)."""
        server = McpServerParam(
            type="url", url=config.url, name=config.server_name, authorization_token=config.token
        )
        try:
            await self._guard(server, "mcp_servers")
            async with self._client(server) as client:
                result = await client.call_tool(name, arguments)
        except Exception as exc:  # refused by the address check, unreachable, or failed
            text = f"the MCP server could not be called: {type(exc).__name__}"
            return McpToolResultBlock(
                tool_use_id=tool_use_id, is_error=True, content=[{"type": "text", "text": text}]
            )
        content = [
            {"type": "text", "text": item.text} for item in result.content if isinstance(item, TextContent)
        ]
        return McpToolResultBlock(tool_use_id=tool_use_id, is_error=bool(result.is_error), content=content)

    async def _guard(self, server: McpServerParam, path: str) -> None:
        parts = urlsplit(server.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidRequestError(f"{path}.url: an MCP server URL must be an absolute http or https URL")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            await self._fetcher.checked_addresses(parts.hostname.lower(), port)
        except FetchFailed as exc:
            raise InvalidRequestError(f"{path}.url: {exc}") from None

    @asynccontextmanager
    async def _client(self, server: McpServerParam) -> AsyncIterator[Client]:
        headers = (
            {"authorization": f"Bearer {server.authorization_token}"} if server.authorization_token else {}
        )
        async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_SECONDS) as http:
            transport = streamable_http_client(server.url, http_client=http)
            async with Client(transport, read_timeout_seconds=TIMEOUT_SECONDS) as client:
                yield client


def _choose(
    server: McpServerParam, name: str, toolset: tuple[int, ToolsetParam] | None, toolsets: bool
) -> bool | None:
    """Whether `name` is offered (None: not), and then whether it is deferred."""
    if not toolsets:
        configuration = server.tool_configuration
        if configuration is not None and configuration.enabled is False:
            return None
        if (
            configuration is not None
            and configuration.allowed_tools is not None
            and name not in configuration.allowed_tools
        ):
            return None
        return False
    if toolset is None:
        return None
    default = toolset[1].default_config or ToolConfigParam()
    own = (toolset[1].configs or {}).get(name, ToolConfigParam())
    enabled = own.enabled if own.enabled is not None else default.enabled is not False
    deferred = own.defer_loading if own.defer_loading is not None else bool(default.defer_loading)
    return deferred if enabled else None
