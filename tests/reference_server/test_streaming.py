from __future__ import annotations

import asyncio
import json

import pytest

from reference_server.errors import OverloadedError
from reference_server.protocol import PingEvent, RawContentBlockStopEvent, RawMessageStopEvent
from reference_server.streaming import encode_event, sse_frames


def frames_to_events(frames: list[bytes]) -> list[tuple[str, dict]]:
    events = []
    for frame in frames:
        assert frame.endswith(b"\n\n")
        assert b"\r" not in frame  # LF framing
        event_line, data_line = frame.decode().rstrip("\n").split("\n")
        name = event_line.removeprefix("event: ")
        data = json.loads(data_line.removeprefix("data: "))
        assert name == data["type"]
        events.append((name, data))
    return events


async def collect(iterator) -> list[bytes]:
    return [frame async for frame in iterator]


def test_encode_event_is_named_compact_and_lf_framed():
    assert encode_event(RawContentBlockStopEvent(index=2)) == (
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":2}\n\n'
    )


def test_encode_event_rejects_untyped_models():
    from pydantic import BaseModel

    class Untyped(BaseModel):
        x: int = 1

    with pytest.raises(TypeError):
        encode_event(Untyped())


def test_pings_fill_silence_and_never_replace_events():
    async def slow():
        await asyncio.sleep(0.35)
        yield RawMessageStopEvent()

    frames = asyncio.run(collect(sse_frames(slow(), ping_interval=0.1, request_id="req_1")))
    names = [name for name, _ in frames_to_events(frames)]
    assert names[-1] == "message_stop"
    assert names[:-1] == ["ping"] * len(names[:-1])
    assert len(names) >= 3


def test_failure_after_first_byte_is_an_error_event_that_ends_the_stream():
    async def failing():
        yield RawContentBlockStopEvent(index=0)
        raise OverloadedError("Overloaded")

    events = frames_to_events(
        asyncio.run(collect(sse_frames(failing(), ping_interval=5, request_id="req_9")))
    )
    assert [name for name, _ in events] == ["content_block_stop", "error"]
    assert events[-1][1] == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_9",
    }


def test_unexpected_failure_is_an_api_error_event(caplog):
    async def failing():
        raise RuntimeError("boom")
        yield PingEvent()  # pragma: no cover

    events = frames_to_events(asyncio.run(collect(sse_frames(failing(), ping_interval=5, request_id="r"))))
    assert events[0][1]["error"]["type"] == "api_error"
    assert "boom" not in events[0][1]["error"]["message"]  # internals are logged, not sent


def test_closing_the_stream_early_closes_the_source():
    closed = asyncio.Event()

    async def endless():
        try:
            while True:
                yield PingEvent()
                await asyncio.sleep(0)
        finally:
            closed.set()

    async def main():
        frames = sse_frames(endless(), ping_interval=5, request_id="r")
        await anext(frames)
        await frames.aclose()
        await asyncio.sleep(0)
        return closed.is_set()

    assert asyncio.run(main())


def test_cancelling_while_waiting_cancels_the_source():
    cancelled = asyncio.Event()

    async def silent():
        try:
            await asyncio.sleep(60)
            yield PingEvent()
        finally:
            cancelled.set()

    async def main():
        async def consume():
            async for _ in sse_frames(silent(), ping_interval=5, request_id="r"):
                pass

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.01)
        return cancelled.is_set()

    assert asyncio.run(main())
