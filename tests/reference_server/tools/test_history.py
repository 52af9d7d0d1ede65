from __future__ import annotations

import json

import pytest

from reference_server.engine.base import ToolCall, Turn
from reference_server.errors import InvalidRequestError
from reference_server.protocol import MessageCreateParams
from reference_server.tools.definitions import ToolDefinition
from reference_server.validation import build_turns, parse_body

ANY_TOOL = ToolDefinition("any", "", {"type": "object"}, False)


def use(tool_id: str = "toolu_1", name: str = "get_weather") -> dict:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"city": "Paris"}}


def result(tool_id: str = "toolu_1", content: object = "18C", **extra) -> dict:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, **extra}


def turns(messages, *, have_tools: bool = True):
    body = {"model": "m", "max_tokens": 8, "messages": messages}
    params = parse_body(json.dumps(body).encode(), "application/json", MessageCreateParams)
    return build_turns(params, tools={"any": ANY_TOOL} if have_tools else None)


def refusal(messages, **kwargs) -> str:
    with pytest.raises(InvalidRequestError) as info:
        turns(messages, **kwargs)
    return info.value.message


ASK = {"role": "user", "content": "Weather in Paris?"}


def test_a_round_trip_becomes_calls_and_tool_turns():
    got = turns(
        [
            ASK,
            {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, use(), use("toolu_2")]},
            {
                "role": "user",
                "content": [
                    result(),
                    result(
                        "toolu_2",
                        [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                        is_error=True,
                    ),
                    {"type": "text", "text": "Thanks"},
                ],
            },
        ]
    )
    assert got == (
        Turn("user", "Weather in Paris?"),
        Turn(
            "assistant",
            "Checking.",
            tool_calls=(
                ToolCall("toolu_1", "get_weather", {"city": "Paris"}),
                ToolCall("toolu_2", "get_weather", {"city": "Paris"}),
            ),
        ),
        Turn("tool", "18C", tool_call_id="toolu_1", name="get_weather"),
        Turn("tool", "a\n\nb", tool_call_id="toolu_2", name="get_weather", is_error=True),
        Turn("user", "Thanks"),
    )


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [ASK, {"role": "assistant", "content": "Hi"}, {"role": "user", "content": [result()]}],
            "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_1",
        ),
        (
            [ASK, {"role": "assistant", "content": [use()]}, {"role": "user", "content": "no result"}],
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1",
        ),
        (
            [ASK, {"role": "assistant", "content": [use()]}],
            "messages.1: `tool_use` ids were found without `tool_result` blocks",
        ),
        (
            [
                ASK,
                {"role": "assistant", "content": [use()]},
                {"role": "user", "content": [{"type": "text", "text": "x"}, result()]},
            ],
            "messages.2.content.1: `tool_result` blocks must come first",
        ),
        (
            [ASK, {"role": "assistant", "content": [use(), use()]}, {"role": "user", "content": [result()]}],
            "messages.1.content.1: `tool_use` ids must be unique",
        ),
        (
            [
                ASK,
                {"role": "assistant", "content": [use("bad id!")]},
                {"role": "user", "content": [result("bad id!")]},
            ],
            "messages.1.content.0.id: String should match pattern",
        ),
        (
            [{"role": "user", "content": [use()]}],
            "messages.0.content.0: tool_use blocks may only appear in assistant",
        ),
        (
            [
                ASK,
                {"role": "assistant", "content": [use()]},
                {"role": "user", "content": [result(content=[{"type": "image", "source": {}}])]},
            ],
            "messages.2.content.0.content.0: image blocks in tool results are not supported",
        ),
    ],
)
def test_pairing_rules_have_the_api_messages(messages, message):
    assert message in refusal(messages)


def test_tool_blocks_need_tools():
    messages = [ASK, {"role": "assistant", "content": [use()]}, {"role": "user", "content": [result()]}]
    assert refusal(messages, have_tools=False) == (
        "Requests which include `tool_use` or `tool_result` blocks must define tools."
    )
