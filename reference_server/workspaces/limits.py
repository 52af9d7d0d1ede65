"""Rate limits per key: each key its own buckets, at its own limits (the keys file's
`rate_limit_*`) or the server's (`--rate-limit-*`); a server without keys has one set of
buckets, as before. A key's buckets outlive a reload of the keys file (found again by the key)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from reference_server.ratelimits import Limits, RateLimiter
from reference_server.workspaces.keys import KeyEntry

__all__ = ["KeyLimiters"]


class KeyLimiters:
    def __init__(self, default: Limits, make: Callable[[Limits], RateLimiter] = RateLimiter) -> None:
        """`make`: a key's buckets from its limits (tests give one with a clock of their own)."""
        self.default = default
        self._make = make
        self._anonymous = make(default) if default.on else None
        # By key and its limits: a reload that changes a key's limits gives it new buckets.
        self._by_key: dict[tuple[str, Limits | None], RateLimiter | None] = {}
        self._lock = threading.Lock()

    def of(self, entry: KeyEntry | None) -> RateLimiter | None:
        """The buckets of the request's key (None: not limited)."""
        if entry is None:
            return self._anonymous
        slot = (entry.key, entry.limits)
        with self._lock:
            if slot not in self._by_key:
                limits = entry.limits or self.default
                self._by_key[slot] = self._make(limits) if limits.on else None
            return self._by_key[slot]

    def forget_others(self, keys: set[str]) -> None:
        """Drop the buckets of keys no longer held (a reload removed them)."""
        with self._lock:
            self._by_key = {slot: bucket for slot, bucket in self._by_key.items() if slot[0] in keys}
