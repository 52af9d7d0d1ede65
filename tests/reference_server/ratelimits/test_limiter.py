"""The token buckets and the limiter, on a fake clock: admission, refill, the 429 and its
retry-after, the output estimate and its refund, cache reads refunded, and the headers."""

from __future__ import annotations

from datetime import datetime

import pytest

from reference_server.errors import RateLimitError
from reference_server.ratelimits import Limits, RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limiter(clock: Clock, **limits: int) -> RateLimiter:
    return RateLimiter(Limits(**limits), clock=clock, wall=lambda: 1_800_000_000.0 + clock.now)


def refused(rates: RateLimiter, input_tokens: int = 1, max_tokens: int = 1) -> RateLimitError:
    with pytest.raises(RateLimitError) as caught:
        rates.admit(input_tokens, max_tokens)
    return caught.value


def test_past_the_requests_limit_a_429_says_when_to_retry_and_that_retry_works() -> None:
    clock = Clock()
    rates = limiter(clock, rpm=2)
    rates.admit(10, 10)
    rates.admit(10, 10)
    error = refused(rates)
    assert (error.status_code, error.error_type) == (429, "rate_limit_error")
    assert error.headers["retry-after"] == "30"  # 2 a minute: one back every 30 s
    assert rates.headers()["anthropic-ratelimit-requests-remaining"] == "0"  # the app adds these
    assert error.limit == "requests"
    assert "2 requests per minute" in error.message
    clock.now += 29
    assert refused(rates).headers["retry-after"] == "1"
    clock.now += 1
    rates.admit(10, 10)  # what retry-after promised


def test_output_is_charged_at_max_tokens_and_what_was_not_generated_given_back() -> None:
    clock = Clock()
    rates = limiter(clock, otpm=100)
    ticket = rates.admit(5, 60)
    assert rates.headers()["anthropic-ratelimit-output-tokens-remaining"] == "40"
    assert refused(rates, max_tokens=50).headers["retry-after"] == "6"  # 10 more at 100/60 a second
    ticket.settle(output_tokens=10)
    assert rates.headers()["anthropic-ratelimit-output-tokens-remaining"] == "90"
    ticket.settle(output_tokens=0)  # once only
    assert rates.headers()["anthropic-ratelimit-output-tokens-remaining"] == "90"


def test_a_cut_off_answer_keeps_the_estimate_and_cache_reads_do_not_count() -> None:
    clock = Clock()
    rates = limiter(clock, itpm=1000, otpm=100)
    rates.admit(400, 30).settle()
    assert rates.headers()["anthropic-ratelimit-output-tokens-remaining"] == "70"
    rates.admit(500, 10).settle(output_tokens=10, cache_read_tokens=300)
    assert rates.headers()["anthropic-ratelimit-input-tokens-remaining"] == "400"


def test_a_request_past_a_whole_minutes_limit_is_told_not_to_retry() -> None:
    rates = limiter(Clock(), itpm=100)
    error = refused(rates, input_tokens=101)
    assert error.headers["x-should-retry"] == "false"
    assert error.headers["retry-after"] == "60"
    assert "on its own" in error.message
    assert "--rate-limit-itpm" in error.message


def test_headers_name_each_limit_set_with_an_rfc_3339_reset_when_full() -> None:
    clock = Clock()
    rates = limiter(clock, rpm=60, itpm=1000, otpm=600)
    assert set(rates.headers()) == {
        f"anthropic-ratelimit-{family}-{part}"
        for family in ("requests", "input-tokens", "output-tokens", "tokens")
        for part in ("limit", "remaining", "reset")
    }
    rates.admit(100, 300)
    headers = rates.headers()
    assert headers["anthropic-ratelimit-requests-limit"] == "60"
    # tokens-*: the more restrictive now (output: half left, input: nine tenths)
    assert (headers["anthropic-ratelimit-tokens-limit"], headers["anthropic-ratelimit-tokens-remaining"]) == (
        "600",
        "300",
    )
    reset = datetime.fromisoformat(headers["anthropic-ratelimit-output-tokens-reset"])
    assert reset.utcoffset() is not None
    assert headers["anthropic-ratelimit-output-tokens-reset"].endswith("Z")
    assert reset.timestamp() == 1_800_000_000 + clock.now + 30  # 300 back at 10 a second
    assert limiter(clock, rpm=5).headers().keys() == {
        "anthropic-ratelimit-requests-limit",
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
    }


def test_no_limit_set_is_off() -> None:
    assert not Limits().on
    assert Limits(otpm=1).on


def test_a_request_that_never_started_is_given_back_whole() -> None:
    clock = Clock()
    rates = limiter(clock, rpm=2, itpm=100, otpm=100)
    ticket = rates.admit(30, 40)
    ticket.cancel()  # the engine was full: a 529
    headers = rates.headers()
    assert headers["anthropic-ratelimit-requests-remaining"] == "2"
    assert headers["anthropic-ratelimit-input-tokens-remaining"] == "100"
    assert headers["anthropic-ratelimit-output-tokens-remaining"] == "100"
    ticket.settle(0)  # a second settlement gives nothing more back
    assert rates.headers() == headers
