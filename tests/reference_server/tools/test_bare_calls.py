"""A call written as its JSON alone (issue 43): Qwen2.5-Coder was never trained on the
`<tool_call>` tags and writes `{"name": "Read", "arguments": {...}}`, bare or in a ```json
fence. Under `auto` such an answer is that call (tools/grammar.py, tools/calls.py); JSON that
names no tool of the request stays text, and other answers are as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference_server.engine.scripted import ScriptedEngine
from reference_server.tools.calls import ArgsPiece, CallEnd, CallParser, CallStart, Piece, TextPiece

from ..conftest import HEADERS, make_client
from .test_calls import summary

BARE = '{"name": "get_weather", "arguments": {"city": "Paris", "note": "a } in a string"}}'
FENCED = '```json\n{\n  "name": "get_weather",\n  "arguments": {"city": "Paris"}\n}\n```'
NAMES = frozenset({"get_weather", "get_time"})


def parse(text: str, step: int, names: frozenset[str] = NAMES) -> list[Piece]:
    """`text` fed `step` characters at a time, then flushed; fragments joined (`summary`)."""
    parser = CallParser(bare=names)
    pieces: list[Piece] = []
    for at in range(0, len(text), step):
        pieces += parser.feed(text[at : at + step])
    return summary([*pieces, *parser.flush()])


@pytest.mark.parametrize("step", [1, 3, 1000])
@pytest.mark.parametrize(
    ("text", "arguments"),
    [(BARE, {"city": "Paris", "note": "a } in a string"}), (FENCED, {"city": "Paris"})],
    ids=["bare", "fenced"],
)
def test_a_bare_call_is_parsed_as_a_call(text: str, arguments: dict[str, Any], step: int) -> None:
    start, args, end = parse(text, step)
    assert start == CallStart("get_weather")
    assert isinstance(args, ArgsPiece)
    assert json.loads(args.json) == arguments
    assert end == CallEnd(complete=True)


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "launch", "arguments": {"code": "4417"}}',  # names no tool
        "Hello there.",
        "```python\nprint(1)\n```",
        'Here: {"name": "get_weather", "arguments": {}}',  # not at the start
    ],
)
def test_other_answers_stay_text(text: str) -> None:
    assert parse(text, 1) == [TextPiece(text)]
    assert parse(text, 1000) == [TextPiece(text)]


def test_without_names_nothing_is_held_back() -> None:
    parser = CallParser()
    assert parser.feed("{") == [TextPiece("{")]


def test_an_unfinished_bare_call_ends_incomplete() -> None:
    start, _args, end = parse('{"name": "get_time", "arguments": {"a": [1, ', 2)
    assert start == CallStart("get_time")
    assert end == CallEnd(complete=False)


def test_a_bare_answer_becomes_a_tool_use_block_over_http() -> None:
    tools = [
        {
            "name": "get_weather",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
    ]
    engine = ScriptedEngine(FENCED, model_id="scripted", context_window=4096)
    request = {"model": "scripted", "max_tokens": 400, "messages": [{"role": "user", "content": "Paris?"}]}
    with make_client(engine) as client:
        client.headers.update(HEADERS)
        message = client.post("/v1/messages", json={**request, "tools": tools}).json()
        plain = client.post("/v1/messages", json=request).json()
    (call,) = message["content"]
    assert (call["type"], call["name"], call["input"]) == ("tool_use", "get_weather", {"city": "Paris"})
    assert message["stop_reason"] == "tool_use"
    # Without tools the same text is an answer.
    assert [block["type"] for block in plain["content"]] == ["text"]
    assert plain["content"][0]["text"] == FENCED
