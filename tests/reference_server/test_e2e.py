"""End to end over a real socket: `python -m reference_server` in a subprocess, driven by
the official SDK (unchanged) and by raw httpx. MLX for real: tiny-random for behaviour,
SmolLM2 for a smoke test of the embedded default model."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import anthropic
import httpx
import pytest

from conformance.wire.launcher import reference_server
from conformance.wire.sse import parse_sse

# One worker runs this module (pytest-xdist): its servers start once, not once per worker.
pytestmark = [pytest.mark.mlx, pytest.mark.xdist_group("e2e")]

# The SDK sends anthropic-version 2026-10-21, which removed temperature: these tests decode
# greedily (temperature 0), so they speak 2023-06-01.
VERSION = {"anthropic-version": "2023-06-01"}
GREEDY = {"temperature": 0}


@pytest.fixture(scope="module")
def tiny_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("tiny") / "server.log"
    args = ["--alias", "claude-*=tiny-random", "--ping-interval", "0.2"]
    with reference_server("tiny-random", log=log, args=args) as url:
        yield url


@pytest.fixture
def client(tiny_url: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=tiny_url, api_key="unused", default_headers=VERSION, max_retries=0
    ) as sdk:
        yield sdk


def ask(client: anthropic.Anthropic, **kwargs):
    kwargs.setdefault("model", "tiny-random")
    kwargs.setdefault("max_tokens", 12)
    kwargs.setdefault("messages", [{"role": "user", "content": "Tell me about the sea."}])
    return client.messages.create(extra_body=GREEDY, **kwargs)


def test_sdk_create(client):
    message = ask(client)
    assert message.id.startswith("msg_")
    assert message.role == "assistant"
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert 0 < message.usage.output_tokens <= 12
    assert message.usage.input_tokens > 0
    assert message._request_id
    assert message._request_id.startswith("req_")


def test_sdk_stream_equals_create(client):
    plain = ask(client, max_tokens=20)
    with client.messages.stream(
        model="tiny-random",
        max_tokens=20,
        messages=[{"role": "user", "content": "Tell me about the sea."}],
        extra_body=GREEDY,
    ) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(pieces) == "".join(b.text for b in final.content)
    assert final.model_dump(exclude={"id"}) == plain.model_dump(exclude={"id"})


def test_sdk_count_tokens_matches_usage(client):
    messages = [{"role": "user", "content": "Count these words, please."}]
    counted = client.messages.count_tokens(model="tiny-random", messages=messages, system="Be brief.")
    used = ask(client, messages=messages, system="Be brief.", max_tokens=1).usage.input_tokens
    assert counted.input_tokens == used


def test_sdk_models_and_aliases(client):
    models = list(client.models.list())
    assert [m.id for m in models] == ["tiny-random"]
    assert models[0].max_tokens == 2048
    assert client.models.retrieve("claude-opus-4-8").id == "tiny-random"
    assert ask(client, model="claude-opus-4-8", max_tokens=2).model == "claude-opus-4-8"
    with pytest.raises(anthropic.NotFoundError):
        ask(client, model="gpt-4o")


def test_sdk_errors_are_typed(client):
    with pytest.raises(anthropic.BadRequestError) as info:
        ask(client, messages=[])
    assert info.value.body["error"]["type"] == "invalid_request_error"
    assert info.value.request_id.startswith("req_")


def test_stop_sequence_across_tokens(client):
    free = ask(client, max_tokens=24).content[0].text
    stop = free[5:9]  # four characters from the middle: usually spans tokens
    assert stop.strip(), free
    message = ask(client, max_tokens=24, stop_sequences=[stop])
    assert message.stop_reason == "stop_sequence"
    assert message.stop_sequence == stop
    assert message.content[0].text == free[: free.index(stop)]


def test_raw_stream_framing_and_headers(tiny_url):
    body = {
        "model": "tiny-random",
        "max_tokens": 6,
        "stream": True,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    with httpx.stream("POST", f"{tiny_url}/v1/messages", json=body, headers=VERSION, timeout=60) as response:
        raw = b"".join(response.iter_raw())
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["request-id"].startswith("req_")
    assert b"\r" not in raw
    assert b"[DONE]" not in raw
    events = parse_sse(raw).events
    assert all(e.event == e.json["type"] for e in events)
    assert events[0].event == "message_start"
    assert events[-1].event == "message_stop"


def test_disconnect_stops_generation_and_the_server_stays_healthy(tiny_url):
    """Drop a long stream early, then show the engine is free: a new request completes fast."""
    body = {
        "model": "tiny-random",
        "max_tokens": 2000,
        "stream": True,
        "messages": [{"role": "user", "content": "Go on."}],
    }
    with httpx.stream("POST", f"{tiny_url}/v1/messages", json=body, headers=VERSION, timeout=60) as response:
        for _ in zip(range(5), response.iter_raw(), strict=False):
            pass
    started = time.monotonic()
    quick = {"model": "tiny-random", "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]}
    assert httpx.post(f"{tiny_url}/v1/messages", json=quick, headers=VERSION, timeout=60).status_code == 200
    assert time.monotonic() - started < 10


def test_concurrent_requests_get_their_own_answers(client):
    prompts = [f"Story number {i} about the sea." for i in range(3)]
    solo = [ask(client, messages=[{"role": "user", "content": p}], max_tokens=16).content for p in prompts]
    results: dict[int, object] = {}

    def run(i: int) -> None:
        results[i] = ask(client, messages=[{"role": "user", "content": prompts[i]}], max_tokens=16).content

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [results[i] for i in range(3)] == solo


@pytest.mark.smollm2
@pytest.mark.slow
def test_smollm2_answers_and_honours_stop_sequences(smollm2_url):
    with anthropic.Anthropic(
        base_url=smollm2_url, api_key="unused", default_headers=VERSION, max_retries=0
    ) as sdk:
        question = [{"role": "user", "content": "What is the capital of France?"}]
        answer = sdk.messages.create(
            model="smollm2-135m-instruct", max_tokens=24, messages=question, extra_body=GREEDY
        )
        assert "Paris" in answer.content[0].text
        stopped = sdk.messages.create(
            model="smollm2-135m-instruct",
            max_tokens=24,
            messages=question,
            stop_sequences=["Paris"],
            extra_body=GREEDY,
        )
        assert stopped.stop_reason == "stop_sequence"
        assert stopped.stop_sequence == "Paris"
        assert "Paris" not in "".join(b.text for b in stopped.content)


@pytest.mark.smollm2
@pytest.mark.slow
def test_smollm2_pings_during_a_long_prefill(smollm2_url):
    """About 450 prompt tokens keep SmolLM2 in prefill for seconds on a CPU; ping events
    (every 0.5 s here) fill the silence after message_start."""
    long_prompt = " ".join(["The lighthouse keeper watched the grey sea."] * 45)
    body = {
        "model": "smollm2-135m-instruct",
        "max_tokens": 2,
        "stream": True,
        "messages": [{"role": "user", "content": long_prompt}],
    }
    with httpx.stream(
        "POST", f"{smollm2_url}/v1/messages", json=body, headers=VERSION, timeout=300
    ) as response:
        raw = b"".join(response.iter_raw())
    names = [e.event for e in parse_sse(raw).events]
    assert names[0] == "message_start"
    assert names[-1] == "message_stop"
    assert "ping" in names[1 : names.index("message_delta")], names
