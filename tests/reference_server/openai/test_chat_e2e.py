"""`POST /v1/chat/completions` end to end: `python -m reference_server` on MLX (tiny-random) over a
real socket, driven by the official OpenAI SDK, as the gateways in front of it drive it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import openai  # the `test` extra, which nox -s tests installs
import pytest

from conformance.wire.launcher import reference_server

pytestmark = pytest.mark.mlx

KEY = "secret"
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 16}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    log = tmp_path_factory.mktemp("tiny-openai") / "server.log"
    with (
        reference_server("tiny-random", log=log, api_key=KEY) as url,
        openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0) as sdk,
    ):
        yield sdk


def create(client: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("model", "tiny-random")
    kwargs.setdefault("messages", ASK)
    kwargs.setdefault("max_tokens", 12)
    kwargs.setdefault("temperature", 0)
    return client.chat.completions.create(**kwargs)


def test_create_and_stream_agree_with_true_usage(client):
    plain = create(client)
    assert plain.object == "chat.completion"
    assert plain.choices[0].finish_reason == "length"  # tiny-random never ends a turn in 12 tokens
    assert plain.usage.completion_tokens == 12
    assert plain.usage.total_tokens == plain.usage.prompt_tokens + 12
    stream = create(client, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert chunks[-1].usage.model_dump() == plain.usage.model_dump()
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]


def test_a_stop_string_ends_the_text_before_it(client):
    text = create(client, max_tokens=24).choices[0].message.content
    stop = text[len(text) // 2 :][:3]
    assert stop.strip()
    cut = create(client, max_tokens=24, stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == text[: text.index(stop)]


def test_a_required_call_is_valid_against_its_parameters(client):
    completion = create(client, tools=TOOLS, tool_choice="required", max_tokens=80)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls
    for call in choice.message.tool_calls:
        assert call.id.startswith("call_")
        assert call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), WEATHER)
    streamed = create(client, tools=TOOLS, tool_choice="required", max_tokens=80, stream=True)
    arguments: dict[int, str] = {}
    for chunk in streamed:
        for part in chunk.choices[0].delta.tool_calls or ():
            arguments[part.index] = arguments.get(part.index, "") + (part.function.arguments or "")
    assert [json.loads(a) for a in arguments.values()] == [
        json.loads(c.function.arguments) for c in choice.message.tool_calls
    ]


def test_a_json_schema_answer_parses_and_validates(client):
    schema = {"type": "object", "properties": {"answer": {"type": "boolean"}}, "required": ["answer"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": True}}
    completion = create(client, response_format=fmt, max_tokens=40)
    assert completion.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(completion.choices[0].message.content), schema)


def test_errors_are_the_sdks_error_classes(client):
    with pytest.raises(openai.NotFoundError) as missing:
        create(client, model="no-such-model")
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        create(client, max_tokens=0)
    assert bad.value.param == "max_tokens"
    with (
        openai.OpenAI(base_url=str(client.base_url), api_key="wrong", max_retries=0) as stranger,
        pytest.raises(openai.AuthenticationError),
    ):
        create(stranger)


def test_the_sdk_lists_and_retrieves_models(client):
    assert [m.id for m in client.models.list()] == ["tiny-random"]
    assert client.models.retrieve("tiny-random").owned_by == "plumbline"
