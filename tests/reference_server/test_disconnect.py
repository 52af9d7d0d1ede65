"""A client that goes away stops its generation: over a real socket (uvicorn), for a stream
and for a plain request, the engine's generator is closed and nothing is left running."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from conformance.wire.launcher import free_port
from reference_server import Settings, create_app
from reference_server.engine.scripted import ScriptedEngine

HEADERS = {"anthropic-version": "2023-06-01"}


def serve(engine: ScriptedEngine) -> Iterator[tuple[str, ScriptedEngine]]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(Settings(), engine=engine), port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", engine
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def served() -> Iterator[tuple[str, ScriptedEngine]]:
    yield from serve(ScriptedEngine("x" * 2000, model_id="scripted", context_window=8192, token_delay=0.01))


@pytest.fixture
def served_fast() -> Iterator[tuple[str, ScriptedEngine]]:
    """No delay between tokens: the response task spends its time in `send`, which is where
    the disconnect cancels it."""
    yield from serve(ScriptedEngine("x" * 400_000, model_id="scripted", context_window=500_000))


def wait_until(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def body(**extra):
    return {"model": "scripted", "max_tokens": 2000, "messages": [{"role": "user", "content": "go"}], **extra}


def hang_up_while_running(url: str, engine: ScriptedEngine, request: dict, frames: int) -> int:
    """Read `frames` raw chunks of a stream, wait until the engine is generating it, then hang
    up; the engine's count of cancelled generations before the try that did.

    KNOWN FLAKE (open): after another uvicorn server has run in the same pytest process, the
    stream is sometimes closed by the server before the client hangs up (a spurious
    http.disconnect?; about 4 runs in 10 of this file, never alone, never with tracing on; seen
    in CI on the slow-token stream too). That is not what these tests measure, so such a try is
    repeated: the claim under test (a hang-up stops the generation) is judged on a try where it
    applies. On a busy machine the generation may start a moment after the first frames
    (message_start comes before the engine is asked for a token), hence the generous wait."""
    for _attempt in range(5):
        cancelled_before = engine.cancelled
        with httpx.stream("POST", f"{url}/v1/messages", json=request, headers=HEADERS) as response:
            received = sum(1 for _ in zip(range(frames), response.iter_raw(), strict=False))
            running = received == frames and wait_until(lambda: engine.active == 1, timeout=30.0)
        if running:
            return cancelled_before
        # Closed early: wait for that generation to finish before the next try counts anew.
        assert wait_until(lambda: engine.active == 0, timeout=30.0)
    raise AssertionError("the stream was closed before the client hung up, five times")


def test_closing_a_stream_stops_generation(served):
    url, engine = served
    cancelled_before = hang_up_while_running(url, engine, body(stream=True), frames=3)
    assert wait_until(lambda: engine.active == 0, timeout=30.0)
    assert engine.cancelled == cancelled_before + 1


def test_closing_a_stream_cancelled_in_send_stops_generation(served_fast):
    # Cancelled while sending, the frame generators are left suspended at a `yield`; only the
    # response's own clean-up closes them (with the garbage collector off, nothing else would).
    url, engine = served_fast
    gc.collect()
    gc.disable()
    try:
        request = body(stream=True, max_tokens=400_000)
        cancelled_before = hang_up_while_running(url, engine, request, frames=50)
        assert wait_until(lambda: engine.active == 0, timeout=2.0)
        assert engine.cancelled == cancelled_before + 1
    finally:
        gc.enable()


def test_abandoning_a_plain_request_stops_generation(served):
    url, engine = served
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{url}/v1/messages", json=body(), headers=HEADERS, timeout=0.3)
    assert wait_until(lambda: engine.active == 0)
    assert engine.cancelled == 1
