"""`POST /v1/chat/completions` with tools and response formats (scripted engine, in process):
calls as `tool_calls`, their stream deltas, the tool policy and grammar each `tool_choice`
builds, tool turns, and OpenAI-shaped refusals of what this server cannot serve."""

from __future__ import annotations

import json

import pytest

from reference_server.engine.base import ToolCall
from reference_server.engine.scripted import ScriptedEngine
from reference_server.engine.toolformat import CALL_SEPARATOR, render_call

from ..conftest import make_client
from .conftest import AUTH, assert_openai_error, chat, chunks_of

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather", "parameters": WEATHER},
    },
    {"type": "function", "function": {"name": "get_time"}},
]
CALLS = [ToolCall("x", "get_weather", {"city": "Paris"}), ToolCall("y", "get_time", {})]
REPLY = "Let me check.\n" + CALL_SEPARATOR.join(render_call(c) for c in CALLS)


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(REPLY, model_id="scripted", context_window=4096)


@pytest.fixture
def client(engine):
    with make_client(engine) as test_client:
        test_client.headers.update(AUTH)
        yield test_client


def test_calls_are_tool_calls_with_json_arguments(client, engine):
    completion = client.post("/v1/chat/completions", json=chat(tools=TOOLS)).json()
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["content"] == "Let me check.\n"
    weather, time = message["tool_calls"]
    assert weather["id"].startswith("call_")
    assert weather["id"] != time["id"]
    assert weather["type"] == "function"
    assert weather["function"]["name"] == "get_weather"
    assert json.loads(weather["function"]["arguments"]) == {"city": "Paris"}
    assert (time["function"]["name"], json.loads(time["function"]["arguments"])) == ("get_time", {})
    request = engine.requests[-1]
    assert [t.name for t in request.tools] == ["get_weather", "get_time"]
    assert request.constraint is not None  # auto: text, then calls held to their schemas


def test_streamed_calls_assemble_to_the_same_arguments(client):
    plain = client.post("/v1/chat/completions", json=chat(tools=TOOLS)).json()["choices"][0]["message"]
    chunks = chunks_of(client.post("/v1/chat/completions", json=chat(tools=TOOLS, stream=True)).text)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    calls: dict[int, dict] = {}
    text = ""
    for chunk in chunks:
        delta = chunk["choices"][0]["delta"]
        text += delta.get("content", "")
        for part in delta.get("tool_calls", ()):
            call = calls.setdefault(part["index"], {"name": "", "arguments": "", "ids": []})
            if "id" in part:
                call["ids"].append(part["id"])
            function = part.get("function", {})
            call["name"] += function.get("name") or ""
            call["arguments"] += function.get("arguments") or ""
    assert text == plain["content"]
    assert sorted(calls) == [0, 1]
    for index, expected in enumerate(plain["tool_calls"]):
        assert len(calls[index]["ids"]) == 1  # the id once, on the call's first delta
        assert calls[index]["name"] == expected["function"]["name"]
        assert json.loads(calls[index]["arguments"]) == json.loads(expected["function"]["arguments"])


