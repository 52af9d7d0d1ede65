"""Tools over HTTP with the scripted engine (in process): the request rules, the Message and the
stream built from a generation that writes calls in the built-in format. The scripted engine
does not apply grammars; test_tools_e2e.py proves constrained generation on MLX."""

from __future__ import annotations

import json

import pytest

from reference_server.engine.base import ToolCall
from reference_server.engine.scripted import ScriptedEngine
from reference_server.engine.toolformat import CALL_SEPARATOR, render_call

from ..conftest import HEADERS, make_client
from ..test_app import assert_error, sse_events

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [
    {"name": "get_weather", "description": "Weather of a city", "input_schema": SCHEMA},
    {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
]
CALLS = [ToolCall("x", "get_weather", {"city": "Paris"}), ToolCall("y", "get_time", {})]
REPLY = "Let me check. " + "\n" + CALL_SEPARATOR.join(render_call(c) for c in CALLS)


def body(**changes):
    return {
        "model": "scripted",
        "max_tokens": 400,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": TOOLS,
        **changes,
    }


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(REPLY, model_id="scripted", context_window=4096)


@pytest.fixture
def client(engine):
    with make_client(engine) as test_client:
        test_client.headers.update(HEADERS)
        yield test_client


def test_calls_become_tool_use_blocks_after_the_text(client, engine):
    message = client.post("/v1/messages", json=body()).json()
    text, weather, time = message["content"]
    assert text == {"type": "text", "text": "Let me check. \n", "citations": None}
    assert weather["type"] == "tool_use"
    assert (weather["name"], weather["input"], weather["caller"]) == (
        "get_weather",
        {"city": "Paris"},
        {"type": "direct"},
    )
    assert (time["name"], time["input"]) == ("get_time", {})
    assert weather["id"].startswith("toolu_")
    assert weather["id"] != time["id"]
    assert message["stop_reason"] == "tool_use"
    # The engine got the tools (rendered and counted) and a grammar.
    request = engine.requests[-1]
    assert [t.name for t in request.tools] == ["get_weather", "get_time"]
    assert request.constraint is not None
    assert "get_weather" in request.constraint.lark


def test_the_stream_carries_the_same_calls_as_input_json_deltas(client):
    plain = client.post("/v1/messages", json=body()).json()
    events = sse_events(client.post("/v1/messages", json=body(stream=True)).text)
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert [s["content_block"]["type"] for s in starts] == ["text", "tool_use", "tool_use"]
    assert [s["index"] for s in starts] == [0, 1, 2]
    assert starts[1]["content_block"]["input"] == {}
    for index, block in ((1, plain["content"][1]), (2, plain["content"][2])):
        fragments = [
            e["delta"]["partial_json"]
            for e in events
            if e["type"] == "content_block_delta" and e["index"] == index
        ]
        assert all(
            e["delta"]["type"] == "input_json_delta"
            for e in events
            if e.get("index") == index and "delta" in e
        )
        assert json.loads("".join(fragments)) == block["input"]
    stops = [e["index"] for e in events if e["type"] == "content_block_stop"]
    assert stops == [0, 1, 2]
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


def test_stop_sequences_cut_text_but_never_a_call(client):
    cut = client.post("/v1/messages", json=body(stop_sequences=["check"])).json()
    assert (cut["stop_reason"], cut["stop_sequence"]) == ("stop_sequence", "check")
    assert cut["content"] == [{"type": "text", "text": "Let me ", "citations": None}]
    whole = client.post("/v1/messages", json=body(stop_sequences=["Paris", "name"])).json()
    assert whole["stop_reason"] == "tool_use"
    assert whole["content"][1]["input"] == {"city": "Paris"}


def test_max_tokens_inside_a_call_gives_the_incomplete_block(client):
    limit = len("Let me check. \n") + len('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa')
    message = client.post("/v1/messages", json=body(max_tokens=limit)).json()
    assert message["stop_reason"] == "max_tokens"
    assert message["content"][1]["name"] == "get_weather"
    assert message["content"][1]["input"] == {"city": "Pa"}  # as the SDK reads the partial JSON


def test_count_tokens_counts_the_tools(client):
    plain = {"model": "scripted", "messages": [{"role": "user", "content": "Weather in Paris?"}]}
    without = client.post("/v1/messages/count_tokens", json=plain).json()["input_tokens"]
    counted = client.post("/v1/messages/count_tokens", json={**plain, "tools": TOOLS}).json()["input_tokens"]
    assert counted > without + 100
    assert client.post("/v1/messages", json=body()).json()["usage"]["input_tokens"] == counted


def test_tool_choice_none_sends_no_grammar_for_calls(client, engine):
    client.post("/v1/messages", json=body(tool_choice={"type": "none"}))
    assert "call_0" not in engine.requests[-1].constraint.lark  # text only, never a call tag


def test_a_round_trip_is_accepted(client, engine):
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"}]},
    ]
    assert client.post("/v1/messages", json=body(messages=messages)).status_code == 200
    assert [t.role for t in engine.requests[-1].turns] == ["user", "assistant", "tool"]


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "is not served"),
        ({"tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
        (
            {
                "tools": [
                    {
                        "name": "t",
                        "input_schema": {
                            "type": "object",
                            "properties": {"a": {"type": "string", "pattern": "(?=a)"}},
                        },
                    }
                ]
            },
            "tools.0.custom.input_schema: this server cannot enforce this schema",
        ),
        (
            {
                "tools": [],
                "output_config": {
                    "format": {"type": "json_schema", "schema": {"type": "string", "pattern": "(?<=a)"}}
                },
            },
            "output_config.format.schema: this server cannot enforce",
        ),
    ],
)
def test_tool_errors_are_400s_before_the_stream(client, changes, needle):
    for stream in (False, True):
        response = client.post("/v1/messages", json=body(stream=stream, **changes))
        payload = assert_error(response, 400, "invalid_request_error")
        assert needle in payload["error"]["message"]
