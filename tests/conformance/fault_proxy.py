"""A fault-injecting proxy in front of the reference server (ASGI, run with uvicorn).

The harness tags every request with `x-plumbline-property: <ID>`; the proxy looks up that
property's fault (faults.py) and breaks the exchange in exactly the way the property must
catch: a request rewrite or a canned answer, a JSON rewrite, or a stream rewrite. Requests
of properties without a fault pass through unchanged.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from conformance.wire.launcher import free_port
from conformance.wire.sse import parse_sse

PROPERTY_HEADER = "x-plumbline-property"
# The TLS context of every client the proxies open to their upstream (one per request): without
# it httpx builds one per client, loading the CA bundle (~10-30 ms of CPU; a catalogue run
# sends about a thousand requests through the proxy). The upstream is plain http anyway.
UPSTREAM_TLS = ssl.create_default_context()


def _parse(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


@dataclass
class Request:
    method: str
    path: str  # with the query string
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return _parse(self.body)

    def with_json(self, data: Any) -> Request:
        return Request(self.method, self.path, self.headers, json.dumps(data).encode())

    @property
    def streaming(self) -> bool:
        return isinstance(self.json, dict) and self.json.get("stream") is True


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return _parse(self.body)

    def with_json(self, data: Any, status: int | None = None) -> Response:
        headers = {k: v for k, v in self.headers.items() if k != "content-length"}
        return Response(self.status if status is None else status, headers, json.dumps(data).encode())


@dataclass
class Frame:
    """One SSE event to send: `name=None` omits the `event:` line."""

    name: str | None
    data: str

    @classmethod
    def of(cls, payload: dict[str, Any], name: str | None = "") -> Frame:
        return cls(payload.get("type") if name == "" else name, json.dumps(payload))

    @property
    def payload(self) -> Any:
        return _parse(self.data.encode())

    def encode(self) -> bytes:
        head = f"event: {self.name}\n" if self.name is not None else ""
        return f"{head}data: {self.data}\n\n".encode()


@dataclass
class Fault:
    """How to break one property's exchanges. Each hook may be None (no change)."""

    why: str
    # Rewrite the request, or answer it directly with a Response.
    request: Callable[[Request], Request | Response] | None = None
    # Rewrite a complete (non-stream) response.
    response: Callable[[Request, Response], Response] | None = None
    # Rewrite the frames of a 200 event stream.
    frames: Callable[[Request, list[Frame]], list[Frame]] | None = None
    # Rewrite the stream's bytes after framing (for framing faults).
    stream_bytes: Callable[[bytes], bytes] | None = None
    # Keep the stream silent this long before its first byte, sending only SSE comments.
    silence: float = 0.0
    headers: Callable[[dict[str, str]], dict[str, str]] | None = None


async def read_body(receive: Any) -> bytes:
    """An ASGI request's whole body."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "host", "content-encoding"}


class FaultProxy:
    """ASGI app: forward to `upstream`, applying the fault of the tagged property, or
    `everywhere` to every exchange (a server with one bug, whatever the property)."""

    def __init__(
        self, upstream: str, faults: dict[str, Fault] | None = None, *, everywhere: Fault | None = None
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults = faults or {}
        self.everywhere = everywhere
        self.applied: dict[str, int] = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        # The raw (still percent-encoded) path: generated ids may hold characters httpx will not
        # put in a URL unencoded.
        raw = scope.get("raw_path") or scope["path"].encode()
        path = raw.decode("latin-1") + (f"?{scope['query_string'].decode()}" if scope["query_string"] else "")
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        request = Request(scope["method"], path, headers, body)
        tag = headers.get(PROPERTY_HEADER, "")
        fault = self.everywhere or self.faults.get(tag)
        if fault is not None:
            self.applied[tag] = self.applied.get(tag, 0) + 1
        response = await self._exchange(request, fault, send)
        if response is not None:
            await self._send(send, response, fault)

    async def _exchange(self, request: Request, fault: Fault | None, send: Any) -> Response | None:
        if fault is not None and fault.request is not None:
            changed = fault.request(request)
            if isinstance(changed, Response):
                return changed
            request = changed
        headers = {k: v for k, v in request.headers.items() if k not in HOP_HEADERS}
        async with httpx.AsyncClient(timeout=120, verify=UPSTREAM_TLS) as client:
            upstream = await client.request(
                request.method, self.upstream + request.path, headers=headers, content=request.body
            )
        response = Response(
            upstream.status_code,
            {k: v for k, v in upstream.headers.items() if k not in HOP_HEADERS},
            upstream.content,
        )
        if fault is None:
            return response
        streamed = response.headers.get("content-type", "").startswith("text/event-stream")
        if streamed and response.status == 200 and (fault.frames or fault.stream_bytes or fault.silence):
            await self._send_stream(send, request, response, fault)
            return None
        if fault.response is not None:
            response = fault.response(request, response)
        return response

    async def _send_stream(self, send: Any, request: Request, response: Response, fault: Fault) -> None:
        frames = [Frame(event.event, event.data) for event in parse_sse(response.body).events]
        if fault.frames is not None:
            frames = fault.frames(request, frames)
        data = b"".join(frame.encode() for frame in frames)
        if fault.stream_bytes is not None:
            data = fault.stream_bytes(data)
        headers = dict(response.headers)
        if fault.headers is not None:
            headers = fault.headers(headers)
        await send({"type": "http.response.start", "status": 200, "headers": _encode(headers)})
        deadline = time.monotonic() + fault.silence
        while time.monotonic() < deadline:  # comments are not events: clients ignore them
            await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
            await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        await send({"type": "http.response.body", "body": data, "more_body": False})

    @staticmethod
    async def _send(send: Any, response: Response, fault: Fault | None) -> None:
        headers = dict(response.headers)
        if fault is not None and fault.headers is not None:
            headers = fault.headers(headers)
        headers["content-length"] = str(len(response.body))
        await send({"type": "http.response.start", "status": response.status, "headers": _encode(headers)})
        await send({"type": "http.response.body", "body": response.body})


def _encode(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in headers.items()]


@contextmanager
def running_proxy(app: FaultProxy) -> Iterator[str]:
    """Serve `app` on a free loopback port in a background thread; yields its URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