ANTHROPIC_TOOLS = [
    {"name": "get_weather", "description": "Weather", "input_schema": WEATHER},
    {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
]


@pytest.mark.parametrize(
    ("choice", "anthropic_choice"),
    [
        (None, {"type": "auto"}),
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ({"type": "function", "function": {"name": "get_time"}}, {"type": "tool", "name": "get_time"}),
    ],
)
def test_tool_choice_builds_the_grammar_its_anthropic_twin_builds(client, engine, choice, anthropic_choice):
    body = chat(tools=TOOLS, parallel_tool_calls=False)
    if choice is not None:
        body["tool_choice"] = choice
    assert client.post("/v1/chat/completions", json=body).status_code == 200
    grammar = engine.requests[-1].constraint
    twin = {
        "model": "scripted",
        "max_tokens": 100,
        "messages": chat()["messages"],
        "tools": ANTHROPIC_TOOLS,
        "tool_choice": {**anthropic_choice, "disable_parallel_tool_use": True},
    }
    response = client.post("/v1/messages", json=twin, headers={"anthropic-version": "2023-06-01"})
    assert response.status_code == 200, response.text
    assert grammar is not None
    assert grammar == engine.requests[-1].constraint
    assert ("get_weather" in grammar.lark) == (anthropic_choice["type"] != "tool")


def test_tool_choice_none_calls_nothing(client, engine):
    completion = client.post("/v1/chat/completions", json=chat(tools=TOOLS, tool_choice="none")).json()
    message = completion["choices"][0]["message"]
    assert "tool_calls" not in message
    assert completion["choices"][0]["finish_reason"] == "stop"
    assert message["content"] == REPLY  # calls are not parsed out of free text under none


def test_tool_turns_are_rendered_as_calls_and_results(client, engine):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny, 21 C"},
    ]
    assert client.post("/v1/chat/completions", json=chat(messages=messages, tools=TOOLS)).status_code == 200
    turns = engine.requests[-1].turns
    assert [t.role for t in turns] == ["system", "user", "assistant", "tool"]
    assert turns[2].tool_calls == (ToolCall("c1", "get_weather", {"city": "Paris"}),)
    assert (turns[3].text, turns[3].tool_call_id, turns[3].name) == ("Sunny, 21 C", "c1", "get_weather")


def test_response_format_json_schema_constrains_the_answer(client, engine):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}
    assert client.post("/v1/chat/completions", json=chat(response_format=fmt)).status_code == 200
    assert engine.requests[-1].constraint is not None
    assert client.post("/v1/chat/completions", json=chat(response_format={"type": "text"})).status_code == 200
    assert engine.requests[-1].constraint is None


@pytest.mark.parametrize(
    ("changes", "status", "code", "param"),
    [
        ({"model": "nope"}, 404, "model_not_found", None),
        ({"messages": []}, 400, None, "messages"),
        ({"bogus": 1}, 400, None, None),
        ({"messages": [{"role": "robot", "content": "hi"}]}, 400, None, None),
        ({"messages": [{"role": "user"}]}, 400, "missing_required_parameter", "messages[0].content"),
        ({"temperature": 3.0}, 400, "invalid_value", "temperature"),
        ({"max_tokens": 0}, 400, "integer_below_min_value", "max_tokens"),
        ({"max_completion_tokens": 10**9}, 400, "invalid_value", "max_completion_tokens"),
        ({"n": 2}, 400, "invalid_value", "n"),
        ({"logprobs": True}, 400, "unsupported_parameter", "logprobs"),
        ({"stream_options": {"include_usage": True}}, 400, None, "stream_options"),
        ({"tool_choice": "required"}, 400, None, "tool_choice"),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "x"}}},
            400,
            None,
            "tool_choice",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]},
            400,
            "invalid_function_parameters",
            "tools[0].function.parameters",
        ),
        ({"tools": [TOOLS[0], TOOLS[0]]}, 400, None, "tools[1]"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            400,
            "unsupported_content",
            "messages[0].content[0].type",
        ),
        (
            {"messages": [{"role": "tool", "tool_call_id": "c9", "content": "x"}]},
            400,
            None,
            "messages[0].role",
        ),
    ],
)
def test_bad_requests_are_openai_errors_with_their_param(client, changes, status, code, param):
    response = client.post("/v1/chat/completions", json=chat(**changes))
    error = assert_openai_error(response, status, code, param)
    if code == "model_not_found":
        assert error["param"] is None


def test_an_unanswered_tool_call_is_refused(client):
    messages = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": "Well?"},
    ]
    error = assert_openai_error(
        client.post("/v1/chat/completions", json=chat(messages=messages, tools=TOOLS)),
        400,
        None,
        "messages[1].role",
    )
    assert "c1" in error["message"]


def test_non_json_bodies_are_openai_errors(client):
    response = client.post("/v1/chat/completions", content=b"{", headers={"content-type": "application/json"})
    assert_openai_error(response, 400)
    response = client.post("/v1/chat/completions", content=b"{}", headers={"content-type": "text/plain"})
    assert_openai_error(response, 400)
