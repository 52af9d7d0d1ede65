"""Server-tool blocks sent back in a conversation (a resumed `pause_turn`, or any later turn):
checked, and read as the model read them when the server ran the tool.

In an assistant message a `server_tool_use` is a call of that turn, and the result block that
answers it (same message, later, `tool_use_id` = its id) is the call's result; together they
become the same turns the loop built (server_tools/loop.py). Tool references found by tool
searches make those deferred tools callable in this request.

A `tool_use` whose `caller` names a code execution call was made by that call's code
(programmatic tool calling): neither it nor its `tool_result` is a turn of the model's; the
call's result arrives in a later assistant message than the call, once its code has ended.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reference_server.engine.base import ToolCall, Turn
from reference_server.errors import InvalidRequestError
from reference_server.protocol import (
    MessageParam,
    ServerContentBlockParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)
from reference_server.tools.definitions import ToolDefinition

from .results import Opener, found_tools, result_text

__all__ = [
    "CALL_TYPES",
    "RESULT_TYPES",
    "CodeResults",
    "code_caller",
    "code_results",
    "loaded_tools",
    "pending_call",
    "server_call",
    "server_result_turn",
]

# Result blocks this server can read back (those of the tools it runs).
RESULT_TYPES = frozenset(
    {
        "web_fetch_tool_result",
        "tool_search_tool_result",
        "web_search_tool_result",
        "mcp_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
    }
)
_SERVER_ID = re.compile(r"^srvtoolu_[a-zA-Z0-9_]+$")
_ANY_ID = re.compile(r"^[a-zA-Z0-9_-]+$")  # mcp_tool_use ids (the beta schema sets no prefix)
CALL_TYPES = frozenset({"server_tool_use", "mcp_tool_use"})
# A tool_use's `caller.type` when code made the call (SDK 2.17's ServerToolCaller types).
CODE_CALLERS = ("code_execution_20250825", "code_execution_20260120")


def _fields(block: ServerContentBlockParam) -> dict[str, Any]:
    return {"type": block.type, **(block.model_extra or {})}


def loaded_tools(messages: Sequence[MessageParam]) -> frozenset[str]:
    """Deferred tools that tool searches found earlier in the conversation: the server's
    (tool_search_tool_result) or the client's own (tool_reference blocks in a tool_result)."""
    found: set[str] = set()
    for message in messages:
        for block in () if isinstance(message.content, str) else message.content:
            if isinstance(block, ServerContentBlockParam) and block.type == "tool_search_tool_result":
                found.update(found_tools(_fields(block)))
            elif isinstance(block, ToolResultBlockParam) and isinstance(block.content, list):
                found.update(
                    item["tool_name"]
                    for item in block.content
                    if item.get("type") == "tool_reference" and isinstance(item.get("tool_name"), str)
                )
    return frozenset(found)


def server_call(block: ServerContentBlockParam, path: str, role: str) -> ToolCall:
    """A `server_tool_use` (or `mcp_tool_use`) block as the call it was."""
    raw = _fields(block)
    if role != "assistant":
        raise InvalidRequestError(f"{path}: {block.type} blocks may only appear in assistant messages")
    tool_id, name, arguments = raw.get("id"), raw.get("name"), raw.get("input")
    pattern = _SERVER_ID if block.type == "server_tool_use" else _ANY_ID
    if not isinstance(tool_id, str) or not pattern.match(tool_id):
        raise InvalidRequestError(f"{path}.id: String should match pattern '{pattern.pattern}'")
    if not isinstance(name, str):
        raise InvalidRequestError(f"{path}.name: Field required")
    if not isinstance(arguments, dict):
        raise InvalidRequestError(f"{path}.input: Input should be a valid dictionary")
    return ToolCall(tool_id, name, arguments)


