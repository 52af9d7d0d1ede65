"""Servers the harness runs on this machine's loopback for properties that need the target to
reach out: a web page (SRVTOOL-007: it must NOT be fetched) and an MCP server (SRVTOOL-011: the
target's MCP connector calls its tool). Each records what reached it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = ["LOOPBACK_SECRET", "Loopback", "loopback_mcp", "loopback_page"]

LOOPBACK_SECRET = "PLUMBLINE-LOOPBACK-SECRET"  # the page's text: never in an answer


@dataclass
class Loopback:
    url: str
    hits: list[Any] = field(default_factory=list)  # what reached the server


@contextmanager
def loopback_page() -> Iterator[Loopback]:
    """A plain-text page; `hits` are the paths asked for."""
    found = Loopback("")

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found.hits.append(self.path)
            body = LOOPBACK_SECRET.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    found.url = f"http://127.0.0.1:{server.server_address[1]}/internal/secret"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def loopback_mcp() -> Iterator[Loopback]:
    """An MCP server (the official SDK's, streamable HTTP) with one tool, `tide`; `hits` are
    its calls' arguments. Raises ImportError where the `mcp` package or uvicorn is missing."""
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    found = Loopback(f"http://127.0.0.1:{port}/mcp")
    server = MCPServer("plumbline-tides")

    @server.tool()
    def tide(harbour: Literal["brest", "dover"]) -> str:
        """The height of the tide at a harbour."""
        found.hits.append({"harbour": harbour})
        return f"High tide at {harbour}: 4.2 m"

    config = uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")
    http = uvicorn.Server(config)
    thread = threading.Thread(target=http.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not http.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield found
    finally:
        http.should_exit = True
        thread.join(timeout=10)
