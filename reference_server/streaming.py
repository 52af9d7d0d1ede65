"""Typed stream events → SSE bytes.

Rules (messages-api.md §4): every event is named (`event: <type>` equal to the data's
`type`), LF framing, real `ping` events while the model is silent, a failure after the
first byte becomes an in-band `error` event that ends the stream, never `data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
from pydantic import BaseModel

from reference_server.errors import APIError, error_body, from_exception
from reference_server.protocol import PingEvent

__all__ = ["encode_event", "sse_frames"]

log = logging.getLogger(__name__)


def encode_event(event: BaseModel) -> bytes:
    """One SSE message: `event:` line, one compact JSON `data:` line, blank line."""
    kind = getattr(event, "type", None)
    if not isinstance(kind, str):
        raise TypeError(f"stream events need a string `type`, got {event!r}")
    return b"event: " + kind.encode() + b"\ndata: " + event.model_dump_json().encode() + b"\n\n"


async def sse_frames(
    events: AsyncIterator[BaseModel], *, ping_interval: float, request_id: str
) -> AsyncGenerator[bytes, None]:
    """Encode `events`, adding a `ping` whenever nothing was sent for `ping_interval`
    seconds, and turning an exception into a final `error` event."""
    iterator = aiter(events)
    pending: asyncio.Future[BaseModel] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(iterator))
            done, _ = await asyncio.wait({pending}, timeout=ping_interval)
            if not done:
                yield encode_event(PingEvent())
                continue
            finished, pending = pending, None
            try:
                event = finished.result()
            except StopAsyncIteration:
                return
            except Exception as exc:
                if not isinstance(exc, APIError):
                    log.error("stream failed after its first byte", exc_info=exc)
                yield encode_event(error_body(from_exception(exc), request_id))
                return
            yield encode_event(event)
    finally:
        if pending is not None:
            # The generator is suspended inside that task: cancelling it runs the
            # generator's cleanup there (the engine stops), without awaiting here.
            pending.cancel()
            pending.add_done_callback(_retrieve)
        else:
            with anyio.CancelScope(shield=True):
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    await aclose()


def _retrieve(future: asyncio.Future[Any]) -> None:
    with contextlib.suppress(BaseException):
        future.exception()
