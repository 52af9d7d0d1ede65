"""Tools and structured outputs end to end: `python -m reference_server` on MLX over a real
socket, driven by the official SDK. Every call is generated under the grammar of
tools/grammar.py, so even the random model's calls name a defined tool and validate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import jsonschema
import pytest

from conformance.wire.launcher import reference_server
from conformance.wire.sse import parse_sse

# One worker runs this module (pytest-xdist): its servers start once, not once per worker.
pytestmark = [pytest.mark.mlx, pytest.mark.xdist_group("tools_e2e")]
# The SDK sends anthropic-version 2026-10-21, which removed temperature: these tests decode
# greedily (temperature 0), so they speak 2023-06-01.
LEGACY = {"anthropic-version": "2023-06-01"}

GREEDY = {"temperature": 0}
WEATHER = {
    "name": "get_weather",
    "description": "Current weather of a city",
    "input_schema": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 16},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "unit"],
    },
}
TIME = {"name": "get_time", "input_schema": {"type": "object", "properties": {}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def tiny_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("tiny") / "server.log"
    with reference_server("tiny-random", log=log) as url:
        yield url


@pytest.fixture
def client(tiny_url: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=tiny_url, api_key="unused", default_headers=LEGACY, max_retries=0
    ) as sdk:
        yield sdk


def create(client: anthropic.Anthropic, **kwargs: Any) -> Any:
    kwargs.setdefault("model", "tiny-random")
    kwargs.setdefault("max_tokens", 160)
    kwargs.setdefault("messages", ASK)
    kwargs.setdefault("tools", [WEATHER, TIME])
    return client.messages.create(extra_body=GREEDY, **kwargs)


def calls(message: Any) -> list[Any]:
    return [block for block in message.content if block.type == "tool_use"]


def assert_valid_calls(message: Any, tools: list[dict[str, Any]]) -> None:
    schemas = {tool["name"]: tool["input_schema"] for tool in tools}
    ids = [call.id for call in calls(message)]
    assert len(set(ids)) == len(ids)
    for call in calls(message):
        assert call.id.startswith("toolu_")
        jsonschema.validate(call.input, schemas[call.name])


def test_a_forced_tool_is_called_with_a_valid_input(client):
    message = create(client, tool_choice={"type": "tool", "name": "get_weather"})
    assert message.stop_reason == "tool_use"
    assert [call.name for call in calls(message)] == ["get_weather"] * len(calls(message))
    assert not [b for b in message.content if b.type == "text"]  # forced: no text first
    assert_valid_calls(message, [WEATHER])


def test_any_without_parallel_calls_exactly_one_tool(client):
    message = create(client, tool_choice={"type": "any", "disable_parallel_tool_use": True})
    assert message.stop_reason == "tool_use"
    assert len(calls(message)) == 1
    assert_valid_calls(message, [WEATHER, TIME])


def test_auto_and_none(client):
    auto = create(client, max_tokens=40)
    assert_valid_calls(auto, [WEATHER, TIME])
    assert (auto.stop_reason == "tool_use") == bool(calls(auto)) or auto.stop_reason == "max_tokens"
    none = create(client, tool_choice={"type": "none"}, max_tokens=40)
    assert not calls(none)
    assert "<tool_call>" not in "".join(b.text for b in none.content if b.type == "text")


def test_a_tool_result_round_trip_is_answered(client):
    first = create(client, tool_choice={"type": "tool", "name": "get_weather"})
    (call,) = calls(first)[:1]
    follow_up = [
        *ASK,
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18 degrees, sunny"}],
        },
    ]
    answer = create(client, messages=follow_up, max_tokens=8)
    assert answer.stop_reason in ("end_turn", "max_tokens", "tool_use")
    error = {
        "type": "tool_result",
        "tool_use_id": call.id,
        "content": [{"type": "text", "text": "down"}],
        "is_error": True,
    }
    create(client, messages=[*follow_up[:2], {"role": "user", "content": [error]}], max_tokens=4)


def test_the_stream_equals_create_and_its_fragments_join_to_the_input(client, tiny_url):
    forced = {"tool_choice": {"type": "any"}, "max_tokens": 120}
    plain = create(client, **forced)
    with client.messages.stream(
        model="tiny-random", messages=ASK, tools=[WEATHER, TIME], extra_body=GREEDY, **forced
    ) as stream:
        final = stream.get_final_message()

    def without_ids(message: Any) -> Any:
        dumped = message.model_dump(exclude={"id"})
        for block in dumped["content"]:
            block.pop("id", None)
        return dumped

    assert without_ids(final) == without_ids(plain)
    body = {
        "model": "tiny-random",
        "messages": ASK,
        "tools": [WEATHER, TIME],
        "stream": True,
        **GREEDY,
        **forced,
    }
    raw = httpx.post(
        f"{tiny_url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}, timeout=120
    )
    events = [json.loads(e.data) for e in parse_sse(raw.content).events if e.event != "ping"]
    for index, block in enumerate(plain.content):
        if block.type != "tool_use":
            continue
        start = next(e for e in events if e["type"] == "content_block_start" and e["index"] == index)
        assert start["content_block"]["input"] == {}
        fragments = [
            e["delta"]["partial_json"]
            for e in events
            if e["type"] == "content_block_delta" and e["index"] == index
        ]
        assert json.loads("".join(fragments)) == block.input


def test_count_tokens_counts_tools_as_generation_renders_them(client):
    counted = client.messages.count_tokens(model="tiny-random", messages=ASK, tools=[WEATHER, TIME])
    bare = client.messages.count_tokens(model="tiny-random", messages=ASK)
    assert counted.input_tokens > bare.input_tokens
    assert create(client, max_tokens=1).usage.input_tokens == counted.input_tokens


def test_structured_output_is_valid_json_of_the_schema(client):
    schema = {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "maxLength": 20},
            "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
        },
        "required": ["answer", "confidence"],
    }
    message = client.messages.create(
        model="tiny-random",
        max_tokens=80,
        messages=ASK,
        extra_body={**GREEDY, "output_config": {"format": {"type": "json_schema", "schema": schema}}},
    )
    assert message.stop_reason == "end_turn"
    jsonschema.validate(json.loads(message.content[0].text), schema)


@pytest.mark.smollm2
@pytest.mark.slow
def test_smollm2_calls_the_weather_tool(smollm2_url):
    with anthropic.Anthropic(
        base_url=smollm2_url, api_key="unused", default_headers=LEGACY, max_retries=0
    ) as sdk:
        message = sdk.messages.create(
            model="smollm2-135m-instruct",
            max_tokens=160,
            messages=ASK,
            tools=[WEATHER],
            # One call: under `any` SmolLM2 repeats calls until max_tokens otherwise.
            tool_choice={"type": "any", "disable_parallel_tool_use": True},
            extra_body=GREEDY,
        )
    assert message.stop_reason == "tool_use"
    assert_valid_calls(message, [WEATHER])
    assert "paris" in calls(message)[0].input["city"].lower()


@pytest.fixture(scope="module")
def qwen_url(tmp_path_factory: pytest.TempPathFactory, qwen_gguf_header: Any) -> Iterator[str]:
    log = tmp_path_factory.mktemp("qwen") / "server.log"
    with reference_server("tiny-random-qwen", log=log) as url:
        yield url


@pytest.mark.parametrize(
    "choice",
    [
        {"type": "any"},
        {"type": "tool", "name": "get_weather"},
        {"type": "any", "disable_parallel_tool_use": True},
    ],
    ids=["any", "tool", "any-one"],
)
def test_a_qwen_vocabulary_calls_tools_in_its_own_tokens(qwen_url: str, choice: dict[str, Any]) -> None:
    # Issue 43: with `<tool_call>` one special token (Qwen2.5's 151657), every forced call was a
    # 500 (llguidance refused the token its own mask offered). Streamed and not, the same call.
    with anthropic.Anthropic(
        base_url=qwen_url, api_key="unused", default_headers=LEGACY, max_retries=0
    ) as sdk:
        kwargs: dict[str, Any] = {
            "model": "tiny-random-qwen",
            "max_tokens": 160,
            "messages": ASK,
            "tools": [WEATHER, TIME],
            "tool_choice": choice,
            "extra_body": GREEDY,
        }
        message = sdk.messages.create(**kwargs)
        with sdk.messages.stream(**kwargs) as stream:
            streamed = stream.get_final_message()
    assert message.stop_reason == "tool_use"
    assert calls(message)
    assert not [b for b in message.content if b.type == "text"]
    assert_valid_calls(message, [WEATHER, TIME])
    if choice.get("disable_parallel_tool_use"):
        assert len(calls(message)) == 1
    assert [(c.name, c.input) for c in calls(streamed)] == [(c.name, c.input) for c in calls(message)]