def server_result_turn(
    block: ServerContentBlockParam,
    path: str,
    calls: Mapping[str, ToolCall],
    tools: Mapping[str, ToolDefinition],
    opener: Opener | None = None,
) -> Turn:
    """A result block as the `tool` turn the model read; it must answer an earlier call of its
    message."""
    raw = _fields(block)
    tool_use_id = raw.get("tool_use_id")
    if not isinstance(tool_use_id, str) or tool_use_id not in calls:
        raise InvalidRequestError(
            f"{path}.tool_use_id: a {block.type} block must follow the server_tool_use it answers,"
            " in the same message"
        )
    text, is_error = result_text(raw, tools, path, opener)
    return Turn("tool", text, tool_call_id=tool_use_id, name=calls[tool_use_id].name, is_error=is_error)


def pending_call(messages: Sequence[MessageParam]) -> ToolCall | None:
    """The server_tool_use that ends the final assistant message with no result after it: a turn
    paused before the server ran the call, sent back to go on (the server runs it first)."""
    last = messages[-1] if messages else None
    if last is None or last.role != "assistant" or isinstance(last.content, str) or not last.content:
        return None
    block = last.content[-1]
    if not isinstance(block, ServerContentBlockParam) or block.type not in CALL_TYPES:
        return None
    return server_call(block, f"messages.{len(messages) - 1}.content.{len(last.content) - 1}", "assistant")


def code_caller(block: ToolUseBlockParam, path: str) -> str | None:
    """The id of the code execution call whose code made this tool_use (None: the model's own);
    a caller of another shape is a 400."""
    caller = block.caller
    if caller is None or caller.get("type") == "direct":
        return None
    if caller.get("type") not in CODE_CALLERS:
        raise InvalidRequestError(
            f"{path}.caller.type: Input should be 'direct', {' or '.join(repr(c) for c in CODE_CALLERS)}"
        )
    tool_id = caller.get("tool_id")
    if not isinstance(tool_id, str):
        raise InvalidRequestError(f"{path}.caller.tool_id: Field required")
    return tool_id


@dataclass(frozen=True, slots=True)
class CodeResults:
    """The client's results for the tool calls a paused code execution call's code made."""

    tool_id: str  # the code execution call's
    results: dict[str, str]  # tool_use id -> the result's text


def code_results(messages: Sequence[MessageParam]) -> CodeResults | None:
    """The last message's answers to tool calls code made in the assistant message before it
    (None: it answers none). That message holds tool_result blocks only, each text: as the
    API, other content beside them or inside them is a 400."""
    if len(messages) < 2 or messages[-1].role != "user" or isinstance(messages[-2].content, str):
        return None
    index = len(messages) - 1
    callers = {
        block.id: caller
        for position, block in enumerate(messages[-2].content)
        if isinstance(block, ToolUseBlockParam)
        and (caller := code_caller(block, f"messages.{index - 1}.content.{position}")) is not None
    }
    last = messages[-1].content
    if not callers or isinstance(last, str):
        return None
    results: dict[str, str] = {}
    for position, block in enumerate(last):
        path = f"messages.{index}.content.{position}"
        if not isinstance(block, ToolResultBlockParam):
            raise InvalidRequestError(
                f"{path}: a message answering tool calls made by code execution may hold only"
                " tool_result blocks"
            )
        if block.tool_use_id in callers:
            results[block.tool_use_id] = _text_result(block, path)
    if len(set(callers.values())) != 1:
        raise InvalidRequestError(
            f"messages.{index - 1}: tool_use blocks made by code name more than one code execution call"
        )
    return CodeResults(next(iter(callers.values())), results)


def _text_result(block: ToolResultBlockParam, path: str) -> str:
    content = block.content
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for position, item in enumerate(content):
        if item.get("type") != "text" or not isinstance(item.get("text"), str):
            raise InvalidRequestError(
                f"{path}.content.{position}: the result of a tool call made by code execution is text;"
                f" {item.get('type')} blocks are not accepted"
            )
        texts.append(item["text"])
    return "\n".join(texts)
