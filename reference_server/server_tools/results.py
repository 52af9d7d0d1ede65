"""Server-tool result blocks, and what the model reads of them.

The same text is given to the model when the server runs the tool inside a turn and when the
block comes back in a later request's history, so that a resumed turn (`pause_turn`) reads
exactly what the first request read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from reference_server.content import render_document
from reference_server.engine.toolformat import tool_function
from reference_server.errors import InvalidRequestError
from reference_server.protocol import (
    DocumentBlockParam,
    ServerToolResultBlock,
    ToolSearchToolResultBlock,
    WebFetchToolResultBlock,
)
from reference_server.tools.definitions import ToolDefinition

from .fetch import Fetched

__all__ = [
    "fetch_error",
    "fetch_result",
    "found_tools",
    "result_text",
    "search_error",
    "search_result",
]


def fetch_result(tool_use_id: str, fetched: Fetched) -> WebFetchToolResultBlock:
    source = {"type": "base64" if fetched.media_type == "application/pdf" else "text"}
    source |= {"media_type": fetched.media_type, "data": fetched.data}
    document: dict[str, Any] = {"type": "document", "source": source, "title": fetched.title}
    content = {
        "type": "web_fetch_result",
        "url": fetched.url,
        "retrieved_at": fetched.retrieved_at,
        "content": document,
    }
    return WebFetchToolResultBlock(tool_use_id=tool_use_id, content=content)


def fetch_error(tool_use_id: str, code: str) -> WebFetchToolResultBlock:
    return WebFetchToolResultBlock(
        tool_use_id=tool_use_id, content={"type": "web_fetch_tool_result_error", "error_code": code}
    )


def search_result(tool_use_id: str, names: Sequence[str]) -> ToolSearchToolResultBlock:
    references = [{"type": "tool_reference", "tool_name": name} for name in names]
    return ToolSearchToolResultBlock(
        tool_use_id=tool_use_id,
        content={"type": "tool_search_tool_search_result", "tool_references": references},
    )


def search_error(tool_use_id: str, message: str) -> ToolSearchToolResultBlock:
    content = {
        "type": "tool_search_tool_result_error",
        "error_code": "invalid_tool_input",
        "error_message": message,
    }
    return ToolSearchToolResultBlock(tool_use_id=tool_use_id, content=content)


def found_tools(block: Mapping[str, Any]) -> list[str]:
    """The tool names a tool_search_tool_result block references."""
    content = block.get("content")
    if not isinstance(content, Mapping) or content.get("type") != "tool_search_tool_search_result":
        return []
    references = content.get("tool_references")
    if not isinstance(references, list):
        return []
    return [
        ref["tool_name"]
        for ref in references
        if isinstance(ref, Mapping) and isinstance(ref.get("tool_name"), str)
    ]


def result_text(
    block: ServerToolResultBlock | Mapping[str, Any], tools: Mapping[str, ToolDefinition], path: str
) -> tuple[str, bool]:
    """What the model reads of a result block, and whether it is an error."""
    raw = block.model_dump() if not isinstance(block, Mapping) else block
    content = raw.get("content")
    if not isinstance(content, Mapping):
        raise InvalidRequestError(f"{path}.content: Input should be an object")
    kind = content.get("type")
    if kind in ("web_fetch_tool_result_error", "tool_search_tool_result_error"):
        return f"error: {content.get('error_code')}", True
    if kind == "tool_search_tool_search_result":
        names = found_tools(raw)
        if not names:
            return "No tools matched.", False
        listed = [json.dumps(tool_function(tools[n].spec()), ensure_ascii=False) for n in names if n in tools]
        return "Tools found; they can now be called:\n" + "\n".join(listed), False
    if kind == "web_fetch_result":
        document = DocumentBlockParam.model_validate(content.get("content"))
        if document.source.get("type") == "text" and not document.source.get("data"):
            return f"{content.get('url')}: the page has no text.", False
        return render_document(document, f"{path}.content.content").text, False
    raise InvalidRequestError(f"{path}.content.type: unknown result type {kind!r}")
