"""One token bucket per limit, as the API's rate limits page describes them: the capacity is the
per-minute limit, replenished continuously (limit / 60 per second) rather than reset each minute.

No well-kept library fits: the output-token limit charges `max_tokens` on admission and gives
back what was not generated at the end (the API's "estimated ... and adjusted"), a refund the
usual limiters (limits, pyrate-limiter) do not have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["TokenBucket"]


@dataclass(slots=True)
class TokenBucket:
    capacity: int  # the per-minute limit
    level: float  # what can be taken now
    stamp: float  # monotonic time of `level`

    @classmethod
    def full(cls, capacity: int, now: float) -> TokenBucket:
        return cls(capacity, float(capacity), now)

    @property
    def rate(self) -> float:
        """Replenished per second."""
        return self.capacity / 60.0

    def refill(self, now: float) -> None:
        self.level = min(float(self.capacity), self.level + max(0.0, now - self.stamp) * self.rate)
        self.stamp = now

    def wait(self, cost: int) -> float:
        """Seconds until `cost` can be taken (after `refill`); inf if it never can."""
        if cost > self.capacity:
            return math.inf
        return max(0.0, (cost - self.level) / self.rate)

    def take(self, cost: int) -> None:
        self.level -= cost

    def give_back(self, amount: int) -> None:
        self.level = min(float(self.capacity), self.level + max(0, amount))

    def until_full(self) -> float:
        """Seconds until the bucket is full again (after `refill`)."""
        return (self.capacity - self.level) / self.rate

    @property
    def remaining(self) -> int:
        return max(0, math.floor(self.level))
