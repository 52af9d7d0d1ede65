"""RATE-*: rate limits, where the target has them (the profile, else a probe: its answer to one
tiny message carries `anthropic-ratelimit-*` headers): the headers complete and well-formed, a
limit met answered as a 429 `rate_limit_error` with `retry-after`, and a retry after that long
admitted, as the official SDK's retry expects.

A limit is met by spending what `anthropic-ratelimit-requests-remaining` says is left, with
tiny requests (`max_tokens: 1`); a target with more than BURST requests left is not pushed
(SKIP): the suite does not load a production limit to prove a point.

Docs: https://platform.claude.com/docs/en/api/rate-limits (headers, token bucket, 429 with
retry-after); https://platform.claude.com/docs/en/api/errors (429 rate_limit_error).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import anthropic
import httpx

from conformance.catalogue import Level, prop
from conformance.judging.checks import ConformanceFailure, expect, expect_envelope, expect_status, not_judged
from conformance.wire.drivers import message_body
from conformance.wire.target import Target

GUIDE = "api/rate-limits"
FAMILIES = ("requests", "tokens", "input-tokens", "output-tokens")
PARTS = ("limit", "remaining", "reset")
BURST = 12  # the most requests a property spends to meet a limit
MESSAGES = "endpoint:POST /v1/messages"
SDK_MAX_WAIT = 60.0  # the longest retry-after the official SDKs wait for (longer: their backoff)
_HEADER = re.compile(
    r"^anthropic-ratelimit-(requests|tokens|input-tokens|output-tokens)-(limit|remaining|reset)$"
)


def _tiny(target: Target) -> dict[str, Any]:
    return message_body(target, max_tokens=1)


def ratelimit_headers(response: httpx.Response) -> dict[str, dict[str, str]]:
    """family -> part -> value, of the documented `anthropic-ratelimit-*` headers."""
    found: dict[str, dict[str, str]] = {}
    for name, value in response.headers.items():
        match = _HEADER.match(name.lower())
        if match:
            found.setdefault(match[1], {})[match[2]] = value
    return found


def _count(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _rfc3339(value: str) -> datetime | None:
    """An RFC 3339 date-time with its offset (`Z` or `±hh:mm`), else None."""
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", value):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def expect_ratelimit_headers(response: httpx.Response, what: str) -> None:
    """Each family present complete: a positive integer limit, 0 <= remaining <= limit, and an
    RFC 3339 reset; and at least one family."""
    families = ratelimit_headers(response)
    expect(bool(families), f"anthropic-ratelimit-* headers on {what}", sorted(response.headers))
    for family, parts in sorted(families.items()):
        prefix = f"anthropic-ratelimit-{family}"
        missing = [f"{prefix}-{part}" for part in PARTS if part not in parts]
        expect(not missing, f"{prefix}-limit, -remaining and -reset together on {what}", {"missing": missing})
        limit, remaining = _count(parts["limit"]), _count(parts["remaining"])
        expect(limit is not None and limit > 0, f"{prefix}-limit a positive integer", parts["limit"])
        assert limit is not None
        expect(
            remaining is not None and remaining <= limit,
            f"{prefix}-remaining an integer from 0 to the limit ({limit})",
            parts["remaining"],
        )
        reset = _rfc3339(parts["reset"])
        expect(reset is not None, f"{prefix}-reset an RFC 3339 date-time", parts["reset"])


def meet_limit(target: Target) -> httpx.Response:
    """Spend the requests the target says are left until it answers 429 (SKIP when more than
    BURST are left); the 429."""
    left: int | None = None
    for sent in range(BURST + 2):
        response = target.request("POST", "/v1/messages", json_body=_tiny(target))
        if response.status_code == 429:
            return response
        expect_status(response, (200, 429))
        if sent == 0:
            left = _count(ratelimit_headers(response).get("requests", {}).get("remaining"))
            if left is None:
                not_judged("no anthropic-ratelimit-requests-remaining header: no requests limit to meet")
            if left >= BURST:
                not_judged(f"{left} requests left before the limit: more than this suite spends ({BURST})")
    raise ConformanceFailure(
        f"a 429 once the {left} requests left were spent", f"{BURST + 2} requests answered 200"
    )


def retry_after_seconds(response: httpx.Response) -> float | None:
    """`retry-after` as seconds: a non-negative number, or an HTTP date (RFC 9110); else None."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    if re.fullmatch(r"\d+(\.\d+)?", value.strip()):
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@prop(
    "RATE-001",
    Level.MUST,
    "Rate-limit headers are complete and well-formed",
    url=GUIDE,
    requirement="A target that reports its rate limits sends, for each limit it reports "
    "(requests, tokens, input-tokens, output-tokens), anthropic-ratelimit-<limit>-limit (the "
    "maximum), -remaining (0 to the maximum) and -reset (RFC 3339), on JSON and streamed answers.",
    source="docs: rate limits page, 'Response headers': anthropic-ratelimit-requests-limit 'The "
    "maximum number of requests allowed within any rate limit period', -remaining 'The number of "
    "requests remaining before being rate limited', -reset 'The time when the request rate limit "
    "will be fully replenished, provided in RFC 3339 format', and the same for tokens, "
    "input-tokens and output-tokens",
    requires=("rate_limits",),
    covers=(MESSAGES,),
)
def test_rate_001_headers(target: Target) -> None:
    answer = target.request("POST", "/v1/messages", json_body=_tiny(target))
    expect_status(answer, (200, 429))
    expect_ratelimit_headers(answer, f"the HTTP {answer.status_code} answer")
    with target.stream("/v1/messages", {**_tiny(target), "stream": True}) as streamed:
        streamed.read()
    expect_status(streamed, (200, 429))
    expect_ratelimit_headers(streamed, f"the streamed request's HTTP {streamed.status_code}")


