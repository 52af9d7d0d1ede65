"""The MCP connector (`mcp_servers`, beta `mcp-client-2025-04-04` or `mcp-client-2025-11-20`):
the server connects to the remote MCP servers a request lists, with the official `mcp` SDK over
streamable HTTP, offers their tools to the model, and calls them when the model does.

Which tools are offered: with `mcp-client-2025-04-04`, each server's `tool_configuration`
(`enabled`, `allowed_tools`); with `mcp-client-2025-11-20`, the `mcp_toolset` tool that names the
server (`default_config` and per-tool `configs`: `enabled`, `defer_loading`); a server no toolset
names offers nothing. `authorization_token` goes to the server as a bearer token.

A server URL passes the same address check as web fetch (public addresses only, unless the
operator passes `--allow-private-mcp`), and every request then goes to the address that was
checked (`PinnedTransport`: the Host header and TLS name stay the server's), so a DNS answer
that changes after the check (rebinding) reaches nothing. Redirects are not followed by the
client; the SDK follows only those within the server's origin, which the pinned transport
sends to the same checked address, and it refuses a request for any other host.

A server that cannot be reached or listed is a 400 naming it, a failed call an error result;
both say what happened (connection refused at host:port, the HTTP status, a timeout, the MCP
error), the SDK's exception groups unwrapped and the authorization token never repeated.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx2

# The `mcp` SDK is imported where a request lists an MCP server: importing it costs more than a
# second of the server's start-up (its types), which most servers never use.
if TYPE_CHECKING:
    from mcp import Client

from reference_server.errors import InvalidRequestError
from reference_server.protocol import McpServerParam, McpToolResultBlock

from .definitions import McpToolConfig, ToolConfigParam, ToolsetParam, check_toolset
from .fetch import FetchFailed, WebFetcher

__all__ = [
    "MCP_BETAS",
    "McpConnector",
    "OfferedTool",
    "PinnedTransport",
    "Target",
    "UncheckedHost",
    "failure",
]

MCP_BETAS = ("mcp-client-2025-04-04", "mcp-client-2025-11-20")
TOOLSET_BETA = "mcp-client-2025-11-20"
TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class OfferedTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    config: McpToolConfig


@dataclass(frozen=True, slots=True)
class Target:
    """An MCP server's host and port as its URL names them, and the address that was checked."""

    host: str
    port: int
    address: str

    @property
    def where(self) -> str:
        """host:port, and the address when the URL named a host rather than an address."""
        place = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        return place if self.address == self.host else f"{place} ({self.address})"


class UncheckedHost(httpx2.TransportError):
    """A request for a host other than the one whose address was checked."""


class PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends each request for the target's host to the checked address (Host header and TLS
    server name kept), refuses any other host, and remembers the last POST's HTTP status (the
    SDK's errors name none). `inner` is a seam for tests."""

    def __init__(self, target: Target, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self.target = target
        self.last_status: int | None = None
        self._inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if (request.url.host or "").lower() != self.target.host:
            raise UncheckedHost(
                f"a request for {request.url.host} was refused: only {self.target.host} was checked",
                request=request,
            )
        pinned = httpx2.Request(
            request.method,
            request.url.copy_with(host=self.target.address),
            headers=request.headers,  # holds the Host header built from the server's URL
            stream=request.stream,
            extensions={**request.extensions, "sni_hostname": self.target.host},
        )
        response = await self._inner.handle_async_request(pinned)
        if request.method == "POST":  # MCP messages go by POST; GET and DELETE may answer 405
            self.last_status = response.status_code
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class McpConnector:
    """Lists and calls the tools of the MCP servers requests name; `transport` is a seam for
    tests (what the pinned transport sends through)."""

    def __init__(self, fetcher: WebFetcher, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        self._fetcher = fetcher  # its address policy guards the server URLs too
        self._transport = transport

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
        transport = PinnedTransport(await self._guard(server, path), self._transport)
        try:
            async with self._client(server, transport) as client:
                listed = await client.list_tools()
        except Exception as exc:  # the SDK raises many kinds: any failure is the server's to name
            raise InvalidRequestError(
                f"{path}: could not list the tools of MCP server {server.name!r}: "
                f"{failure(exc, transport, server)}"
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
            transport = PinnedTransport(await self._guard(server, "mcp_servers"), self._transport)
        except InvalidRequestError as exc:  # refused by the address check
            return _error_result(tool_use_id, f"the MCP server could not be called: {exc.message}")
        try:
            async with self._client(server, transport) as client:
                result = await client.call_tool(name, arguments)
        except Exception as exc:  # unreachable, or failed
            text = f"the MCP server could not be called: {failure(exc, transport, server)}"
            return _error_result(tool_use_id, text)
        from mcp.types import TextContent

        content = [
            {"type": "text", "text": item.text} for item in result.content if isinstance(item, TextContent)
        ]
        return McpToolResultBlock(tool_use_id=tool_use_id, is_error=bool(result.is_error), content=content)

    async def _guard(self, server: McpServerParam, path: str) -> Target:
        """The server's host resolved and checked: the address its requests will go to."""
        parts = urlsplit(server.url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:  # a port out of range or not a number
            port = 0
        if parts.scheme not in ("http", "https") or not parts.hostname or not port:
            raise InvalidRequestError(f"{path}.url: an MCP server URL must be an absolute http or https URL")
        host = parts.hostname.lower()
        try:
            addresses = await self._fetcher.checked_addresses(host, port)
        except FetchFailed as exc:
            raise InvalidRequestError(f"{path}.url: {exc}") from None
        return Target(host, port, addresses[0])

    @asynccontextmanager
    async def _client(self, server: McpServerParam, transport: PinnedTransport) -> AsyncIterator[Client]:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = (
            {"authorization": f"Bearer {server.authorization_token}"} if server.authorization_token else {}
        )
        async with httpx2.AsyncClient(
            headers=headers, timeout=TIMEOUT_SECONDS, transport=transport, follow_redirects=False
        ) as http:
            streams = streamable_http_client(server.url, http_client=http)
            async with Client(streams, read_timeout_seconds=TIMEOUT_SECONDS) as client:
                yield client


def _error_result(tool_use_id: str, text: str) -> McpToolResultBlock:
    return McpToolResultBlock(
        tool_use_id=tool_use_id, is_error=True, content=[{"type": "text", "text": text}]
    )


def failure(exc: BaseException, transport: PinnedTransport, server: McpServerParam) -> str:
    """What went wrong, in words: each failure inside the SDK's exception groups, with the
    server's secrets (its token, the URL's password and query) blanked out."""
    where = transport.target.where
    said = dict.fromkeys(_phrase(leaf, where, transport.last_status) for leaf in _leaves(exc))
    return _redacted("; ".join(said), server)


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _phrase(exc: BaseException, where: str, status: int | None) -> str:
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, UncheckedHost):
        return str(exc)
    if isinstance(exc, httpx2.ConnectTimeout):
        return f"connecting to {where} timed out"
    if isinstance(exc, httpx2.TimeoutException | TimeoutError):
        return f"{where} did not answer within {TIMEOUT_SECONDS:g} s"
    if isinstance(exc, httpx2.ConnectError):
        return _not_connected(exc, where)
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"{where} answered HTTP {exc.response.status_code}"
    if isinstance(exc, MCPError):
        if status is not None and status >= 400:  # the SDK's error stands in for the HTTP status
            return f"{where} answered HTTP {status} ({exc.message})"
        return f"MCP error {exc.code} from {where}: {exc.message}"
    if isinstance(exc, httpx2.HTTPError):  # protocol errors, a dropped connection, ...
        return f"{type(exc).__name__} from {where}: {exc}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _not_connected(exc: BaseException, where: str) -> str:
    root = _root_os_error(exc)
    if isinstance(root, ConnectionRefusedError):
        return f"connection refused at {where}"
    if isinstance(root, socket.gaierror):
        return f"{where} does not resolve"
    reason = (root.strerror if root is not None else None) or str(root or exc)
    return f"could not connect to {where}: {reason}"


def _root_os_error(exc: BaseException) -> OSError | None:
    """The deepest OSError under `exc` (httpx2 wraps httpcore2's error, which wraps anyio's
    "All connection attempts failed", which wraps the socket's own)."""
    found: OSError | None = None
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError):
            found = current
        current = current.__cause__ or current.__context__
    return found


def _redacted(text: str, server: McpServerParam) -> str:
    parts = urlsplit(server.url)
    for secret in (server.authorization_token, parts.password, parts.query):
        if secret:
            text = text.replace(secret, "[redacted]")
    return text


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
