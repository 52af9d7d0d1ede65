"""Server-tool result blocks, and what the model reads of them.

The same text is given to the model when the server runs the tool inside a turn and when the
block comes back in a later request's history, so that a resumed turn (`pause_turn`) reads
exactly what the first request read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reference_server.content import render_document
from reference_server.content.documents import MAX_TITLE_CHARS
from reference_server.engine.toolformat import tool_function
from reference_server.errors import InvalidRequestError
from reference_server.protocol import (
    DocumentBlockParam,
    ServerToolResultBlock,
    ToolSearchToolResultBlock,
    WebFetchToolResultBlock,
    WebSearchToolResultBlock,
)
from reference_server.tools.definitions import ToolDefinition

from .fetch import Fetched
from .search_index import SearchHit

SNIPPET_CHARS = 2000  # of a page's text, in its encrypted_content (what the model reads)

__all__ = [
    "Opener",
    "Sealer",
    "fetch_error",
    "fetch_result",
    "fetched_document",
    "found_tools",
    "result_text",
    "search_error",
    "search_result",
    "web_search_error",
    "web_search_result",
]

Sealer = Callable[[str], str]  # a page's text → encrypted_content
Opener = Callable[[str], str | None]  # encrypted_content → the text, None when it does not verify


def fetch_result(tool_use_id: str, fetched: Fetched, *, citable: bool = False) -> WebFetchToolResultBlock:
    """A fetch's result block; `citable`: the document has citations on (server_tools/citing.py)."""
    source = {"type": "base64" if fetched.media_type == "application/pdf" else "text"}
    source |= {"media_type": fetched.media_type, "data": fetched.data}
    # A document's title is at most 500 characters (a page's <title>, an index's first line)
    title = fetched.title[:MAX_TITLE_CHARS] if fetched.title else None
    document: dict[str, Any] = {"type": "document", "source": source, "title": title}
    if citable:
        document["citations"] = {"enabled": True}
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


def web_search_result(tool_use_id: str, hits: Sequence[SearchHit], seal: Sealer) -> WebSearchToolResultBlock:
    results = [
        {
            "type": "web_search_result",
            "url": hit.url,
            "title": hit.title,
            "encrypted_content": seal(f"{hit.title}\n{hit.url}\n{hit.text[:SNIPPET_CHARS]}"),
            "page_age": hit.page_age,
        }
        for hit in hits
    ]
    return WebSearchToolResultBlock(tool_use_id=tool_use_id, content=results)


def web_search_error(tool_use_id: str, code: str) -> WebSearchToolResultBlock:
    return WebSearchToolResultBlock(
        tool_use_id=tool_use_id, content={"type": "web_search_tool_result_error", "error_code": code}
    )


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
    block: ServerToolResultBlock | Mapping[str, Any],
    tools: Mapping[str, ToolDefinition],
    path: str,
    opener: Opener | None = None,
) -> tuple[str, bool]:
    """What the model reads of a result block, and whether it is an error. Web search results
    are read from their encrypted_content (`opener`; one that does not verify is a 400)."""
    raw = block.model_dump() if not isinstance(block, Mapping) else block
    content = raw.get("content")
    if raw.get("type") == "mcp_tool_result":
        return _mcp_text(content, path), raw.get("is_error") is True
    if raw.get("type") == "web_search_tool_result" and isinstance(content, list):
        return _search_text(content, path, opener), False
    if not isinstance(content, Mapping):
        raise InvalidRequestError(f"{path}.content: Input should be an object")
    kind = content.get("type")
    if kind in (
        "web_fetch_tool_result_error",
        "tool_search_tool_result_error",
        "web_search_tool_result_error",
    ):
        return f"error: {content.get('error_code')}", True
    if kind == "tool_search_tool_search_result":
        names = found_tools(raw)
        if not names:
            return "No tools matched.", False
        listed = [json.dumps(tool_function(tools[n].spec()), ensure_ascii=False) for n in names if n in tools]
        return "Tools found; they can now be called:\n" + "\n".join(listed), False
    if kind in _CODE_ERRORS:
        message = content.get("error_message")
        return f"error: {content.get('error_code')}" + (f" ({message})" if message else ""), True
    if kind in ("code_execution_result", "bash_code_execution_result"):
        return _ran_text(content), content.get("return_code") != 0
    if kind == "text_editor_code_execution_view_result":
        return str(content.get("content", "")), False
    if kind == "text_editor_code_execution_create_result":
        return ("File updated." if content.get("is_file_update") else "File created."), False
    if kind == "text_editor_code_execution_str_replace_result":
        lines = content.get("lines") or []
        return "Replaced:\n" + "\n".join(str(line) for line in lines), False
    if kind == "web_fetch_result":
        document = fetched_document(content)
        if document is None:
            return f"{content.get('url')}: the page has no text.", False
        return render_document(document, f"{path}.content.content").text, False
    raise InvalidRequestError(f"{path}.content.type: unknown result type {kind!r}")


_CODE_ERRORS = frozenset(
    {
        "code_execution_tool_result_error",
        "bash_code_execution_tool_result_error",
        "text_editor_code_execution_tool_result_error",
    }
)


def _ran_text(content: Mapping[str, Any]) -> str:
    """A run's result as the model reads it: its output, its errors, its exit status."""
    parts = [f"return code: {content.get('return_code')}"]
    if content.get("stdout"):
        parts.append(f"stdout:\n{content['stdout']}")
    if content.get("stderr"):
        parts.append(f"stderr:\n{content['stderr']}")
    return "\n".join(parts)


def fetched_document(content: Mapping[str, Any]) -> DocumentBlockParam | None:
    """The document of a `web_fetch_result`, or None when the page has no text."""
    document = DocumentBlockParam.model_validate(content.get("content"))
    if document.source.get("type") == "text" and not document.source.get("data"):
        return None
    return document


def _search_text(results: list[Any], path: str, opener: Opener | None) -> str:
    if not results:
        return "No results."
    parts = []
    for index, result in enumerate(results):
        sealed = result.get("encrypted_content") if isinstance(result, Mapping) else None
        text = opener(sealed) if opener is not None and isinstance(sealed, str) else None
        if text is None:
            raise InvalidRequestError(
                f"{path}.content.{index}.encrypted_content: Invalid `encrypted_content` in"
                " `web_search_result`"
            )
        parts.append(f"[{index + 1}] {text}")
    return "\n\n".join(parts)


def _mcp_text(content: Any, path: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequestError(f"{path}.content: Input should be a string or a list of text blocks")
    texts = []
    for index, item in enumerate(content):
        if (
            not isinstance(item, Mapping)
            or item.get("type") != "text"
            or not isinstance(item.get("text"), str)
        ):
            raise InvalidRequestError(
                f"{path}.content.{index}: only text blocks are read from an mcp_tool_result"
            )
        texts.append(item["text"])
    return "\n\n".join(texts)
