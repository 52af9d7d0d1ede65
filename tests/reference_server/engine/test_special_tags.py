"""Tool-call tags that the vocabulary holds as one special token (issue 43).

Qwen2.5's vocabulary (the Qwen family's, most MLX models served today) holds `<tool_call>` and
`</tool_call>` as special tokens 151657 and 151658. A grammar that spells the tag as text lets
llguidance's mask pick the token and then refuses it (`token "<[151657]>" doesn't satisfy the
grammar; forced bytes: got '<'`): every `tool_choice: any` request was a 500. The grammar names
such a tag as the token; vocabularies without it (SmolLM2's) keep the text, byte for byte.

Driven with Qwen2.5's real tokenizer (the GGUF header of the model's first package): each
token sequence a Qwen model writes for a call must be accepted to the end.
"""

from __future__ import annotations

from typing import Any

import pytest

from reference_server.engine.base import ToolCall
from reference_server.engine.toolformat import CALL_END_TAG, CALL_TAG, TAGS, render_call
from reference_server.tools.definitions import ToolDefinition, ToolPolicy
from reference_server.tools.grammar import response_grammar, spelled

WEATHER = ToolDefinition(
    "get_weather",
    "Current weather of a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    strict=False,
)
TIME = ToolDefinition("get_time", "The time", {"type": "object", "properties": {}}, strict=False)
CALL = render_call(ToolCall("toolu_1", "get_weather", {"city": "Paris"}))
SECOND = render_call(ToolCall("toolu_2", "get_time", {}))
SPECIAL = frozenset(TAGS)
# One worker runs this module (pytest-xdist): the grammar compiler over Qwen's 151k-token
# vocabulary is built once, not once per worker.
pytestmark = pytest.mark.xdist_group("special_tags")


@pytest.fixture(scope="module")
def compiler(qwen_tokenizer: Any) -> Any:
    from reference_server.engine.constraint import GrammarCompiler

    return GrammarCompiler(qwen_tokenizer)


def drive(compiler: Any, tokenizer: Any, policy: ToolPolicy, text: str) -> str:
    """Feed `text`'s tokens (special tags as their tokens, as the model writes them) through the
    grammar of `policy`; "" when each is allowed and the grammar may end there, else why not."""
    constraint = compiler.compile(response_grammar(policy, None, compiler.special(TAGS)))
    ids = tokenizer.encode(text)
    for index, token in enumerate(ids):
        if not constraint.allowed(compiler.vocab_size)[token]:
            return f"token {token} ({tokenizer.decode([token])!r}) refused after {tokenizer.decode(ids[:index])!r}"
        constraint.consume(token)
    ends = constraint.allowed(compiler.vocab_size)
    return "" if any(ends[token] for token in tokenizer.eos_token_ids) else "the grammar cannot end there"


def test_qwen_holds_the_tags_as_special_tokens(compiler: Any, qwen_tokenizer: Any) -> None:
    assert compiler.special(TAGS) == SPECIAL
    assert qwen_tokenizer.encode(CALL_TAG) == [151657]
    assert qwen_tokenizer.encode(CALL_END_TAG) == [151658]


def test_smollm2_spells_the_tags_as_text(smollm2_tokenizer: Any) -> None:
    from reference_server.engine.constraint import GrammarCompiler

    assert GrammarCompiler(smollm2_tokenizer).special(TAGS) == frozenset()


@pytest.mark.parametrize(
    ("policy", "text"),
    [
        (ToolPolicy("any", (WEATHER, TIME), True), CALL),
        (ToolPolicy("any", (WEATHER, TIME), True), f"{CALL}\n{SECOND}"),
        (ToolPolicy("tool", (WEATHER,), False), CALL),
        (ToolPolicy("auto", (WEATHER, TIME), True), CALL),
        (ToolPolicy("auto", (WEATHER, TIME), True), f"Let me check.\n{CALL}"),
        (ToolPolicy("auto", (WEATHER, TIME), True), "No tools needed: 42."),
        (ToolPolicy("none", (WEATHER, TIME), True), "Just text."),
    ],
    ids=["any", "any-parallel", "tool", "auto-call", "auto-text-then-call", "auto-text", "none"],
)
def test_qwen_writes_its_calls_in_its_own_tokens(
    compiler: Any, qwen_tokenizer: Any, policy: ToolPolicy, text: str
) -> None:
    assert drive(compiler, qwen_tokenizer, policy, text) == ""


def test_text_never_holds_the_tag_token(compiler: Any, qwen_tokenizer: Any) -> None:
    # Where calls are not allowed, or before text ends, the tag token is masked out.
    for policy in (ToolPolicy("none", (WEATHER,), True), ToolPolicy("auto", (), True)):
        grammar = response_grammar(policy, None, compiler.special(TAGS))
        if grammar is None:
            continue
        constraint = compiler.compile(grammar)
        assert not constraint.allowed(compiler.vocab_size)[151657]
    forced = compiler.compile(response_grammar(ToolPolicy("any", (WEATHER,), True), None, SPECIAL))
    mask = forced.allowed(compiler.vocab_size)
    assert mask[151657]
    assert int(mask.sum()) == 1


def test_without_special_tags_the_grammar_is_unchanged() -> None:
    # SmolLM2's grammars, byte for byte as before: the tags as string literals.
    for mode in ("any", "auto", "tool"):
        policy = ToolPolicy(mode, (WEATHER, TIME), True)  # type: ignore[arg-type]
        grammar = response_grammar(policy, None)
        assert grammar is not None
        assert grammar == response_grammar(policy, None, frozenset())
        assert "<tool_call>\\n" in grammar.lark  # inside a string literal or the head's regex
        assert "<tool_call> " not in grammar.lark
        assert "</tool_call>\n" not in grammar.lark
    assert spelled("<tool_call>\n") == '"<tool_call>\\n"'


def test_spelled_names_each_special_tag_as_its_token() -> None:
    assert spelled("<tool_call>\n", SPECIAL) == '<tool_call> "\\n"'
    assert spelled("}\n</tool_call>", SPECIAL) == '"}\\n" </tool_call>'
    assert spelled("\n<tool_call>\n", SPECIAL) == '"\\n" <tool_call> "\\n"'


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '```json\n{\n  "name": "get_weather",\n  "arguments": {"city": "Paris"}\n}\n```',
        '{"name": "launch", "arguments": {"code": "4417"}}',  # names no tool: text
    ],
    ids=["bare", "fenced", "no-tool"],
)
def test_auto_lets_a_call_come_as_its_bare_json(compiler: Any, qwen_tokenizer: Any, text: str) -> None:
    # What Qwen2.5-Coder writes instead of the tags (tools/grammar.py).
    assert drive(compiler, qwen_tokenizer, ToolPolicy("auto", (WEATHER, TIME), True), text) == ""


def test_a_bare_call_is_held_to_its_schema(compiler: Any, qwen_tokenizer: Any) -> None:
    policy = ToolPolicy("auto", (WEATHER, TIME), True)
    refused = drive(
        compiler, qwen_tokenizer, policy, '{"name": "get_weather", "arguments": {"town": "Paris"}}'
    )
    assert refused.startswith("token")
