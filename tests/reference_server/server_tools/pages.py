"""A loopback web server for web fetch tests: pages by path, and a log of what was asked."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGES: dict[str, tuple[int, str, bytes, dict[str, str]]] = {
    "/page": (
        200,
        "text/html; charset=utf-8",
        b"<html><head><title>Plumb page</title><style>p{}</style></head>"
        b"<body><p>The plumb line is vertical.</p><script>var x=1;</script></body></html>",
        {},
    ),
    "/plain": (200, "text/plain", b"Just text.", {}),
    "/image": (200, "image/png", b"\x89PNG\r\n", {}),
    "/missing": (404, "text/plain", b"no", {}),
    "/hop": (302, "text/plain", b"", {"Location": "/page"}),
}


@dataclass
class Site:
    url: str
    hits: list[str] = field(default_factory=list)


@contextmanager
def serving_pages() -> Iterator[Site]:
    site = Site("")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site.hits.append(self.path)
            status, kind, body, headers = PAGES.get(self.path, (404, "text/plain", b"not found", {}))
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
