"""Rate limits on the scripted engine, through the app: the 429 in the Anthropic envelope with
retry-after, the ratelimit headers on every response while limits are on (errors and 404s
too) and on none while they are off, count_tokens not limited, and a stream's output estimate
settled from its final usage; chat completions on the same limits, in OpenAI's shapes."""

from __future__ import annotations

from typing import Any

from reference_server.engine.scripted import ScriptedEngine
from reference_server.ratelimits import Limits, RateLimiter
from reference_server.workspaces.limits import KeyLimiters
from tests.reference_server.conftest import HEADERS, make_client

BODY: dict[str, Any] = {
    "model": "scripted",
    "max_tokens": 50,
    "messages": [{"role": "user", "content": "Hi"}],
}
RATE_HEADERS = ("limit", "remaining", "reset")


def test_the_third_request_of_a_two_a_minute_limit_is_a_429_with_retry_after(
    scripted_engine: ScriptedEngine,
) -> None:
    with make_client(scripted_engine, rate_limit_rpm=2) as client:
        client.headers.update(HEADERS)
        first, second = (client.post("/v1/messages", json=BODY) for _ in range(2))
        assert (first.status_code, second.status_code) == (200, 200)
        assert first.headers["anthropic-ratelimit-requests-remaining"] == "1"
        assert second.headers["anthropic-ratelimit-requests-remaining"] == "0"
        third = client.post("/v1/messages", json=BODY)
        assert third.status_code == 429
        body = third.json()
        assert body["type"] == "error"
        assert body["error"]["type"] == "rate_limit_error"
        assert body["request_id"] == third.headers["request-id"]
        assert 1 <= int(third.headers["retry-after"]) <= 30
        assert third.headers["anthropic-ratelimit-requests-limit"] == "2"
        # count_tokens has limits of its own at the API: not charged here, headers still shown
        counted = client.post("/v1/messages/count_tokens", json={k: BODY[k] for k in ("model", "messages")})
        assert counted.status_code == 200
        assert counted.headers["anthropic-ratelimit-requests-remaining"] == "0"
        missing = client.get("/v1/nowhere")
        assert missing.status_code == 404
        assert "anthropic-ratelimit-requests-reset" in missing.headers
        invalid = client.post("/v1/messages", json={**BODY, "max_tokens": -1})
        assert invalid.status_code == 400  # refused before any limit is charged


def test_no_ratelimit_headers_while_limits_are_off(scripted_engine: ScriptedEngine) -> None:
    with make_client(scripted_engine) as client:
        client.headers.update(HEADERS)
        answer = client.post("/v1/messages", json=BODY)
    assert answer.status_code == 200
    assert not [name for name in answer.headers if name.startswith("anthropic-ratelimit-")]


def test_a_stream_settles_the_output_estimate_from_its_usage(scripted_engine: ScriptedEngine) -> None:
    with make_client(scripted_engine, rate_limit_otpm=1000) as client:
        client.headers.update(HEADERS)
        # a clock that stands still, so that only the refund moves the bucket
        client.app.state.limiters = still(Limits(otpm=1000))
        with client.stream(
            "POST", "/v1/messages", json={**BODY, "max_tokens": 200, "stream": True}
        ) as stream:
            assert stream.headers["anthropic-ratelimit-output-tokens-remaining"] == "800"
            text = "".join(stream.iter_text())
        assert "event: message_stop" in text
        usage = client.post("/v1/messages", json={**BODY, "max_tokens": 200}).json()["usage"]
        after = client.get("/v1/models").headers
    # both answers gave back what they did not generate: each generated usage.output_tokens
    remaining = int(after["anthropic-ratelimit-output-tokens-remaining"])
    assert remaining == 1000 - 2 * usage["output_tokens"]


CHAT: dict[str, Any] = {
    "model": "scripted",
    "max_tokens": 50,
    "messages": [{"role": "user", "content": "Hi"}],
}


def still(limits: Limits) -> KeyLimiters:
    """Limits whose buckets' clock stands still, so that only refunds move them."""
    return KeyLimiters(limits, lambda own: RateLimiter(own, clock=lambda: 0.0, wall=lambda: 0.0))


def test_chat_completions_share_the_limits_in_openais_shapes(scripted_engine: ScriptedEngine) -> None:
    with make_client(scripted_engine, rate_limit_rpm=2, rate_limit_otpm=1000) as client:
        client.headers.update(HEADERS)
        client.app.state.limiters = still(Limits(rpm=2, otpm=1000))  # only refunds move the buckets
        message = client.post("/v1/messages", json=BODY)
        chat = client.post("/v1/chat/completions", json=CHAT)
        assert (message.status_code, chat.status_code) == (200, 200)
        assert chat.headers["x-ratelimit-limit-requests"] == "2"
        assert chat.headers["x-ratelimit-remaining-requests"] == "0"  # the message took one
        assert chat.headers["x-ratelimit-reset-requests"] == "1m0s"  # two a minute, both spent
        generated = message.json()["usage"]["output_tokens"] + chat.json()["usage"]["completion_tokens"]
        assert chat.headers["x-ratelimit-remaining-tokens"] == str(1000 - generated)  # refunds settled
        assert not [name for name in chat.headers if name.startswith("anthropic-ratelimit-")]
        limited = client.post("/v1/chat/completions", json=CHAT)
        assert limited.status_code == 429
        assert limited.json() == {
            "error": {
                "message": limited.json()["error"]["message"],
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
        assert "retry-after" in limited.headers
        assert client.post("/v1/messages", json=BODY).status_code == 429  # the same bucket


def test_a_streamed_chat_completion_settles_its_output(scripted_engine: ScriptedEngine) -> None:
    with make_client(scripted_engine, rate_limit_otpm=1000) as client:
        client.headers.update(HEADERS)
        client.app.state.limiters = still(Limits(otpm=1000))
        streamed = {**CHAT, "max_tokens": 200, "stream": True, "stream_options": {"include_usage": True}}
        with client.stream("POST", "/v1/chat/completions", json=streamed) as stream:
            assert stream.headers["x-ratelimit-remaining-tokens"] == "800"
            text = "".join(stream.iter_text())
        assert "[DONE]" in text
        after = client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 1})
    usage = [line for line in text.splitlines() if '"usage":{' in line][-1]
    generated = int(usage.split('"completion_tokens":')[1].split(",")[0])
    assert after.headers["x-ratelimit-remaining-tokens"] == str(1000 - generated - 1)
