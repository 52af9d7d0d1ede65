"""Optional rate limits (`--rate-limit-rpm`, `--rate-limit-itpm`, `--rate-limit-otpm`): token
buckets as the API documents them, a 429 `rate_limit_error` with `retry-after` past them, and
the `anthropic-ratelimit-*` headers on every response while they are on."""

from reference_server.ratelimits.limiter import Limits, RateLimiter, Ticket, metered

__all__ = ["Limits", "RateLimiter", "Ticket", "metered"]
