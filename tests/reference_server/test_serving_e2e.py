"""Serving under load, end to end over a real socket on MLX (tiny-random), with the official
SDK: concurrent streams batched, prompt-cache usage under the API's definitions, and 529 with
`retry-after` when the admission queue is full, which the SDK's retries ride out.

The SDK speaks anthropic-version 2026-10-21 (no temperature): every request here samples at the
default temperature 1.0, and the same request still gives the same answer, alone or beside
others, streamed or not (sampling is seeded per request: engine/seeds.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx
import pytest

from conformance.wire.launcher import reference_server

# One worker runs this module (pytest-xdist): its servers start once, not once per worker.
pytestmark = [pytest.mark.mlx, pytest.mark.xdist_group("serving_e2e")]

VERSION = {"anthropic-version": "2023-06-01"}
MAX_PENDING = 3
SYSTEM = "You are a patient assistant who explains things slowly. " * 8


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("serving") / "server.log"
    args = ["--max-pending", str(MAX_PENDING), "--max-batch", "4", "--cache-min-tokens", "32"]
    with reference_server("tiny-random", log=log, args=args) as base:
        yield base


@pytest.fixture
def client(url: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0) as sdk:
        yield sdk


def cached_request(question: str, ttl: str = "5m", max_tokens: int = 8) -> dict[str, Any]:
    return {
        "model": "tiny-random",
        "max_tokens": max_tokens,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": ttl}}],
        "messages": [{"role": "user", "content": question}],
    }


def test_concurrent_streams_match_their_solo_answers(client: anthropic.Anthropic) -> None:
    questions = [f"Question {i}: " + "tell me more. " * i for i in range(6)]

    def answer(question: str) -> str:
        with client.messages.stream(
            model="tiny-random",
            max_tokens=16,
            messages=[{"role": "user", "content": question}],
        ) as stream:
            return "".join(stream.text_stream)

    solo = [answer(q) for q in questions[:MAX_PENDING]]
    with ThreadPoolExecutor(MAX_PENDING) as pool:
        together = list(pool.map(answer, questions[:MAX_PENDING]))
    assert together == solo


def test_cache_usage_is_written_then_read_identically_streamed_or_not(client: anthropic.Anthropic) -> None:
    counted = client.messages.count_tokens(
        model="tiny-random",
        system=cached_request("")["system"],
        messages=[{"role": "user", "content": "Why is the sky blue?"}],
    ).input_tokens
    first = client.messages.create(**cached_request("Why is the sky blue?")).usage
    second = client.messages.create(**cached_request("Why is the sky blue?")).usage
    with client.messages.stream(**cached_request("Why is the sky blue?")) as stream:
        streamed = stream.get_final_message().usage
    assert first.cache_creation_input_tokens
    assert first.cache_creation_input_tokens > 32
    assert first.cache_read_input_tokens == 0
    assert first.cache_creation is not None
    assert first.cache_creation.ephemeral_5m_input_tokens == first.cache_creation_input_tokens
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == 0
    for usage in (first, second):
        total = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        assert total == counted  # count_tokens is the whole prompt, cached or not
    assert streamed.model_dump() == second.model_dump()


def test_a_one_hour_breakpoint_is_reported_under_its_ttl(client: anthropic.Anthropic) -> None:
    usage = client.messages.create(**cached_request("One hour?", ttl="1h")).usage
    breakdown = usage.cache_creation
    assert breakdown is not None
    # Written for 1h now, unless a 5m entry of the same prefix is live (then it is read).
    assert breakdown.ephemeral_5m_input_tokens == 0
    assert breakdown.ephemeral_1h_input_tokens + (usage.cache_read_input_tokens or 0) > 32


def _hold(url: str, held: list[httpx.Response], ready: threading.Event, stop: threading.Event) -> None:
    body = {
        "model": "tiny-random",
        "max_tokens": 2000,
        "stream": True,
        "messages": [{"role": "user", "content": "Go on for a long time."}],
    }
    with (
        httpx.Client(base_url=url, headers=VERSION, timeout=30) as http,
        http.stream("POST", "/v1/messages", json=body) as response,
    ):
        held.append(response)
        lines = response.iter_lines()
        next(lines)  # admitted and streaming
        ready.set()
        while not stop.is_set():
            next(lines)


def test_a_full_queue_answers_529_with_retry_after_and_the_sdk_recovers(url: str) -> None:
    stop = threading.Event()
    held: list[httpx.Response] = []
    readies = [threading.Event() for _ in range(MAX_PENDING)]
    holders = [threading.Thread(target=_hold, args=(url, held, r, stop), daemon=True) for r in readies]
    for holder in holders:
        holder.start()
    try:
        assert all(r.wait(30) for r in readies)
        refused = httpx.post(
            f"{url}/v1/messages",
            headers=VERSION,
            json={"model": "tiny-random", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]},
        )
        assert refused.status_code == 529
        assert float(refused.headers["retry-after"]) >= 1
        body = refused.json()
        assert body["type"] == "error"
        assert body["error"]["type"] == "overloaded_error"
        assert body["request_id"] == refused.headers["request-id"]
        # The SDK retries a 529 after `retry-after`; the held streams end meanwhile.
        threading.Timer(0.5, stop.set).start()
        started = time.monotonic()
        with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=4) as sdk:
            message = sdk.messages.create(
                model="tiny-random", max_tokens=4, messages=[{"role": "user", "content": "Hi"}]
            )
        assert message.usage.output_tokens > 0
        assert time.monotonic() - started >= 0.5
    finally:
        stop.set()
        for holder in holders:
            holder.join(30)
