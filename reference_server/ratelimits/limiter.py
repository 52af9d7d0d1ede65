"""The server's rate limits: requests, input tokens and output tokens per minute, each a token
bucket (buckets.py), one set per API key (workspaces/limits.py; one for all when the server
asks for no key).

Only `POST /v1/messages` and `POST /v1/chat/completions` are limited (the same buckets), as the
API limits message creation (count_tokens and batches have limits of their own there). A
request is admitted when every bucket holds its cost: one request, the prompt's input tokens,
and `max_tokens` output tokens (the API estimates output from `max_tokens` and adjusts at the
end: `Ticket.settle` gives back what was not generated, and the cache reads, which do not
count towards the input limit). Past a limit the answer is a 429 `rate_limit_error` with
`retry-after` (whole seconds until the request fits); a request larger than a whole minute's
limit can never fit, and says so (`x-should-retry: false`, which the SDKs obey).

While limits are on, every response carries the documented headers
`anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`
(`reset`: RFC 3339, when the bucket is full again; `tokens-*`: the more restrictive of the
token limits now), for the limits that are set; the chat completions route carries OpenAI's
`x-ratelimit-*` instead, and its 429 is OpenAI's (openai/errors.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from reference_server.errors import RateLimitError
from reference_server.ratelimits.buckets import TokenBucket

__all__ = ["Limits", "RateLimiter", "Ticket", "metered"]

E = TypeVar("E")

# The header family of each bucket, and the words of its 429.
_FAMILY = {"requests": "requests", "input": "input-tokens", "output": "output-tokens"}
_UNIT = {"requests": "requests", "input": "input tokens", "output": "output tokens"}
_FLAG = {"requests": "--rate-limit-rpm", "input": "--rate-limit-itpm", "output": "--rate-limit-otpm"}


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-minute limits; None: not limited."""

    rpm: int | None = None
    itpm: int | None = None
    otpm: int | None = None

    @property
    def on(self) -> bool:
        return any(limit is not None for limit in (self.rpm, self.itpm, self.otpm))

    def by_bucket(self) -> dict[str, int]:
        pairs = (("requests", self.rpm), ("input", self.itpm), ("output", self.otpm))
        return {name: limit for name, limit in pairs if limit is not None}


@dataclass(slots=True)
class Ticket:
    """An admitted request's charge; `settle` adjusts it once the answer is known."""

    limiter: RateLimiter
    max_tokens: int
    input_tokens: int = 0
    settled: bool = field(default=False)

    def cancel(self) -> None:
        """The generation never started (the engine was full: a 529): give the whole charge
        back, so that a refused request costs no limit."""
        if self.settled:
            return
        self.settled = True
        self.limiter.give_back({"requests": 1, "input": self.input_tokens, "output": self.max_tokens})

    def settle(self, output_tokens: int | None = None, cache_read_tokens: int = 0) -> None:
        """Give back the output tokens estimated but not generated, and the cache reads.
        Without `output_tokens` (the answer was cut off) the estimate stands."""
        if self.settled:
            return
        self.settled = True
        refund = {"input": cache_read_tokens}
        if output_tokens is not None:
            refund["output"] = self.max_tokens - output_tokens
        self.limiter.give_back(refund)


