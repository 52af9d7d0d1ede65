"""An MCP server on loopback for the connector's tests (the official SDK's MCPServer over
streamable HTTP, run by uvicorn in a thread), recording each request's Authorization and Host
headers. `names` are host names it answers to besides 127.0.0.1 and localhost (its DNS
rebinding protection refuses any other Host header)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings


@dataclass
class RunningMcp:
    url: str
    port: int
    authorizations: list[str | None] = field(default_factory=list)
    hosts: list[str | None] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def mcp_server(names: tuple[str, ...] = ()) -> Iterator[RunningMcp]:
    server = MCPServer("tides")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = RunningMcp(f"http://127.0.0.1:{port}/mcp", port)

    @server.tool()
    def tide(harbour: Literal["brest", "dover"]) -> str:
        """The height of the tide at a harbour."""
        running.calls.append({"harbour": harbour})
        return f"High tide at {harbour}: 4.2 m"

    @server.tool()
    def wind(harbour: Literal["brest", "dover"]) -> str:
        """The wind at a harbour."""
        return f"Wind at {harbour}: calm"

    allowed = ["127.0.0.1:*", "localhost:*", *(f"{name}:*" for name in names)]
    app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=allowed
        )
    )

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            running.authorizations.append(_text(headers.get(b"authorization")))
            running.hosts.append(_text(headers.get(b"host")))
        await app(scope, receive, send)

    config = uvicorn.Config(recording, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    thread = threading.Thread(target=http.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not http.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield running
    finally:
        http.should_exit = True
        thread.join(timeout=10)


def _text(header: bytes | None) -> str | None:
    return header.decode() if header is not None else None