@prop(
    "RATE-002",
    Level.MUST,
    "A rate limit met is a 429 rate_limit_error with retry-after",
    url=GUIDE,
    requirement="Once the requests its headers say are left are spent, the next request is a 429 "
    "in the error envelope with error.type rate_limit_error and a retry-after header: the seconds "
    "to wait (or an HTTP date).",
    source="docs: rate limits page: 'If you exceed any of the rate limits you will get a 429 error "
    "describing which rate limit was exceeded, along with a retry-after header indicating how long "
    "to wait'; errors page: 429 rate_limit_error 'Your account has hit a rate limit'",
    requires=("rate_limits",),
    covers=(MESSAGES, "error:rate_limit_error"),
)
def test_rate_002_limit_met_is_a_429(target: Target) -> None:
    refused = meet_limit(target)
    expect_envelope(refused, 429, "rate_limit_error")
    wait = retry_after_seconds(refused)
    expect(
        wait is not None,
        "a retry-after header: seconds to wait, or an HTTP date",
        refused.headers.get("retry-after", "(none)"),
    )


@prop(
    "RATE-003",
    Level.MUST,
    "A retry after retry-after is admitted",
    url=GUIDE,
    requirement="After a 429, the official SDK's retry, which waits what retry-after says "
    "(up to 60 s) before each of its two retries, gets the request through.",
    source="docs: rate limits page: retry-after 'The number of seconds to wait until you can retry "
    "the request. Earlier retries will fail.'; the limit is a token bucket, 'continuously "
    "replenished'; SDK _base_client.py: a 429 is retried (max_retries 2) after retry-after when it "
    "is at most 60 s",
    requires=("rate_limits",),
    covers=(MESSAGES, "error:rate_limit_error"),
)
def test_rate_003_retry_after_is_honest(target: Target) -> None:
    refused = meet_limit(target)
    wait = retry_after_seconds(refused)
    if wait is None or wait > SDK_MAX_WAIT:
        not_judged(
            f"retry-after {refused.headers.get('retry-after')!r}: not a wait the SDK honours (RATE-002)"
        )
    sdk = target.sdk().with_options(max_retries=2, timeout=SDK_MAX_WAIT + wait + 30)
    try:
        sdk.messages.create(
            model=target.model,
            max_tokens=1,
            messages=[{"role": "user", "content": "Say hello in one short sentence."}],
            extra_body=target.greedy_fields(),
        )
    except anthropic.RateLimitError as exc:
        raise ConformanceFailure(
            f"a retry after retry-after ({refused.headers.get('retry-after')} s) to be admitted",
            f"the SDK's two retries, each after the retry-after it was given, met 429: {exc.message}",
            reason="retry-after-too-short",
        ) from None
