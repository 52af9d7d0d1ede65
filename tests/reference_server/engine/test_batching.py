"""Continuous batching, admission and the prompt cache on the real MLX engine (tiny-random).

Solo answers are the same request run alone on the same engine; batched answers come from
requests started together, so their prefills interleave with decode steps of the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from reference_server.engine.base import CacheMark, EngineRequest, Grammar, Sampling, Turn
from reference_server.engine.errors import EngineOverloadedError

pytestmark = pytest.mark.mlx

# Mixed lengths: one token of prompt text up to several prefill chunks (PREFILL_CHUNK = 256).
PROMPTS = ["Hi", "Tell me about dragons. " * 4, "2+2?", "word " * 700, "Write a poem about the sea."]


@pytest.fixture(scope="module")
def engine(smollm2_gguf: Any) -> Iterator[Any]:
    from reference_server.engine import load_engine
    from reference_server.engine.mlx import ServingLimits

    limits = ServingLimits(max_batch=4, max_pending=6, cache_min_tokens=16)
    loaded = load_engine("tiny-random", seed=0, limits=limits)
    yield loaded
    asyncio.run(loaded.aclose())


def ask(engine: Any, text: str, max_tokens: int = 24, **fields: Any) -> EngineRequest:
    turns = fields.pop("turns", None) or (Turn("user", text),)
    return EngineRequest(engine.models()[0].id, turns, max_tokens, Sampling(temperature=0), **fields)


async def answer(engine: Any, request: EngineRequest) -> str:
    return "".join([delta.text async for delta in engine.generate(request)])


async def settle(engine: Any) -> None:
    """Wait until the worker has dropped every job (cancelled ones within a step)."""
    for _ in range(200):
        if engine.active_requests == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{engine.active_requests} generations still active")


def test_the_engine_batches(engine: Any) -> None:
    assert engine.batching
    assert engine.prefix_cache is not None


def test_batched_greedy_output_equals_solo_output(engine: Any) -> None:
    async def go() -> tuple[list[str], list[str]]:
        solo = [await answer(engine, ask(engine, p)) for p in PROMPTS]
        batched = await asyncio.gather(*(answer(engine, ask(engine, p)) for p in PROMPTS))
        return solo, list(batched)

    solo, batched = asyncio.run(go())
    assert all(solo)
    assert batched == solo


@pytest.mark.parametrize("lookahead", [False, True])
def test_rows_leaving_at_different_steps_keep_the_others_answers(
    engine: Any, lookahead: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows end at different steps (their own max_tokens) while the rest go on decoding: with
    the look-ahead step (started before a step's tokens are read) and without it, every answer
    is the one it gets alone; a row that ended has its one computed token too many dropped."""
    from reference_server.engine import batching

    monkeypatch.setattr(batching, "LOOKAHEAD", lookahead)
    limits = [5, 9, 24, 13]

    async def go() -> tuple[list[str], list[str]]:
        requests = [ask(engine, p, max_tokens=n) for p, n in zip(PROMPTS, limits, strict=False)]
        solo = [await answer(engine, r) for r in requests]
        batched = await asyncio.gather(*(answer(engine, r) for r in requests))
        return solo, list(batched)

    solo, batched = asyncio.run(go())
    assert all(solo)
    assert batched == solo


def test_a_grammar_holds_inside_a_batch(engine: Any) -> None:
    grammar = Grammar('start: "yes" | "no"')

    async def go() -> tuple[str, list[str]]:
        solo = await answer(engine, ask(engine, "Answer", constraint=grammar))
        together = await asyncio.gather(
            answer(engine, ask(engine, "Answer", constraint=grammar)),
            answer(engine, ask(engine, "Tell me about dragons.")),
            answer(engine, ask(engine, PROMPTS[3])),
        )
        return solo, list(together)

    solo, together = asyncio.run(go())
    assert solo in {"yes", "no"}
    assert together[0] == solo


def test_sampled_rows_share_a_batch_with_greedy_ones(engine: Any) -> None:
    hot = Sampling(temperature=1.0, top_k=5)

    async def go() -> tuple[str, list[str]]:
        greedy = await answer(engine, ask(engine, PROMPTS[1]))
        sampled = ask(engine, "Hi", max_tokens=16)
        together = await asyncio.gather(
            answer(engine, ask(engine, PROMPTS[1])),
            answer(engine, EngineRequest(sampled.model, sampled.turns, 16, hot)),
        )
        return greedy, list(together)

    greedy, (batched, sampled) = asyncio.run(go())
    assert batched == greedy
    assert sampled  # sampled per row, with its own top_k


