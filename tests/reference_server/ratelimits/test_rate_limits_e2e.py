"""Rate limits end to end: the reference server on tiny-random with `--rate-limit-rpm 6`, over a
real socket, through the official SDKs: a chat completion (OpenAI's SDK) draws on the same limit
as a message, with OpenAI's `x-ratelimit-*` headers; the request past the minute's six is a
RateLimitError in each SDK (429, `retry-after`, each API's error shape), and the Anthropic SDK's
own retry, which waits what `retry-after` says, then succeeds.

Six a minute, not two: the bucket gives a request back every 10 s instead of every 30 s, so the
SDK's retry waits several seconds (still far more than its own backoff, under one), not 30."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from conformance.wire.launcher import reference_server

pytestmark = [pytest.mark.mlx, pytest.mark.slow]
# The SDK sends anthropic-version 2026-10-21, which removed temperature: these tests decode
# greedily (temperature 0), so they speak 2023-06-01.
LEGACY = {"anthropic-version": "2023-06-01"}

MODEL = "tiny-random"
RPM = 6


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("rate-limits") / "server.log"
    with reference_server(MODEL, log=log, args=["--rate-limit-rpm", str(RPM)]) as served:
        yield served


def ask(sdk: anthropic.Anthropic) -> anthropic.types.Message:
    return sdk.messages.create(
        model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "Hi"}], extra_body={"temperature": 0}
    )


def test_the_request_past_the_limit_is_a_429_and_the_sdks_retry_succeeds(url: str) -> None:
    with anthropic.Anthropic(base_url=url, api_key="unused", default_headers=LEGACY, max_retries=0) as once:
        first = once.messages.with_raw_response.create(
            model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "Hi"}]
        )
        assert first.headers["anthropic-ratelimit-requests-limit"] == str(RPM)
        assert first.headers["anthropic-ratelimit-requests-remaining"] == str(RPM - 1)
        with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as chat:
            chat_messages: Any = [{"role": "user", "content": "Hi"}]
            completed = chat.chat.completions.with_raw_response.create(
                model=MODEL, max_tokens=2, messages=chat_messages
            )
            assert completed.headers["x-ratelimit-limit-requests"] == str(RPM)
            assert completed.headers["x-ratelimit-remaining-requests"] == str(RPM - 2)
            assert completed.headers["x-ratelimit-reset-requests"].endswith("s")
            assert "anthropic-ratelimit-requests-limit" not in completed.headers
            for left in range(RPM - 3, -1, -1):  # the rest of the minute's requests, as messages
                spent = once.messages.with_raw_response.create(
                    model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "Hi"}]
                )
                assert spent.headers["anthropic-ratelimit-requests-remaining"] == str(left)
            with pytest.raises(openai.RateLimitError) as limited:
                chat.chat.completions.create(model=MODEL, max_tokens=2, messages=chat_messages)
        assert limited.value.status_code == 429
        assert limited.value.code == "rate_limit_exceeded"
        assert limited.value.type == "requests"
        assert int(limited.value.response.headers["retry-after"]) >= 1
        with pytest.raises(anthropic.RateLimitError) as caught:
            ask(once)
    error = caught.value
    assert error.status_code == 429
    assert error.type == "rate_limit_error"
    assert error.request_id is not None
    assert error.request_id.startswith("req_")
    retry_after = int(error.response.headers["retry-after"])
    assert 1 <= retry_after <= 60 // RPM
    started = time.monotonic()
    with anthropic.Anthropic(
        base_url=url, api_key="unused", default_headers=LEGACY, max_retries=2
    ) as retrying:
        answer = retrying.messages.with_raw_response.create(
            model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "Hi"}]
        )
    waited = time.monotonic() - started
    assert answer.parse().type == "message"
    assert answer.retries_taken >= 1  # the first attempt met the limit; a retry got through
    assert waited >= retry_after - 1.5  # the SDK waited what retry-after said (its jitter is below 1)
