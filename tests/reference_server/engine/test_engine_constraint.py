"""Grammar constraints (llguidance): compiling, the mask, and constrained generation on tiny-random.

tiny-random's weights are random, so its schemas bound every string, number and array: the
grammar alone must bring generation to an end, whatever the model prefers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
import numpy as np
import pytest

from reference_server.engine import (
    ConstraintError,
    EngineRequest,
    Grammar,
    GrammarError,
    Sampling,
    Turn,
    check_grammar,
)
from reference_server.engine.scripted import ScriptedEngine

GREEDY = Sampling(temperature=0)
YES_NO = Grammar('start: "yes" | "no"')
INVALID = Grammar("start: undefined_rule")
UNSUPPORTED = Grammar('start: %json {"type": "array", "uniqueItems": true}')

# Every field bounded, compact JSON: a random model must finish within a few hundred tokens.
BOUNDED_SCHEMA: dict[str, Any] = {
    "x-guidance": {"whitespace_flexible": False},
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "kind": {"enum": ["cat", "dog", "fish"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
        "home": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 10},
                "floor": {"type": "integer", "maximum": 9},
            },
            "required": ["city", "floor"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "age", "kind", "tags", "home"],
    "additionalProperties": False,
}
PROMPTS = ("Describe a pet as JSON.", "Tell me a story.", "{}", "Réponds en JSON, s'il te plaît 🎉")


def json_grammar(schema: dict[str, Any]) -> Grammar:
    return Grammar(f"start: %json {json.dumps(schema)}")


def text_of(deltas: list[Any]) -> str:
    return "".join(d.text for d in deltas)


# --- compiling, no model ---------------------------------------------------------------


def test_check_grammar_accepts_lark_and_embedded_json_schemas() -> None:
    check_grammar(YES_NO)
    check_grammar(json_grammar(BOUNDED_SCHEMA))
    check_grammar(Grammar('start: "a" <|im_end|>'))  # special tokens: checked only with a model


@pytest.mark.parametrize(
    ("grammar", "message"),
    [
        (INVALID, "unknown name"),
        (UNSUPPORTED, "uniqueItems"),
        (Grammar('start: %json {"type": "string", "format": "no-such-format"}'), "no-such-format"),
        (Grammar('start: %json {"type": "string", "pattern": "(?=a)"}'), "look-around"),
        (Grammar('start: %json {"$ref": "http://example.com/schema"}'), "example.com"),
    ],
)
def test_check_grammar_reports_llguidances_message(grammar: Grammar, message: str) -> None:
    with pytest.raises(GrammarError, match="invalid grammar") as caught:
        check_grammar(grammar)
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)  # serving answers 400


def test_scripted_engine_validates_the_grammar_before_any_delta() -> None:
    engine = ScriptedEngine("yes")

    async def go(grammar: Grammar) -> list[Any]:
        req = EngineRequest(model="scripted", turns=(Turn("user", "?"),), max_tokens=5, constraint=grammar)
        return [d async for d in engine.generate(req)]

    assert text_of(asyncio.run(go(YES_NO))) == "yes"
    with pytest.raises(GrammarError):
        asyncio.run(go(UNSUPPORTED))
    assert engine.cancelled == 0  # it never started


# --- the compiler and the mask on SmolLM2's vocabulary ------------------------------------


@pytest.fixture(scope="module")
def compiler(smollm2_tokenizer: Any) -> Any:
    from reference_server.engine.constraint import GrammarCompiler

    return GrammarCompiler(smollm2_tokenizer)


def test_mask_allows_the_grammars_tokens_then_only_the_end(compiler: Any, smollm2_tokenizer: Any) -> None:
    constraint = compiler.compile(YES_NO)
    width = smollm2_tokenizer.vocab_size
    allowed = constraint.allowed(width)
    assert allowed.dtype == np.bool_
    assert allowed.shape == (width,)
    texts = {smollm2_tokenizer.decode([int(i)]) for i in np.flatnonzero(allowed)}
    assert texts == {"y", "ye", "yes", "n", "no"}
    (yes,) = smollm2_tokenizer.encode("yes")
    assert not constraint.done
    constraint.consume(yes)
    assert constraint.done
    # Complete: only the end-of-turn tokens remain.
    assert set(np.flatnonzero(constraint.allowed(width)).tolist()) == set(smollm2_tokenizer.eos_token_ids)


def test_mask_is_padded_to_the_logits_width(compiler: Any, smollm2_tokenizer: Any) -> None:
    width = smollm2_tokenizer.vocab_size + 100  # models whose output rows are padded
    allowed = compiler.compile(YES_NO).allowed(width)
    assert allowed.shape == (width,)
    assert not allowed[smollm2_tokenizer.vocab_size :].any()


def test_a_rejected_token_raises_constraint_error(compiler: Any, smollm2_tokenizer: Any) -> None:
    constraint = compiler.compile(YES_NO)
    with pytest.raises(ConstraintError, match="rejected"):
        constraint.consume(smollm2_tokenizer.encode("maybe")[0])
    with pytest.raises(ConstraintError):
        constraint.allowed(smollm2_tokenizer.vocab_size)


def test_special_tokens_are_checked_against_the_vocabulary(compiler: Any) -> None:
    compiler.check(Grammar('start: "a" <|im_end|>'))
    with pytest.raises(GrammarError):
        compiler.check(Grammar('start: "a" <|no_such_token|>'))


# --- constrained generation on tiny-random ------------------------------------------------


def request(
    text: str = "Is it?",
    grammar: Grammar | None = YES_NO,
    max_tokens: int = 400,
    sampling: Sampling = GREEDY,
) -> EngineRequest:
    return EngineRequest(
        model="tiny-random",
        turns=(Turn("user", text),),
        max_tokens=max_tokens,
        sampling=sampling,
        constraint=grammar,
    )


def wait_idle(engine: Any, timeout: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while engine.active_requests and time.monotonic() < deadline:
        time.sleep(0.005)
    assert engine.active_requests == 0


@pytest.mark.mlx
@pytest.mark.parametrize("sampling", [GREEDY, Sampling(temperature=1.0)], ids=["greedy", "sampled"])
def test_tiny_yes_or_no(tiny_engine: Any, collect: Any, sampling: Sampling) -> None:
    for prompt in PROMPTS:
        deltas = collect(tiny_engine, request(prompt, sampling=sampling))
        assert text_of(deltas) in {"yes", "no"}
        assert deltas[-1].finish == "stop"
        # The grammar ended the turn: no end-of-turn token was generated, only the word's.
        assert 1 <= deltas[-1].output_tokens <= len(text_of(deltas))


@pytest.mark.mlx
@pytest.mark.parametrize(
    "sampling",
    [GREEDY, Sampling(temperature=1.0), Sampling(temperature=0.8, top_p=0.9, top_k=50)],
    ids=["greedy", "sampled", "top-p-top-k"],
)
def test_tiny_json_schema_output_validates(tiny_engine: Any, collect: Any, sampling: Sampling) -> None:
    for prompt in PROMPTS:
        deltas = collect(tiny_engine, request(prompt, json_grammar(BOUNDED_SCHEMA), sampling=sampling))
        assert deltas[-1].finish == "stop"
        jsonschema.validate(json.loads(text_of(deltas)), BOUNDED_SCHEMA)


@pytest.mark.mlx
def test_tiny_constrained_greedy_is_reproducible(tiny_engine: Any, collect: Any) -> None:
    req = request("Describe a pet as JSON.", json_grammar(BOUNDED_SCHEMA))
    assert collect(tiny_engine, req) == collect(tiny_engine, req)


@pytest.mark.mlx
def test_tiny_max_tokens_inside_the_grammar_ends_with_length(tiny_engine: Any, collect: Any) -> None:
    full = text_of(collect(tiny_engine, request("Describe a pet.", json_grammar(BOUNDED_SCHEMA))))
    deltas = collect(tiny_engine, request("Describe a pet.", json_grammar(BOUNDED_SCHEMA), max_tokens=6))
    assert deltas[-1].finish == "length"
    assert deltas[-1].output_tokens == 6
    assert full.startswith(text_of(deltas))
    assert len(text_of(deltas)) < len(full)


@pytest.mark.mlx
@pytest.mark.parametrize("grammar", [INVALID, UNSUPPORTED], ids=["invalid", "unsupported-schema"])
def test_tiny_bad_grammar_fails_before_any_token(tiny_engine: Any, grammar: Grammar) -> None:
    async def go() -> None:
        stream = tiny_engine.generate(request(grammar=grammar))
        with pytest.raises(GrammarError):
            await anext(stream)
        with pytest.raises(GrammarError):
            await tiny_engine.check_grammar(grammar)
        await tiny_engine.check_grammar(YES_NO)

    asyncio.run(go())
    assert tiny_engine.active_requests == 0


@pytest.mark.mlx
def test_tiny_bad_grammar_fails_even_with_max_tokens_zero(tiny_engine: Any, collect: Any) -> None:
    with pytest.raises(GrammarError):
        collect(tiny_engine, request(grammar=INVALID, max_tokens=0))


@pytest.mark.mlx
def test_tiny_closing_a_constrained_stream_stops_it(tiny_engine: Any, collect: Any) -> None:
    endless = Grammar("start: /[a-z ]+/")

    async def go() -> list[Any]:
        stream = tiny_engine.generate(request(grammar=endless, max_tokens=2000))
        seen = [await anext(stream) for _ in range(3)]
        await stream.aclose()
        return seen

    seen = asyncio.run(go())
    assert all(set(d.text) <= set("abcdefghijklmnopqrstuvwxyz ") for d in seen)
    wait_idle(tiny_engine, timeout=1.0)
    assert collect(tiny_engine, request())[-1].finish == "stop"


@pytest.mark.mlx
def test_tiny_constrained_and_free_jobs_run_together(tiny_engine: Any, collect: Any) -> None:
    constrained = request("Describe a pet.", json_grammar(BOUNDED_SCHEMA))
    free = request("Tell me a story.", grammar=None, max_tokens=40)
    solo_constrained, solo_free = collect(tiny_engine, constrained), collect(tiny_engine, free)

    async def both() -> list[list[Any]]:
        async def run(req: EngineRequest) -> list[Any]:
            return [d async for d in tiny_engine.generate(req)]

        return list(await asyncio.gather(run(constrained), run(free)))

    together_constrained, together_free = asyncio.run(both())
    assert together_constrained == solo_constrained
    assert together_free == solo_free
    assert together_free[-1].finish == "length"
    jsonschema.validate(json.loads(text_of(together_constrained)), BOUNDED_SCHEMA)


@pytest.mark.mlx
def test_tiny_matcher_failure_fails_only_that_job(
    tiny_engine: Any, collect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiler = tiny_engine._grammars
    real_compile = compiler.compile

    class Failing:
        def __init__(self, inner: Any) -> None:
            self.inner, self.consumed = inner, 0

        @property
        def done(self) -> bool:
            return bool(self.inner.done)

        def allowed(self, width: int) -> Any:
            return self.inner.allowed(width)

        def consume(self, token: int) -> None:
            self.consumed += 1
            if self.consumed == 2:
                raise ConstraintError("injected matcher failure")
            self.inner.consume(token)

    monkeypatch.setattr(compiler, "compile", lambda grammar: Failing(real_compile(grammar)))
    with pytest.raises(ConstraintError, match="injected"):
        collect(tiny_engine, request(grammar=json_grammar(BOUNDED_SCHEMA)))
    monkeypatch.undo()
    wait_idle(tiny_engine)
    # The worker carries on.
    assert collect(tiny_engine, request())[-1].finish == "stop"