class RateLimiter:
    def __init__(
        self,
        limits: Limits,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits
        self._clock, self._wall = clock, wall
        now = clock()
        self._buckets = {name: TokenBucket.full(limit, now) for name, limit in limits.by_bucket().items()}

    def _refilled(self) -> dict[str, TokenBucket]:
        now = self._clock()
        for bucket in self._buckets.values():
            bucket.refill(now)
        return self._buckets

    def admit(self, input_tokens: int, max_tokens: int) -> Ticket:
        """Charge one request, or raise the 429 that says which limit it meets and for how long."""
        costs = {"requests": 1, "input": input_tokens, "output": max_tokens}
        buckets = self._refilled()
        waits = {name: bucket.wait(costs[name]) for name, bucket in buckets.items()}
        blocked = {name: wait for name, wait in waits.items() if wait > 0}
        if blocked:
            raise self._refusal(blocked, costs)
        for name, bucket in buckets.items():
            bucket.take(costs[name])
        return Ticket(self, max_tokens, input_tokens)

    def give_back(self, amounts: dict[str, int]) -> None:
        buckets = self._refilled()
        for name, amount in amounts.items():
            if name in buckets:
                buckets[name].give_back(amount)

    def _refusal(self, blocked: dict[str, float], costs: dict[str, int]) -> RateLimitError:
        name = max(blocked, key=lambda n: blocked[n])
        limit = self._buckets[name].capacity
        wait = blocked[name]
        headers: dict[str, str] = {}  # the rate-limit headers are the app's, by route (app.py)
        if math.isinf(wait):
            headers |= {"retry-after": "60", "x-should-retry": "false"}
            return RateLimitError(
                f"This request ({costs[name]} {_UNIT[name]}) would exceed the rate limit of {limit}"
                f" {_UNIT[name]} per minute ({_FLAG[name]}) on its own: lower it or raise the limit.",
                limit=name,
                headers=headers,
            )
        seconds = max(1, math.ceil(wait))
        headers["retry-after"] = str(seconds)
        return RateLimitError(
            f"This request would exceed the rate limit of {limit} {_UNIT[name]} per minute"
            f" ({_FLAG[name]}). Please retry after {seconds} s.",
            limit=name,
            headers=headers,
        )

    def headers(self) -> dict[str, str]:
        """The `anthropic-ratelimit-*` headers of the limits now (empty when none is set)."""
        buckets = self._refilled()
        wall = self._wall()
        out: dict[str, str] = {}
        for name, bucket in buckets.items():
            out |= _family(_FAMILY[name], bucket, wall)
        if (tightest := self._tightest_tokens()) is not None:
            out |= _family("tokens", tightest, wall)
        return out

    def openai_headers(self) -> dict[str, str]:
        """OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` headers, for the chat
        completions route (`reset`: how long until the bucket is full, as OpenAI writes it:
        `1s`, `6m0s`, `20ms`); `tokens` is the tighter of the two token limits, as above."""
        buckets = self._refilled()
        out: dict[str, str] = {}
        for family, bucket in (("requests", buckets.get("requests")), ("tokens", self._tightest_tokens())):
            if bucket is not None:
                out[f"x-ratelimit-limit-{family}"] = str(bucket.capacity)
                out[f"x-ratelimit-remaining-{family}"] = str(bucket.remaining)
                out[f"x-ratelimit-reset-{family}"] = _duration(bucket.until_full())
        return out

    def _tightest_tokens(self) -> TokenBucket | None:
        tokens = [self._buckets[name] for name in ("input", "output") if name in self._buckets]
        return min(tokens, key=lambda b: b.level / b.capacity) if tokens else None


def _family(family: str, bucket: TokenBucket, wall: float) -> dict[str, str]:
    reset = datetime.fromtimestamp(wall + bucket.until_full(), UTC)
    prefix = f"anthropic-ratelimit-{family}"
    return {
        f"{prefix}-limit": str(bucket.capacity),
        f"{prefix}-remaining": str(bucket.remaining),
        f"{prefix}-reset": reset.isoformat(timespec="seconds").replace("+00:00", "Z"),
    }


def _duration(seconds: float) -> str:
    """A duration as OpenAI's rate-limit headers write it (Go's form): `20ms`, `1.5s`, `6m0s`."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    minutes, rest = divmod(round(seconds, 3), 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


async def metered(events: AsyncIterator[E], ticket: Ticket) -> AsyncIterator[E]:
    """`events` (a message's stream) passed on; the ticket settled from its final usage."""
    output: int | None = None
    cache_read = 0
    try:
        async for event in events:
            kind: Any = getattr(event, "type", None)
            usage = getattr(event, "usage", None)
            if kind == "message_delta" and usage is not None:
                output = usage.output_tokens
                cache_read = usage.cache_read_input_tokens or cache_read
            elif kind == "message_start":
                cache_read = event.message.usage.cache_read_input_tokens  # type: ignore[attr-defined]
            yield event
    finally:
        ticket.settle(output, cache_read)
