"""Tool turns in a conversation: `tool_use` blocks in assistant messages paired by id with
`tool_result` blocks in the next user message, checked as the API checks them, and turned
into the engine's neutral `ToolCall`s and `tool` turns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reference_server.engine.base import ImagePart, ToolCall, Turn
from reference_server.engine.toolformat import tool_function
from reference_server.errors import InvalidRequestError
from reference_server.protocol import MessageParam, ToolResultBlockParam, ToolUseBlockParam
from reference_server.tools.definitions import ToolDefinition


def reference_text(name: str, tools: Mapping[str, ToolDefinition]) -> str:
    """What the model reads of a found tool: its definition, as the tools section lists one."""
    tool = tools.get(name)
    if tool is None:
        return f"Tool found: {name} (not one of this request's tools)"
    return "Tool found; it can now be called:\n" + json.dumps(tool_function(tool.spec()), ensure_ascii=False)


__all__ = ["check_tool_pairing", "tool_call", "tool_result_turn"]

_TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
# A reader of the content blocks a tool result may hold besides text and tool references
# (search results, documents): (block, its path, its position in the result) -> the text the
# model reads, or None when it reads no such block. The caller's, so that this module knows
# nothing of documents.
NestedReader = Callable[[dict[str, Any], str, int], str | None]
NEEDS_TOOLS = "Requests which include `tool_use` or `tool_result` blocks must define tools."


def _blocks(message: MessageParam) -> Sequence[object]:
    return () if isinstance(message.content, str) else message.content


def check_tool_pairing(messages: Sequence[MessageParam], *, have_tools: bool) -> dict[str, str]:
    """Every tool_use answered by a tool_result in the very next user message, every
    tool_result answering a tool_use of the message just before, results first in their
    message, ids well formed and unique. Returns the tool name of each tool_use id."""
    names: dict[str, str] = {}
    for index, message in enumerate(messages):
        for position, block in enumerate(_blocks(message)):
            path = f"messages.{index}.content.{position}"
            if isinstance(block, ToolUseBlockParam | ToolResultBlockParam) and not have_tools:
                raise InvalidRequestError(NEEDS_TOOLS)
            if isinstance(block, ToolUseBlockParam):
                if message.role != "assistant":
                    raise InvalidRequestError(
                        f"{path}: tool_use blocks may only appear in assistant messages"
                    )
                if not _TOOL_USE_ID.match(block.id):
                    raise InvalidRequestError(f"{path}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
                if block.id in names:
                    raise InvalidRequestError(
                        f"{path}: `tool_use` ids must be unique, found {block.id!r} twice"
                    )
                names[block.id] = block.name
            elif isinstance(block, ToolResultBlockParam) and message.role != "user":
                raise InvalidRequestError(f"{path}: tool_result blocks may only appear in user messages")
    for index, message in enumerate(messages):
        used = [b.id for b in _blocks(message) if isinstance(b, ToolUseBlockParam)]
        following = messages[index + 1] if index + 1 < len(messages) else None
        answered = {
            b.tool_use_id
            for b in (_blocks(following) if following else ())
            if isinstance(b, ToolResultBlockParam)
        }
        missing = [tool_id for tool_id in used if tool_id not in answered]
        if missing:
            raise InvalidRequestError(
                f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
                f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                "`tool_result` block in the next message."
            )
        _check_results(messages, index)
    return names


def _check_results(messages: Sequence[MessageParam], index: int) -> None:
    previous = messages[index - 1] if index > 0 else None
    offered = {b.id for b in _blocks(previous) if isinstance(b, ToolUseBlockParam)} if previous else set()
    seen_other = False
    for position, block in enumerate(_blocks(messages[index])):
        path = f"messages.{index}.content.{position}"
        if not isinstance(block, ToolResultBlockParam):
            seen_other = True
            continue
        if block.tool_use_id not in offered:
            raise InvalidRequestError(
                f"{path}: unexpected `tool_use_id` found in `tool_result` blocks: {block.tool_use_id}. "
                "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
            )
        if seen_other:
            raise InvalidRequestError(
                f"{path}: `tool_result` blocks must come first in the user message, before any other content"
            )


def tool_call(block: ToolUseBlockParam) -> ToolCall:
    return ToolCall(block.id, block.name, block.input)


def tool_result_turn(
    block: ToolResultBlockParam,
    path: str,
    name: str,
    tools: Mapping[str, ToolDefinition] | None = None,
    nested: NestedReader | None = None,
    image: Callable[[dict[str, Any], str], ImagePart | None] | None = None,
) -> Turn:
    """A tool_result as a `tool` turn: its string content, or its blocks' text joined; a
    `tool_reference` (a client-side tool search's answer) shows the tool's definition, which
    makes it callable (server_tools/history.py `loaded_tools`); other blocks are read by
    `nested` (search results and documents, citable like the same blocks in user content), and
    images by `image` on a vision model (a computer use screenshot: the turn's images)."""
    content = block.content
    images: list[ImagePart] = []
    if content is None or isinstance(content, str):
        text = content or ""
    else:
        texts = []
        for position, item in enumerate(content):
            kind = item.get("type")
            seen = (
                image(item, f"{path}.content.{position}") if image is not None and kind == "image" else None
            )
            if seen is not None:
                images.append(seen)
                continue
            if kind == "tool_reference" and isinstance(item.get("tool_name"), str):
                texts.append(reference_text(item["tool_name"], tools or {}))
                continue
            read = nested(item, f"{path}.content.{position}", position) if nested and kind != "text" else None
            if read is not None:
                texts.append(read)
                continue
            if kind != "text" or not isinstance(item.get("text"), str):
                raise InvalidRequestError(
                    f"{path}.content.{position}: {kind} blocks in tool results are not supported by this "
                    "server (the model is text-only); send the result as text"
                )
            texts.append(item["text"])
        text = "\n\n".join(texts)
    return Turn(
        "tool",
        text,
        tool_call_id=block.tool_use_id,
        name=name,
        is_error=bool(block.is_error),
        images=tuple(images),
    )