def test_cancellation_frees_a_batch_slot(engine: Any) -> None:
    async def go() -> None:
        long = [await engine.start(ask(engine, p, max_tokens=2000)) for p in PROMPTS[:3]]
        first = [await anext(aiter(g)) for g in long]  # all three decoding
        assert all(d.finish is None for d in first)
        assert engine.active_requests == 3
        await long[1].aclose()
        for _ in range(100):
            if engine.active_requests == 2:
                break
            await asyncio.sleep(0.01)
        assert engine.active_requests == 2
        for g in (long[0], long[2]):
            await g.aclose()
        await settle(engine)

    asyncio.run(go())


def test_a_generation_closed_before_its_first_delta_is_dropped(engine: Any) -> None:
    async def go() -> None:
        generation = await engine.start(ask(engine, PROMPTS[3], max_tokens=2000))
        await generation.aclose()
        await settle(engine)

    asyncio.run(go())


def test_a_full_engine_refuses_with_a_retry_delay_and_recovers(engine: Any) -> None:
    async def go() -> None:
        held = [await engine.start(ask(engine, "Hi", max_tokens=2000)) for _ in range(6)]
        with pytest.raises(EngineOverloadedError) as refused:
            await engine.start(ask(engine, "Hi"))
        assert refused.value.retry_after >= 1
        for generation in held:
            await generation.aclose()
        await settle(engine)
        assert await answer(engine, ask(engine, "Hi"))

    asyncio.run(go())


SYSTEM = "You are a careful assistant. " * 12  # well over cache_min_tokens


def cached(engine: Any, question: str, ttl: str = "5m", **fields: Any) -> EngineRequest:
    turns = (
        Turn("system", SYSTEM, cache_marks=(CacheMark(len(SYSTEM), ttl),)),  # type: ignore[arg-type]
        Turn("user", question),
    )
    return ask(engine, "", turns=turns, **fields)


def test_a_breakpoint_writes_then_reads_its_prefix(engine: Any) -> None:
    async def go() -> None:
        first = await engine.start(cached(engine, "Who are you?"))
        text = "".join([d.text async for d in first])
        await settle(engine)
        second = await engine.start(cached(engine, "Who are you?"))
        again = "".join([d.text async for d in second])
        written, read = first.usage, second.usage
        assert written.cache_read == 0
        assert written.cache_write_5m > 16
        assert read.cache_read == written.cache_write_5m
        assert read.cache_write == 0
        assert read.tokens == written.tokens
        assert read.uncached == written.tokens - read.cache_read
        assert again == text  # generation from the restored KV state is unchanged
        other = await engine.start(cached(engine, "What can you do?"))
        [d async for d in other]
        assert other.usage.cache_read == written.cache_write_5m  # same prefix, other question

    asyncio.run(go())


def test_the_ttl_breakdown_follows_the_breakpoint(engine: Any) -> None:
    async def go() -> None:
        generation = await engine.start(cached(engine, "A fresh question for 1h?", ttl="1h", max_tokens=2))
        [d async for d in generation]
        usage = generation.usage
        # The system prefix may already be cached by the 5m test: then it is a read.
        assert usage.cache_write_5m == 0
        assert usage.cache_write_1h + usage.cache_read > 16

    asyncio.run(go())


def test_a_prefix_under_the_minimum_caches_nothing(engine: Any) -> None:
    async def go() -> None:
        turns = (Turn("system", "Be brief.", cache_marks=(CacheMark(9, "5m"),)), Turn("user", "Hi"))
        for _ in range(2):
            generation = await engine.start(ask(engine, "", turns=turns, max_tokens=2))
            [d async for d in generation]
            assert generation.usage.cache_read == generation.usage.cache_write == 0

    asyncio.run(go())


def test_max_tokens_zero_prewarms_the_cache(engine: Any) -> None:
    async def go() -> None:
        question = "Pre-warmed?"
        warm = await engine.start(cached(engine, question, max_tokens=0))
        deltas = [d async for d in warm]
        assert [(d.text, d.finish) for d in deltas] == [("", "length")]
        await settle(engine)
        hit = await engine.start(cached(engine, question, max_tokens=2))
        [d async for d in hit]
        assert hit.usage.cache_read > 16

    asyncio.run(go())


def test_automatic_prefix_reuse_gives_the_same_answer_and_reports_nothing(engine: Any) -> None:
    async def go() -> None:
        cache = engine.prefix_cache
        text = "Some long shared context. " * 30
        first = await answer(engine, ask(engine, text + " First?"))
        held = len(cache)
        assert held >= 1
        generation = await engine.start(ask(engine, text + " First?"))
        again = "".join([d.text async for d in generation])
        assert again == first
        assert generation.usage.cache_read == generation.usage.cache_write == 0

    asyncio.run(go())
