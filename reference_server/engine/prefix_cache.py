"""Prompt caching: KV states of prompt prefixes, kept in memory and lent to later requests.

Two uses share one store, bounded by a byte budget and evicted least recently used first:
- automatic prefix reuse: every prefill offers its prompt's KV state; a later prompt that
  shares a prefix with an entry (a common start, not necessarily the whole entry) starts from a
  copy of it and prefills only the rest. It makes agents' resent prefixes cheap, and the API
  reports nothing for it (no breakpoint asked for caching);
- `cache_control` breakpoints, as the API documents them: the prefix up to a breakpoint is
  written (`cache_creation_input_tokens`, by TTL) unless an entry written for exactly that
  prefix is live, in which case it is read (`cache_read_input_tokens`) and its TTL refreshed.
  A breakpoint whose prefix is shorter than `min_tokens` (the model's minimum cacheable length)
  caches nothing. `input_tokens` is what remains.

`plan` runs on the event loop when a generation is admitted (its usage goes out in
`message_start`, before any work) and pins the entry it lends, so eviction cannot take it
before the worker has copied it; `restore`, `keep` and `release` run on the worker thread, the
only one that touches MLX arrays. Entries become visible only once their KV state exists, so a
read is always a real read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .base import CacheTTL, PromptUsage
from .cache_plan import CachePlan, CachePoint, Entry
from .jobs import Job

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "DEFAULT_MIN_TOKENS",
    "TTL_SECONDS",
    "PrefixCache",
]

TTL_SECONDS: dict[CacheTTL, float] = {"5m": 300.0, "1h": 3600.0}
# The API's smallest minimum cacheable prompt (its Sonnet and Opus 4 models).
DEFAULT_MIN_TOKENS = 1024
# SmolLM2-135M's float32 KV state is 30 layers x 2 x 3 heads x 64 x 4 bytes = 92 KiB per token:
# 1 GiB holds about 11k tokens of prefixes.
DEFAULT_BUDGET_BYTES = 1 << 30
# Prompts shorter than this are not kept for automatic reuse: re-reading them is cheap.
AUTOMATIC_MIN_TOKENS = 64


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class PrefixCache:
    """The store of prompt-prefix KV states; see the module docstring."""

    def __init__(
        self,
        *,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        min_tokens: int = DEFAULT_MIN_TOKENS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """At most `budget_bytes` of KV state; breakpoints below `min_tokens` cache nothing."""
        if budget_bytes < 0 or min_tokens < 1:
            raise ValueError("budget_bytes must be >= 0 and min_tokens >= 1")
        self.budget_bytes = budget_bytes
        self.min_tokens = min_tokens
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, tuple[int, ...]], Entry] = {}  # by (scope, tokens)

    @property
    def nbytes(self) -> int:
        """Bytes of KV state held."""
        with self._lock:
            return sum(e.nbytes for e in self._entries.values())

    def __len__(self) -> int:
        """Entries held."""
        with self._lock:
            return len(self._entries)

    def plan(self, prompt: Sequence[int], points: Sequence[CachePoint], scope: str = "") -> CachePlan:
        """Usage and reuse for `prompt` with breakpoints `points` (any order), from the entries
        of `scope` alone; pins the lent entry until `release`. Thread-safe, no MLX."""
        now = self._clock()
        # The last prompt token is always fed by the decode step, so at most len - 1 are lent.
        usable = len(prompt) - 1
        # A breakpoint at the very end caches all but the last token, which the decode step reads.
        clamped = (CachePoint(min(p.position, usable), p.ttl) for p in points)
        eligible = sorted((p for p in clamped if p.position >= self.min_tokens), key=lambda p: p.position)
        with self._lock:
            read, hit = 0, None
            for point in eligible:
                entry = self._entries.get((scope, tuple(prompt[: point.position])))
                if entry is not None and entry.written_until > now:
                    read, hit = point.position, entry
            if hit is not None:  # a read refreshes the entry's TTL
                ttl = max(TTL_SECONDS[p.ttl] for p in eligible if p.position == read)
                hit.written_until = max(hit.written_until, now + ttl)
                hit.last_used = now
            writes: list[CachePoint] = []
            w5 = w1 = 0
            covered = read
            for point in eligible:
                if point.position <= covered:
                    continue
                w5 += point.position - covered if point.ttl == "5m" else 0
                w1 += point.position - covered if point.ttl == "1h" else 0
                covered = point.position
                writes.append(point)
            reuse, reuse_tokens = None, 0
            for entry in self._entries.values():
                if entry.scope != scope:
                    continue
                n = min(_common(entry.tokens, prompt), usable)
                if n > reuse_tokens:
                    reuse, reuse_tokens = entry, n
            if reuse is not None:
                reuse.pins += 1
                reuse.last_used = now
        usage = PromptUsage(len(prompt), cache_read=read, cache_write_5m=w5, cache_write_1h=w1)
        return CachePlan(usage, reuse, reuse_tokens, writes)

    def release(self, entry: Entry) -> None:
        """Unpin an entry `plan` lent."""
        with self._lock:
            entry.pins -= 1

    def restore(self, plan: CachePlan, cache: list[Any]) -> int:
        """Fill `cache` (a fresh per-layer KV cache) with the lent prefix; return its length.
        Worker thread only."""
        entry, n = plan.reuse, plan.reuse_tokens
        if entry is None or n == 0:
            return 0
        for layer, (keys, values) in zip(cache, entry.kv, strict=True):
            # Exactly n positions, no spare capacity: the next update reallocates, so the
            # entry's arrays are never written through this cache.
            layer.keys = keys[..., :n, :]
            layer.values = values[..., :n, :]
            layer.offset = n
        return n

    def keep(self, job: Job, cache: list[Any]) -> None:
        """Offer a finished prefill's KV state: each breakpoint prefix the plan writes, and the
        whole prefilled prompt for automatic reuse. Worker thread only."""
        import mlx.core as mx

        plan = job.cache_plan
        filled = int(cache[0].offset) if cache else 0
        wanted: dict[int, float] = {}
        now = self._clock()
        for point in plan.writes if plan is not None else ():
            if point.position <= filled:
                until = now + TTL_SECONDS[point.ttl]
                wanted[point.position] = max(wanted.get(point.position, 0.0), until)
        if filled >= AUTOMATIC_MIN_TOKENS:
            wanted.setdefault(filled, 0.0)
        for position, until in sorted(wanted.items()):
            tokens = tuple(job.prompt[:position])
            key = (job.cache_scope, tokens)
            with self._lock:
                existing = self._entries.get(key)
                if existing is not None:
                    existing.written_until = max(existing.written_until, until)
                    existing.last_used = now
                    continue
            kv = [
                (mx.contiguous(c.keys[..., :position, :]), mx.contiguous(c.values[..., :position, :]))
                for c in cache
            ]
            mx.eval(kv)
            nbytes = sum(k.nbytes + v.nbytes for k, v in kv)
            if nbytes > self.budget_bytes:
                continue
            with self._lock:
                self._entries[key] = Entry(
                    tokens, kv, nbytes, now, written_until=until, scope=job.cache_scope
                )
                self._evict()

    def _evict(self) -> None:
        # Least recently used first; lent (pinned) entries stay until released.
        total = sum(e.nbytes for e in self._entries.values())
        for entry in sorted(self._entries.values(), key=lambda e: e.last_used):
            if total <= self.budget_bytes:
                return
            if entry.pins == 0:
                del self._entries[(entry.scope, entry.tokens)]
                total -= entry.nbytes
