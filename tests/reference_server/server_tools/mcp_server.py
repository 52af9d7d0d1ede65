"""An MCP server on loopback for the connector's tests (the official SDK's MCPServer over
streamable HTTP, run by uvicorn in a thread), recording each request's Authorization header."""

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


@dataclass
class RunningMcp:
    url: str
    authorizations: list[str | None] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def mcp_server() -> Iterator[RunningMcp]:
    server = MCPServer("tides")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = RunningMcp(f"http://127.0.0.1:{port}/mcp")

    @server.tool()
    def tide(harbour: Literal["brest", "dover"]) -> str:
        """The height of the tide at a harbour."""
        running.calls.append({"harbour": harbour})
        return f"High tide at {harbour}: 4.2 m"

    @server.tool()
    def wind(harbour: Literal["brest", "dover"]) -> str:
        """The wind at a harbour."""
        return f"Wind at {harbour}: calm"

    app = server.streamable_http_app()

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            header = dict(scope["headers"]).get(b"authorization")
            running.authorizations.append(header.decode() if header else None)
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
