"""Targets that serve concurrent requests badly, in front of a real one (ASGI, for running_proxy).

- `Interrupting`: as llama-cpp-python's server with `interrupt_requests` (its default): a stream
  that is running when another request arrives ends at once with `data: [DONE]`, no
  `message_stop`; a request that arrives alone is answered whole;
- `Serialising`: one request at a time, the next waiting until the last is answered;
- `Batching`: answers a request that arrives while another is in flight differently (a last
  word changed), plain or streamed: as a server that batches concurrent requests and computes
  them otherwise (llama-server's slots), while the same request sent alone is reproducible.

Each forwards to the upstream and replays its answer, a stream frame by frame with a short pause
between frames, so that requests overlap as they do on a slow CPU server.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from conformance.wire.sse import parse_sse

from .fault_proxy import HOP_HEADERS, UPSTREAM_TLS, Fault, Frame, Request, read_body

FRAME_PAUSE = 0.02


class _Replaying:
    """Forward each request, then replay its answer (hooks for the subclasses)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.in_flight = 0
        self.arrivals = 0  # requests ever received: a stream sees a newer one arrive

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        # Only generation competes for the model: a GET of the model list waits for nothing.
        generating = scope["method"] == "POST" and scope["path"].startswith("/v1/messages")
        self.arrivals += generating
        self.in_flight += generating
        try:
            await self.serve(scope, body, send, beside=generating and self.in_flight > 1)
        finally:
            self.in_flight -= generating

    async def serve(self, scope: dict[str, Any], body: bytes, send: Any, *, beside: bool) -> None:
        await self.replay(await self.forward(scope, body), send, beside=beside)

    async def forward(self, scope: dict[str, Any], body: bytes) -> httpx.Response:
        path = scope["path"] + (f"?{scope['query_string'].decode()}" if scope["query_string"] else "")
        headers = {
            k.decode(): v.decode() for k, v in scope["headers"] if k.decode().lower() not in HOP_HEADERS
        }
        async with httpx.AsyncClient(timeout=120, verify=UPSTREAM_TLS) as client:
            return await client.request(scope["method"], self.upstream + path, headers=headers, content=body)

    async def replay(self, answer: httpx.Response, send: Any, *, beside: bool) -> None:
        headers = [
            (k.encode(), v.encode()) for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS
        ]
        streamed = answer.headers.get("content-type", "").startswith("text/event-stream")
        await send({"type": "http.response.start", "status": answer.status_code, "headers": headers})
        if not streamed or answer.status_code != 200:
            await send({"type": "http.response.body", "body": self.changed(answer.content, beside)})
            return
        seen = self.arrivals
        frames = [Frame(event.event, event.data) for event in parse_sse(answer.content).events]
        sent: list[Frame] = []
        for frame in self.changed_frames(frames, beside):
            if self.interrupted(seen):
                await send({"type": "http.response.body", "body": self.ending(sent), "more_body": True})
                break
            sent.append(frame)
            await send({"type": "http.response.body", "body": frame.encode(), "more_body": True})
            await asyncio.sleep(FRAME_PAUSE)
        await send({"type": "http.response.body", "body": b""})

    def interrupted(self, seen: int) -> bool:
        return False

    def ending(self, frames: list[Frame]) -> bytes:
        """What an interrupted stream ends with."""
        return b"data: [DONE]\n\n"

    def changed(self, body: bytes, beside: bool) -> bytes:
        return body

    def changed_frames(self, frames: list[Frame], beside: bool) -> list[Frame]:
        return frames


class Interrupting(_Replaying):
    """A running stream ends with [DONE] once a newer request has arrived."""

    def interrupted(self, seen: int) -> bool:
        return self.arrivals > seen


class InterruptedBehindAGateway(Interrupting):
    """The same, the cut stream then closed properly, as LiteLLM closes the stream of an OpenAI
    backend that sent `[DONE]`: open blocks stopped, message_delta end_turn, message_stop."""

    def ending(self, frames: list[Frame]) -> bytes:
        payloads = [f.payload for f in frames if isinstance(f.payload, dict)]
        started = {p.get("index") for p in payloads if p.get("type") == "content_block_start"}
        stopped = {p.get("index") for p in payloads if p.get("type") == "content_block_stop"}
        still_open = sorted(i for i in started - stopped if isinstance(i, int))
        closing = [Frame.of({"type": "content_block_stop", "index": index}) for index in still_open]
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 1},
        }
        closing += [Frame.of(delta), Frame.of({"type": "message_stop"})]
        return b"".join(frame.encode() for frame in closing)


class Serialising(_Replaying):
    """One request at a time."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.lock = asyncio.Lock()

    async def serve(self, scope: dict[str, Any], body: bytes, send: Any, *, beside: bool) -> None:
        async with self.lock:
            await super().serve(scope, body, send, beside=False)


CHANGED = " (batched)"


class Batching(_Replaying):
    """A request served beside another gets another last text: its answer differs from the
    same request's served alone."""

    def changed(self, body: bytes, beside: bool) -> bytes:
        try:
            data = json.loads(body)
        except ValueError:
            return body
        if beside and isinstance(data, dict) and data.get("type") == "message":
            texts = [b for b in data.get("content") or [] if isinstance(b, dict) and b.get("type") == "text"]
            if texts:
                texts[-1]["text"] += CHANGED
                return json.dumps(data).encode()
        return body

    def changed_frames(self, frames: list[Frame], beside: bool) -> list[Frame]:
        deltas = [
            n
            for n, frame in enumerate(frames)
            if isinstance(frame.payload, dict)
            and frame.payload.get("type") == "content_block_delta"
            and (frame.payload.get("delta") or {}).get("type") == "text_delta"
        ]
        if not beside or not deltas:
            return frames
        last = frames[deltas[-1]].payload
        last["delta"]["text"] += CHANGED
        return [*frames[: deltas[-1]], Frame.of(last), *frames[deltas[-1] + 1 :]]


def _cut(request: Request, frames: list[Frame]) -> list[Frame]:
    """The stream ends after its first content block's first delta, with [DONE]."""
    kept: list[Frame] = []
    for frame in frames:
        kept.append(frame)
        payload = frame.payload
        if isinstance(payload, dict) and payload.get("type") == "content_block_delta":
            break
    return [*kept, Frame(None, "[DONE]")]


def concurrency_fault_catalogue() -> dict[str, Fault]:
    why = "a running stream cut by the next request (llama-cpp-python's interrupt_requests)"
    return {"STREAM-024": Fault(why, frames=_cut)}


__all__ = [
    "Batching",
    "InterruptedBehindAGateway",
    "Interrupting",
    "Serialising",
    "concurrency_fault_catalogue",
]
