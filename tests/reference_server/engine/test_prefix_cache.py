"""The prompt cache's accounting under the API's definitions, with a fake clock and small KV
arrays standing in for a model's (no model needed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from reference_server.engine.cache_plan import CachePoint
from reference_server.engine.prefix_cache import PrefixCache

mx = pytest.importorskip("mlx.core")

PROMPT = list(range(100, 160))  # 60 tokens


@dataclass
class Layer:
    keys: Any
    values: Any
    offset: int


@dataclass
class FakeJob:
    prompt: list[int]
    cache_plan: Any
    cache_scope: str = ""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def prefilled(tokens: int) -> list[Layer]:
    """Two layers of KV state for `tokens` positions (what a prefill leaves)."""
    return [Layer(mx.ones((1, 2, tokens, 4)), mx.ones((1, 2, tokens, 4)), tokens) for _ in range(2)]


def run(cache: PrefixCache, prompt: list[int], points: list[CachePoint], scope: str = "") -> Any:
    """Plan, then keep what a finished prefill offers, as the worker does."""
    plan = cache.plan(prompt, points, scope)
    cache.keep(FakeJob(prompt, plan, scope), prefilled(len(prompt) - 1))
    if plan.reuse is not None:
        cache.release(plan.reuse)
    return plan


def test_write_then_read_then_expire() -> None:
    clock = Clock()
    cache = PrefixCache(min_tokens=16, clock=clock)
    first = run(cache, PROMPT, [CachePoint(40, "5m")])
    assert (first.usage.cache_write_5m, first.usage.cache_read, first.usage.uncached) == (40, 0, 20)
    clock.now += 299
    second = run(cache, PROMPT, [CachePoint(40, "5m")])
    assert (second.usage.cache_read, second.usage.cache_write, second.usage.uncached) == (40, 0, 20)
    clock.now += 299  # the read refreshed the TTL: still live
    assert run(cache, PROMPT, [CachePoint(40, "5m")]).usage.cache_read == 40
    clock.now += 301
    expired = run(cache, PROMPT, [CachePoint(40, "5m")]).usage
    assert (expired.cache_read, expired.cache_write_5m) == (0, 40)


def test_two_breakpoints_split_the_write_by_ttl_and_read_the_longest_live_prefix() -> None:
    cache = PrefixCache(min_tokens=16, clock=Clock())
    points = [CachePoint(50, "5m"), CachePoint(20, "1h")]
    usage = run(cache, PROMPT, points).usage
    assert (usage.cache_write_1h, usage.cache_write_5m, usage.uncached) == (20, 30, 10)
    other = PROMPT[:20] + [1] * 40  # shares only the 1h prefix
    usage = run(cache, other, points).usage
    assert (usage.cache_read, usage.cache_write_5m, usage.cache_write_1h) == (20, 30, 0)


def test_short_prefixes_cache_nothing_and_the_end_is_clamped() -> None:
    cache = PrefixCache(min_tokens=16, clock=Clock())
    usage = run(cache, PROMPT, [CachePoint(10, "5m")]).usage
    assert usage.cache_write == usage.cache_read == 0
    assert usage.uncached == len(PROMPT)
    end = run(cache, PROMPT, [CachePoint(len(PROMPT), "5m")]).usage
    assert end.cache_write_5m == len(PROMPT) - 1  # the last token is always read by decoding


def test_automatic_reuse_lends_the_common_start_without_reporting_it() -> None:
    cache = PrefixCache(min_tokens=16, clock=Clock())
    long_prompt = list(range(200))
    run(cache, long_prompt, [])
    plan = cache.plan(long_prompt[:150] + [7] * 20, [])
    assert plan.reuse is not None
    assert plan.reuse_tokens == 150
    assert plan.usage.cache_read == plan.usage.cache_write == 0
    cache.release(plan.reuse)


def test_the_budget_evicts_least_recently_used_but_never_a_lent_entry() -> None:
    per_entry = 2 * 2 * (1 * 2 * 99 * 4) * 4  # 2 layers x (keys + values) x floats x 4 bytes
    cache = PrefixCache(budget_bytes=per_entry * 2, min_tokens=16, clock=Clock())
    prompts = [[n, *list(range(1000, 1099))] for n in range(3)]
    run(cache, prompts[0], [])
    lent = cache.plan(prompts[0], [])
    assert lent.reuse is not None
    run(cache, prompts[1], [])
    run(cache, prompts[2], [])
    held = {e.tokens for e in cache._entries.values()}
    assert held == {tuple(prompts[0][:99]), tuple(prompts[2][:99])}  # the lent one stayed
    cache.release(lent.reuse)
    run(cache, [9, *list(range(1000, 1099))], [])
    assert tuple(prompts[0][:99]) not in {e.tokens for e in cache._entries.values()}
    assert cache.nbytes <= per_entry * 2


def test_a_scope_never_reads_or_reuses_another_scopes_prefixes() -> None:
    """Workspaces: one's cached prefix is neither a cache read nor an automatic reuse for
    another (a hit would tell it what the other sent), and is still the first one's."""
    cache = PrefixCache(min_tokens=16, clock=Clock())
    long_prompt = list(range(200))
    run(cache, long_prompt, [CachePoint(100, "5m")], scope="team-a")
    other = cache.plan(long_prompt, [CachePoint(100, "5m")], "team-b")
    assert other.usage.cache_read == 0
    assert other.usage.cache_write_5m == 100
    assert other.reuse is None
    own = cache.plan(long_prompt, [CachePoint(100, "5m")], "team-a")
    assert own.usage.cache_read == 100
    assert own.reuse is not None
    cache.release(own.reuse)
