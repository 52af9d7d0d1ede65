"""Grammar constraints on the embedded SmolLM2-135M-Instruct (a few seconds per generation)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
import pytest

from reference_server.engine import EngineRequest, Grammar, GrammarError, Sampling, Turn

pytestmark = [pytest.mark.mlx, pytest.mark.smollm2]

MODEL = "smollm2-135m-instruct"
GREEDY = Sampling(temperature=0)
YES_NO = Grammar('start: "yes" | "no"')
# Bounded strings, arrays and whitespace: even a sampled generation must end (within ~500
# tokens at worst; about 100 in practice).
PET_SCHEMA: dict[str, Any] = {
    "x-guidance": {"whitespace_pattern": "[ \n]{0,6}"},
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 100},
        "species": {"enum": ["cat", "dog", "fish"]},
        "toys": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 3},
        "owner": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 40},
                "city": {"type": "string", "maxLength": 40},
            },
            "required": ["name", "city"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "age", "species", "toys", "owner"],
    "additionalProperties": False,
}
PET_GRAMMAR = Grammar(f"start: %json {json.dumps(PET_SCHEMA)}")


def ask(
    prompt: str, grammar: Grammar | None, *, max_tokens: int = 200, sampling: Sampling = GREEDY
) -> EngineRequest:
    return EngineRequest(
        model=MODEL,
        turns=(Turn("user", prompt),),
        max_tokens=max_tokens,
        sampling=sampling,
        constraint=grammar,
    )


def text_of(deltas: list[Any]) -> str:
    return "".join(d.text for d in deltas)


@pytest.mark.parametrize("sampling", [GREEDY, Sampling(temperature=1.0)], ids=["greedy", "sampled"])
def test_yes_or_no(smollm2_engine: Any, collect: Any, sampling: Sampling) -> None:
    for prompt in ("Is Paris in France? Answer yes or no.", "Write a poem about the sea."):
        deltas = collect(smollm2_engine, ask(prompt, YES_NO, sampling=sampling))
        assert text_of(deltas) in {"yes", "no"}
        assert deltas[-1].finish == "stop"


@pytest.mark.slow
@pytest.mark.parametrize("sampling", [GREEDY, Sampling(temperature=0.7)], ids=["greedy", "sampled"])
def test_json_schema_output_validates(smollm2_engine: Any, collect: Any, sampling: Sampling) -> None:
    for prompt in (
        "My dog Rex is 3 and lives with Ana in Lisbon. Give me his record as JSON.",
        "Write a haiku about the sea.",
    ):
        deltas = collect(smollm2_engine, ask(prompt, PET_GRAMMAR, max_tokens=600, sampling=sampling))
        assert deltas[-1].finish == "stop", text_of(deltas)
        jsonschema.validate(json.loads(text_of(deltas)), PET_SCHEMA)


def test_max_tokens_inside_the_grammar_ends_with_length(smollm2_engine: Any, collect: Any) -> None:
    prompt = "My dog Rex is 3. Give me his record as JSON."
    deltas = collect(smollm2_engine, ask(prompt, PET_GRAMMAR, max_tokens=8))
    assert deltas[-1].finish == "length"
    assert deltas[-1].output_tokens == 8
    text = text_of(deltas)
    assert text.startswith("{")
    longer = text_of(collect(smollm2_engine, ask(prompt, PET_GRAMMAR, max_tokens=12)))
    assert longer.startswith(text)  # greedy: the same generation, cut later


@pytest.mark.parametrize(
    "grammar",
    [Grammar("start: nothing_defined"), Grammar('start: %json {"type": "object", "not": {}}')],
    ids=["invalid", "unsupported-schema"],
)
def test_bad_grammar_fails_before_any_token(smollm2_engine: Any, grammar: Grammar) -> None:
    async def go() -> None:
        with pytest.raises(GrammarError):
            await anext(smollm2_engine.generate(ask("Hi", grammar)))

    asyncio.run(go())
    assert smollm2_engine.active_requests == 0


def test_constrained_and_free_jobs_run_together(smollm2_engine: Any, collect: Any) -> None:
    constrained = ask("Is Paris in France? Answer yes or no.", YES_NO)
    free = ask("What is the capital of France?", None, max_tokens=10)
    solo = [collect(smollm2_engine, constrained), collect(smollm2_engine, free)]

    async def both() -> list[list[Any]]:
        async def run(req: EngineRequest) -> list[Any]:
            return [d async for d in smollm2_engine.generate(req)]

        return list(await asyncio.gather(run(constrained), run(free)))

    assert asyncio.run(both()) == solo
    assert text_of(solo[0]) in {"yes", "no"}
