"""The built-in tool-calling format (Hermes style, as Qwen2.5, Hermes and SmolLM3 templates use).

Tools are listed in a system section; a call is one line of JSON between `<tool_call>` tags and a
result is wrapped in `<tool_response>` tags inside a user turn:

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

Models whose chat template renders tools get their own template for the prompt
(`ChatTokenizer.render`); either way the model *answers* in this format, because serving
constrains its output with a grammar built from the same strings (`call_prefix`, `CALL_SUFFIX`,
`CALL_SEPARATOR`), and parses it back with them. Nothing here knows Anthropic JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .base import Role, ToolCall, ToolSpec, Turn

__all__ = [
    "CALL_OPEN",
    "CALL_SEPARATOR",
    "CALL_SUFFIX",
    "CALL_TAG",
    "TAGS",
    "call_prefix",
    "plain_turns",
    "render_call",
    "tools_section",
]

CALL_TAG = "<tool_call>"
CALL_END_TAG = "</tool_call>"
# The tags a vocabulary may hold as one special token (Qwen2.5's 151657 and 151658): grammars
# then name them as that token (tools/grammar.py), since the model writes it, not the text.
TAGS = (CALL_TAG, CALL_END_TAG)
CALL_OPEN = CALL_TAG + "\n"
CALL_SUFFIX = "}\n" + CALL_END_TAG
CALL_SEPARATOR = "\n"  # between two calls of one turn
RESPONSE_OPEN = "<tool_response>\n"
RESPONSE_CLOSE = "\n</tool_response>"


def call_prefix(name: str) -> str:
    """Everything of a call before its arguments' JSON (which then ends with CALL_SUFFIX)."""
    return CALL_OPEN + '{"name": ' + json.dumps(name) + ', "arguments": '


def render_call(call: ToolCall) -> str:
    return call_prefix(call.name) + json.dumps(call.arguments, ensure_ascii=False) + CALL_SUFFIX


def tool_function(tool: ToolSpec) -> dict[str, Any]:
    """A tool as chat templates and the tools section take it (OpenAI's function shape)."""
    function: dict[str, Any] = {"name": tool.name, "description": tool.description}
    function["parameters"] = dict(tool.parameters)
    return {"type": "function", "function": function}


def tools_section(tools: Sequence[ToolSpec]) -> str:
    """The system-prompt section that offers `tools` and says how to call them."""
    listed = "\n".join(json.dumps(tool_function(tool), ensure_ascii=False) for tool in tools)
    return (
        "# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{listed}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def _result_text(turn: Turn) -> str:
    text = f"Error: {turn.text}" if turn.is_error else turn.text
    return RESPONSE_OPEN + text + RESPONSE_CLOSE


def plain_turns(turns: Sequence[Turn], tools: Sequence[ToolSpec]) -> list[Turn]:
    """`turns` as plain system/user/assistant text for a template that knows no tools: the
    tools section joins the (first) system turn, calls follow their assistant's text, and the
    results of consecutive tool turns form one user turn."""
    out: list[Turn] = []
    if tools:
        section = tools_section(tools)
        if turns and turns[0].role == "system":
            out.append(Turn("system", f"{turns[0].text}\n\n{section}"))
            turns = turns[1:]
        else:
            out.append(Turn("system", section))
    for turn in turns:
        role: Role = turn.role
        if turn.role == "tool":
            text, role = _result_text(turn), "user"
        elif turn.tool_calls:
            calls = CALL_SEPARATOR.join(render_call(call) for call in turn.tool_calls)
            text = f"{turn.text}\n{calls}" if turn.text else calls
        else:
            text = turn.text
        if out and out[-1].role == role and role != "system":
            # A user turn's images stay with it (vision models render them as parts).
            out[-1] = Turn(role, f"{out[-1].text}\n{text}", images=out[-1].images + turn.images)
        else:
            out.append(Turn(role, text, images=turn.images))
    return out


def template_messages(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """`turns` as the messages of a Hugging Face chat template that takes tools."""
    messages: list[dict[str, Any]] = []
    for turn in turns:
        message: dict[str, Any] = {"role": turn.role, "content": turn.text}
        if turn.tool_calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function", "function": _function_call(call)}
                for call in turn.tool_calls
            ]
        if turn.role == "tool":
            message.update(tool_call_id=turn.tool_call_id, name=turn.name)
            if turn.is_error:
                message["content"] = f"Error: {turn.text}"
        messages.append(message)
    return messages


def _function_call(call: ToolCall) -> Mapping[str, Any]:
    return {"name": call.name, "arguments": dict(call.arguments)}
