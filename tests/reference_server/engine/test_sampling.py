"""Reproducible sampling on the real MLX engine (tiny-random): at temperature 1.0 the same request
gives the same tokens, alone or beside other generations, batched or round robin, whatever
`max_tokens`; another prompt or another seed draws another answer (engine/seeds.py,
engine/sampler.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from reference_server.engine.base import EngineRequest, Grammar, Sampling, Turn

pytestmark = pytest.mark.mlx

DEFAULT = Sampling()  # temperature 1.0: what every 2026-10-21 request samples with
PROMPTS = ["Tell me a story.", "Hi", "Write a poem about the sea.", "word " * 300]


def _engine(batching: bool) -> Iterator[Any]:
    from reference_server.engine import load_engine
    from reference_server.engine.mlx import ServingLimits

    engine = load_engine("tiny-random", seed=0, limits=ServingLimits(max_batch=4, batching=batching))
    yield engine
    asyncio.run(engine.aclose())


@pytest.fixture(scope="module", params=[True, False], ids=["batched", "round-robin"])
def engine(request: pytest.FixtureRequest, smollm2_gguf: Any) -> Iterator[Any]:
    yield from _engine(request.param)


def ask(text: str, max_tokens: int = 24, sampling: Sampling = DEFAULT, **fields: Any) -> EngineRequest:
    return EngineRequest("tiny-random", (Turn("user", text),), max_tokens, sampling, **fields)


async def answer(engine: Any, request: EngineRequest) -> str:
    return "".join([delta.text async for delta in engine.generate(request)])


def test_the_same_request_samples_the_same_answer(engine: Any) -> None:
    async def go() -> list[str]:
        return [await answer(engine, ask(PROMPTS[0])) for _ in range(3)]

    first, *again = asyncio.run(go())
    assert first
    assert again == [first, first]


def test_the_answer_is_the_same_beside_other_generations(engine: Any) -> None:
    """Alone, then started together with other sampled and greedy generations (in a batch, or
    interleaved round robin): each request keeps its own answer."""
    greedy = Sampling(temperature=0)
    requests = [ask(p) for p in PROMPTS] + [
        ask(PROMPTS[1], sampling=greedy),
        ask(PROMPTS[2], sampling=Sampling(top_k=5)),
    ]

    async def go() -> tuple[list[str], list[str]]:
        alone = [await answer(engine, r) for r in requests]
        together = await asyncio.gather(*(answer(engine, r) for r in reversed(requests)))
        return alone, list(reversed(together))

    alone, together = asyncio.run(go())
    assert all(alone)
    assert together == alone


def test_max_tokens_does_not_change_the_draw(engine: Any) -> None:
    async def go() -> tuple[str, str]:
        return await answer(engine, ask(PROMPTS[0], 8)), await answer(engine, ask(PROMPTS[0], 24))

    short, long = asyncio.run(go())
    assert short
    assert long.startswith(short)


def test_another_prompt_or_seed_draws_another_answer(engine: Any) -> None:
    async def go() -> tuple[list[str], list[str], str]:
        prompts = [await answer(engine, ask(f"Question {i}: tell me something.")) for i in range(3)]
        seeds = [await answer(engine, ask(PROMPTS[0], sampling=Sampling(seed=s))) for s in range(3)]
        return prompts, seeds, await answer(engine, ask(PROMPTS[0], sampling=Sampling(temperature=0)))

    prompts, seeds, greedy = asyncio.run(go())
    assert len(set(prompts)) == 3
    assert len(set(seeds)) == 3
    assert greedy not in seeds  # it samples: not the argmax


def test_filtered_and_constrained_sampling_are_reproducible(engine: Any) -> None:
    grammar = Grammar('start: "yes" | "no" | "maybe"')
    filtered = Sampling(temperature=0.8, top_p=0.9, top_k=50)

    async def go() -> list[tuple[str, str]]:
        return [
            (
                await answer(engine, ask(PROMPTS[0], sampling=filtered)),
                await answer(engine, ask("Answer", constraint=grammar)),
            )
            for _ in range(2)
        ]

    first, second = asyncio.run(go())
    assert first == second
    assert first[1] in {"yes", "no", "maybe"}
