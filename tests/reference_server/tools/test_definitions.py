from __future__ import annotations

import json

import pytest

from reference_server.errors import InvalidRequestError
from reference_server.protocol import MessageCreateParams
from reference_server.tools.definitions import parse_tools, tool_policy
from reference_server.validation import parse_body

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"name": "get_weather", "description": "Weather of a city", "input_schema": SCHEMA}


def params(**changes):
    body = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], **changes}
    return parse_body(json.dumps(body).encode(), "application/json", MessageCreateParams)


def refusal(tools) -> str:
    with pytest.raises(InvalidRequestError) as info:
        parse_tools(tools)
    return info.value.message


def test_custom_tools_are_parsed_with_every_documented_field():
    tool = {
        **WEATHER,
        "type": "custom",
        "strict": True,
        "cache_control": {"type": "ephemeral"},
        "input_examples": [{"city": "Paris"}],
        "eager_input_streaming": False,
        "defer_loading": False,
        "allowed_callers": ["direct"],
    }
    (parsed,) = parse_tools([tool])
    assert (parsed.name, parsed.strict, parsed.input_schema) == ("get_weather", True, SCHEMA)
    assert parsed.spec().parameters == SCHEMA


CODE_2601 = {"type": "code_execution_20260120", "name": "code_execution"}


def test_a_tool_only_code_may_call_becomes_a_function_of_the_code_execution_python():
    tools = parse_tools([CODE_2601, {**WEATHER, "allowed_callers": ["code_execution_20260120"]}])
    assert "get_weather" not in {tool.name for tool in tools}  # never offered to the model
    python = next(tool for tool in tools if tool.name == "code_execution")
    assert [spec.name for spec in python.server.callable] == ["get_weather"]
    assert "get_weather(input: dict) -> str: Weather of a city" in python.description
    bash = next(tool for tool in tools if tool.name == "bash_code_execution")
    assert bash.description == parse_tools([CODE_2601])[0].description  # only Python lists them


def test_a_tool_the_model_and_code_may_call_is_offered_to_both():
    tools = parse_tools([CODE_2601, {**WEATHER, "allowed_callers": ["direct", "code_execution_20260521"]}])
    assert "get_weather" in {tool.name for tool in tools}
    python = next(tool for tool in tools if tool.name == "code_execution")
    assert [spec.name for spec in python.server.callable] == ["get_weather"]


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (
            [{**WEATHER, "allowed_callers": ["code_execution_20260120"]}],
            "tools.0.custom.allowed_callers: 'code_execution_20260120' names a code execution tool this"
            " request does not have",
        ),
        (
            [{**WEATHER, "type": "custom", "allowed_callers": []}],
            "tools.0.custom.allowed_callers: at least one",
        ),
        (
            [
                {"type": "code_execution_20250825", "name": "code_execution"},
                {**WEATHER, "allowed_callers": ["code_execution_20250825"]},
            ],
            "tools.1.custom.allowed_callers: 'code_execution_20250825': programmatic tool calling is served with",
        ),
        (
            [
                {
                    "type": "web_fetch_20250910",
                    "name": "web_fetch",
                    "allowed_callers": ["code_execution_20250825"],
                }
            ],
            "tools.0.allowed_callers: programmatic tool calling (a tool called from code execution only",
        ),
    ],
)
def test_callers_no_code_execution_tool_serves_are_refused_in_words(tools, message):
    assert refusal(tools).startswith(message)


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ({**WEATHER, "name": "bad name"}, "tools.0.custom.name: String should match pattern"),
        ({**WEATHER, "name": "x" * 129}, "tools.0.custom.name: String should match pattern"),
        ({**WEATHER, "input_examples": "no"}, "tools.0.custom.input_examples: Input should be a valid list"),
        ({**WEATHER, "colour": "red"}, "tools.0.custom.colour: Extra inputs are not permitted"),
        ({"name": "t"}, "tools.0.custom.input_schema: Field required"),
        (
            {"name": "t", "input_schema": {"type": "string"}},
            "tools.0.custom.input_schema.type: Input should be",
        ),
        ({"name": "t", "input_schema": {"type": "object", "minProperties": "x"}}, "not a valid JSON Schema"),
        (
            {"type": "code_execution_20250825", "name": "python"},
            "tools.0.name: Input should be 'code_execution'",
        ),
        ({"type": "bash_20250124", "name": "shell"}, "tools.0.name: Input should be 'bash'"),
        ({"type": "hologram_2099", "name": "h"}, "tools.0.type: unknown tool type 'hologram_2099'"),
    ],
)
def test_bad_tools_get_the_api_path(tool, message):
    assert message in refusal([tool])


def test_tool_names_are_unique():
    assert refusal([WEATHER, WEATHER]).startswith("tools.1.custom.name: tool names must be unique")


def policy_error(**changes) -> str:
    request = params(**changes)
    with pytest.raises(InvalidRequestError) as info:
        tool_policy(request, parse_tools(request.tools))
    return info.value.message


def test_tool_choice_rules():
    time = {"name": "get_time", "input_schema": {"type": "object"}}
    request = params(tools=[WEATHER, time], tool_choice={"type": "tool", "name": "get_time"})
    policy = tool_policy(request, parse_tools(request.tools))
    assert (policy.mode, [t.name for t in policy.tools], policy.parallel) == ("tool", ["get_time"], True)
    request = params(tools=[WEATHER], tool_choice={"type": "any", "disable_parallel_tool_use": True})
    assert not tool_policy(request, parse_tools(request.tools)).parallel
    request = params(tools=[WEATHER], tool_choice={"type": "none"})
    assert not tool_policy(request, parse_tools(request.tools)).may_call
    assert "is not one of the provided tools" in policy_error(
        tools=[WEATHER], tool_choice={"type": "tool", "name": "nope"}
    )
    assert "requires tools" in policy_error(tool_choice={"type": "any"})
    thinking = {"type": "enabled", "budget_tokens": 1024}
    assert policy_error(tools=[WEATHER], tool_choice={"type": "any"}, thinking=thinking, max_tokens=2048) == (
        "Thinking may not be enabled when tool_choice forces tool use."
    )
