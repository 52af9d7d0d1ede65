"""Speculative decoding (engine/speculative.py, batching.py's `_speculate`): the drafter's
rules without MLX, then the engine with drafting on against the same engine with it off, on
tiny-random (CI) and SmolLM2: the same tokens, greedy and sampled, under a grammar, at
`max_tokens`, and drafts actually verified and kept where the output repeats its prompt."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from reference_server.engine.base import EngineRequest, Grammar, Sampling, Turn
from reference_server.engine.speculative import MAX_DRAFT, Drafter

CSV = "name,age,city\n" + "\n".join(f"person{i},{20 + i},City{i}" for i in range(12))
PROMPTS = [f"Copy this CSV exactly:\n\n{CSV}", "Write a short story about a cat.", "Count from 1 to 20."]


def test_a_draft_continues_the_latest_earlier_occurrence() -> None:
    drafter = Drafter([1, 2, 3, 4, 5, 9, 9, 1, 2, 3, 4, 6, 7, 8, 1, 2, 3, 4])
    # [1, 2, 3, 4] occurred twice before: the later one is followed by 6, 7, 8.
    assert drafter.draft(3) == [6, 7, 8]
    # Past the sequence's end, the draft repeats the loop the match implies.
    drafter.kept(4, 4)  # the first draft is half the longest; all kept, the longest
    assert drafter.draft(100) == [6, 7, 8, 1, 2, 3, 4, 6]
    assert Drafter([5, 1, 2, 3, 1, 2, 3]).draft(3) == [1, 2, 3]
    assert Drafter([1, 2, 3, 4, 5]).draft(4) == []  # the suffix is its own only occurrence


def test_a_three_token_suffix_matches_when_four_do_not() -> None:
    assert Drafter([7, 2, 3, 4, 5, 1, 2, 3, 4]).draft(2) == [5, 1]
    assert Drafter([7, 3, 4, 5, 1, 2, 4, 5]).draft(2) == []  # two tokens are chance


def test_a_miss_rests_the_drafter_longer_each_time_and_a_hit_grows_the_draft() -> None:
    drafter = Drafter([1, 2, 3, 4] * 10)
    assert len(drafter.draft(100)) == MAX_DRAFT // 2  # half the longest to begin with
    drafter.kept(MAX_DRAFT // 2, MAX_DRAFT // 2)  # all kept: the longest next
    assert len(drafter.draft(100)) == MAX_DRAFT
    drafter.kept(MAX_DRAFT, 0)
    assert drafter.resting
    assert drafter.draft(100) == []
    drafter.extend([1, 2, 3, 4])  # four tokens of rest
    assert not drafter.resting
    assert len(drafter.draft(100)) == 2  # shrunk after the miss
    drafter.kept(2, 0)
    drafter.extend([1, 2, 3, 4])
    assert drafter.resting  # eight tokens this time
    drafter.extend([1, 2, 3, 4])
    drafter.kept(2, 2)  # all kept: guess twice as far
    assert len(drafter.draft(100)) == 4
    drafter.kept(4, 1)
    assert len(drafter.draft(100)) == 2


@pytest.fixture(scope="module", params=["tiny-random", "smollm2-135m-instruct"])
def engines(request: pytest.FixtureRequest, smollm2_gguf: Any) -> Iterator[tuple[Any, Any]]:
    """(drafting, plain) engines on the same model."""
    from reference_server.engine import load_engine
    from reference_server.engine.mlx import ServingLimits

    # tiny-random is served in float32 by default: drafts are verified on the q4 kernel only.
    precision = "q4" if request.param == "tiny-random" else "auto"
    pair = [
        load_engine(request.param, seed=0, precision=precision, limits=ServingLimits(speculative=on))
        for on in (True, False)
    ]
    if not pair[0]._scheduler._speculative:
        pytest.skip("no CPU kernel here: nothing to verify drafts with")
    yield pair[0], pair[1]
    for engine in pair:
        asyncio.run(engine.aclose())


async def generate(
    engine: Any, text: str, max_tokens: int = 96, **fields: Any
) -> tuple[str, int, str | None]:
    request = EngineRequest(engine.models()[0].id, (Turn("user", text),), max_tokens, **fields)
    parts, count, finish = [], 0, None
    async for delta in engine.generate(request):
        parts.append(delta.text)
        count, finish = delta.output_tokens, delta.finish
    return "".join(parts), count, finish


def both(engines: tuple[Any, Any], text: str, **fields: Any) -> tuple[Any, Any, tuple[int, int, int]]:
    drafting, plain = engines
    before = drafting.speculation
    got = asyncio.run(generate(drafting, text, **fields))
    counts = tuple(b - a for a, b in zip(before, drafting.speculation, strict=True))
    return got, asyncio.run(generate(plain, text, **fields)), counts  # type: ignore[return-value]


@pytest.mark.mlx
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_drafting_changes_no_token(engines: tuple[Any, Any], temperature: float) -> None:
    verified = kept = 0
    # Greedy, 48 tokens a prompt show drafts kept; sampled answers wander: 96.
    max_tokens = 48 if temperature == 0 else 96
    for text in PROMPTS:
        got, want, (_runs, drafted, accepted) = both(
            engines, text, max_tokens=max_tokens, sampling=Sampling(temperature=temperature)
        )
        assert got == want
        verified, kept = verified + drafted, kept + accepted
    # Drafts were verified, and where the answer repeats itself, kept.
    assert verified > 0
    assert kept > 0


@pytest.mark.mlx
def test_an_echo_is_mostly_drafted(engines: tuple[Any, Any]) -> None:
    if engines[0].models()[0].id == "tiny-random":
        pytest.skip("tiny-random's answers are noise: they echo nothing")
    got, want, (runs, _drafted, accepted) = both(engines, PROMPTS[0], sampling=Sampling(temperature=0))
    assert got == want
    assert "person3,23,City3" in got[0]
    assert accepted >= got[1] // 2  # at least half the answer came from drafts
    load = engines[0].load()  # what /metrics shows
    assert load.kept >= accepted
    assert load.drafted >= load.kept
    assert runs < got[1] // 4  # in a few passes


@pytest.mark.mlx
def test_a_grammar_bounds_the_drafts(engines: tuple[Any, Any]) -> None:
    # The answer must be one of the prompt's lines: drafts past it are cut by the grammar.
    lines = CSV.split("\n")
    alternatives = " | ".join(f'"{line}"' for line in lines[:4])
    grammar = Grammar(f'start: ({alternatives}) "\\n" ({alternatives})')
    got, want, _ = both(engines, PROMPTS[0], sampling=Sampling(temperature=0), constraint=grammar)
    assert got == want
    assert got[2] == "stop"
    first, second = got[0].split("\n")
    assert first in lines
    assert second in lines


@pytest.mark.mlx
@pytest.mark.parametrize("max_tokens", [1, 7, 20])
def test_max_tokens_holds_with_drafts(engines: tuple[Any, Any], max_tokens: int) -> None:
    got, want, _ = both(engines, PROMPTS[0], max_tokens=max_tokens, sampling=Sampling(temperature=0))
    assert got == want
    assert got[1] <= max_tokens
