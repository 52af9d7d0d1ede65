"""The real MLX engine path on tiny-random: a seeded 2-layer llama with SmolLM2's tokenizer."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import pytest

from reference_server.engine import (
    EngineClosedError,
    EngineRequest,
    PromptTooLongError,
    Sampling,
    Turn,
    UnknownModelError,
    load_engine,
)

pytestmark = pytest.mark.mlx

GREEDY = Sampling(temperature=0)


def request(text: str = "Tell me a story.", max_tokens: int = 24, **sampling: Any) -> EngineRequest:
    return EngineRequest(
        model="tiny-random",
        turns=(Turn("user", text),),
        max_tokens=max_tokens,
        sampling=Sampling(**sampling) if sampling else GREEDY,
    )


def text_of(deltas: list[Any]) -> str:
    return "".join(d.text for d in deltas)


def wait_idle(engine: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while engine.active_requests and time.monotonic() < deadline:
        time.sleep(0.005)
    assert engine.active_requests == 0


def test_model_card(tiny_engine: Any) -> None:
    (card,) = tiny_engine.models()
    assert card.id == "tiny-random"
    assert card.context_window == card.max_output_tokens == 2048
    assert card.created_at.tzinfo is not None


def test_greedy_is_reproducible(tiny_engine: Any, collect: Any) -> None:
    first = collect(tiny_engine, request())
    second = collect(tiny_engine, request())
    assert first == second
    assert text_of(first)


def test_max_tokens_finishes_with_length(tiny_engine: Any, collect: Any) -> None:
    deltas = collect(tiny_engine, request(max_tokens=7))
    assert deltas[-1].finish == "length"
    assert deltas[-1].output_tokens == 7
    assert all(d.finish is None for d in deltas[:-1])
    counts = [d.output_tokens for d in deltas]
    assert counts == sorted(counts)
    assert all(d.text for d in deltas[:-1])


def test_max_tokens_zero_is_one_final_delta(tiny_engine: Any, collect: Any) -> None:
    deltas = collect(tiny_engine, request(max_tokens=0))
    assert [(d.text, d.output_tokens, d.finish) for d in deltas] == [("", 0, "length")]


def test_count_tokens_matches_the_prompt_generate_feeds(tiny_engine: Any) -> None:
    req = request("Count me, please.")
    expected = len(tiny_engine.tokenizer.encode_turns(req.turns))
    assert asyncio.run(tiny_engine.count_tokens(req)) == expected


def test_prefill_continues_the_assistant_turn(tiny_engine: Any, collect: Any) -> None:
    with_prefill = EngineRequest(
        model="tiny-random",
        turns=(Turn("user", "Hi"), Turn("assistant", "Sure, here")),
        max_tokens=5,
        sampling=GREEDY,
    )
    ids = tiny_engine.tokenizer.encode_turns(with_prefill.turns)
    assert tiny_engine.tokenizer.decode(ids).endswith("<|im_start|>assistant\nSure, here")
    assert collect(tiny_engine, with_prefill)[-1].output_tokens == 5


def test_closing_the_iterator_stops_generation(tiny_engine: Any, collect: Any) -> None:
    async def go() -> list[Any]:
        stream = tiny_engine.generate(request(max_tokens=2000))
        seen = [await anext(stream) for _ in range(3)]
        await stream.aclose()
        return seen

    seen = asyncio.run(go())
    assert [d.output_tokens for d in seen] == [1, 2, 3]
    wait_idle(tiny_engine, timeout=1.0)
    # The worker is free again: a new request runs to completion.
    assert collect(tiny_engine, request(max_tokens=4))[-1].finish == "length"


def test_cancelling_the_consumer_task_stops_generation(tiny_engine: Any) -> None:
    async def go() -> None:
        started = asyncio.Event()

        async def consume() -> None:
            async for _ in tiny_engine.generate(request(max_tokens=2000)):
                started.set()

        task = asyncio.create_task(consume())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    wait_idle(tiny_engine, timeout=1.0)


def test_concurrent_requests_match_their_solo_results(tiny_engine: Any, collect: Any) -> None:
    a, b = request("First prompt.", max_tokens=20), request("A second, longer prompt.", 30)
    solo_a, solo_b = collect(tiny_engine, a), collect(tiny_engine, b)

    async def both() -> tuple[list[Any], list[Any]]:
        async def run(req: EngineRequest) -> list[Any]:
            return [d async for d in tiny_engine.generate(req)]

        together = await asyncio.gather(run(a), run(b))
        return together[0], together[1]

    together_a, together_b = asyncio.run(both())
    assert text_of(together_a) == text_of(solo_a)
    assert text_of(together_b) == text_of(solo_b)
    assert together_a[-1].output_tokens == 20
    assert together_b[-1].output_tokens == 30


def test_top_k_1_equals_greedy(tiny_engine: Any, collect: Any) -> None:
    greedy = text_of(collect(tiny_engine, request()))
    assert text_of(collect(tiny_engine, request(temperature=1.0, top_k=1))) == greedy


def test_tiny_top_p_equals_greedy(tiny_engine: Any, collect: Any) -> None:
    greedy = text_of(collect(tiny_engine, request()))
    assert text_of(collect(tiny_engine, request(temperature=1.0, top_p=1e-6))) == greedy


def test_temperature_samples(tiny_engine: Any, collect: Any) -> None:
    """Each seed draws its own answer (the same request and seed: the same one, test_sampling.py)."""
    greedy = text_of(collect(tiny_engine, request()))
    samples = {text_of(collect(tiny_engine, request(temperature=1.0, seed=seed))) for seed in range(3)}
    assert len(samples) > 1
    assert samples != {greedy}


def test_prompt_longer_than_the_context_window(tiny_engine: Any, collect: Any) -> None:
    long = request("word " * 3000)
    with pytest.raises(PromptTooLongError) as caught:
        asyncio.run(tiny_engine.count_tokens(long))
    assert caught.value.limit == 2048
    assert caught.value.prompt_tokens > 2048
    with pytest.raises(PromptTooLongError):
        collect(tiny_engine, long)


def test_unknown_model_is_rejected(tiny_engine: Any, collect: Any) -> None:
    other = EngineRequest(model="someone-else", turns=(Turn("user", "Hi"),), max_tokens=1)
    with pytest.raises(UnknownModelError):
        collect(tiny_engine, other)


def test_closed_engine_refuses_requests_and_frees_the_model(smollm2_gguf: Any, collect: Any) -> None:
    import mlx.core as mx

    # Arrays of earlier tests that are already unreachable would otherwise be collected during
    # the load and hide the model's own bytes (seen in CI: +8.9 MB instead of +25 MB).
    gc.collect()
    before = mx.get_active_memory()
    engine = load_engine("tiny-random", seed=1)
    loaded = mx.get_active_memory()
    assert loaded - before > 20e6  # two 49152 x 64 float32 matrices, at least
    asyncio.run(engine.aclose())
    assert mx.get_active_memory() - before < 1e6
    asyncio.run(engine.aclose())  # idempotent
    with pytest.raises(EngineClosedError):
        collect(engine, request())


def test_long_prefill_does_not_stall_other_streams(tiny_engine: Any) -> None:
    # A prompt of several prefill chunks is fed one chunk per round: a stream that is already
    # decoding keeps receiving tokens meanwhile.
    async def go() -> list[str]:
        order: list[str] = []

        async def run(name: str, req: EngineRequest) -> None:
            async for _ in tiny_engine.generate(req):
                order.append(name)

        short = asyncio.create_task(run("short", request("Hi", max_tokens=200)))
        while not order:
            await asyncio.sleep(0.001)
        await run("long", request("lorem ipsum " * 300, max_tokens=1))
        await short
        return order

    order = asyncio.run(go())
    first_long = order.index("long")
    assert order[:first_long].count("short") >= 5


def test_top_k_beyond_the_vocabulary_restricts_nothing(tiny_engine: Any, collect: Any) -> None:
    deltas = collect(tiny_engine, request(max_tokens=3, temperature=1.0, top_k=10**6))
    assert deltas[-1].output_tokens == 3
