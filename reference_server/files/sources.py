"""`{"type": "file", "file_id"}` sources in document and image blocks, replaced by the file's
bytes as the inline source of its type before the request is read, so a file source is checked,
rendered and counted exactly as the same content sent inline (create, count_tokens, batches).

A PDF becomes a base64 PDF source, plain text a text source, an image a base64 image source;
a file of another type in that place is a 400, an unknown or deleted id a 404 (Files API guide:
https://platform.claude.com/docs/en/build-with-claude/files, "Error handling").
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any, TypeVar

from pydantic import BaseModel

from reference_server.errors import InvalidRequestError, NotFoundError
from reference_server.files.store import FileStore
from reference_server.protocol import DocumentBlockParam, ImageBlockParam, MessageParam
from reference_server.protocol.requests import PromptParams, ToolResultBlockParam

__all__ = ["has_file_sources", "inline_file_sources", "inlined"]

P = TypeVar("P", bound=PromptParams)
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def _is_file_source(source: Any) -> bool:
    return isinstance(source, dict) and source.get("type") == "file"


def has_file_sources(params: PromptParams) -> bool:
    return any(_is_file_source(_source(block)) for _, block in _blocks(params.messages))


async def inlined(params: P, store: FileStore | None) -> P:
    """`params` with file sources replaced by the files' content, read off the event loop."""
    if not has_file_sources(params):
        return params
    return await asyncio.to_thread(inline_file_sources, params, store)


def inline_file_sources(params: P, store: FileStore | None) -> P:
    """`params` with every file source replaced by its content (blocking: run it off the loop)."""
    if not has_file_sources(params):
        return params
    messages = [
        message
        if isinstance(message.content, str)
        else message.model_copy(
            update={
                "content": [
                    _block(b, f"messages.{m}.content.{i}", store) for i, b in enumerate(message.content)
                ]
            }
        )
        for m, message in enumerate(params.messages)
    ]
    return params.model_copy(update={"messages": messages})


def _blocks(messages: list[MessageParam]) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for m, message in enumerate(messages):
        if isinstance(message.content, str):
            continue
        for i, block in enumerate(message.content):
            found.append((f"messages.{m}.content.{i}", block))
            if isinstance(block, ToolResultBlockParam) and isinstance(block.content, list):
                found.extend(
                    (f"messages.{m}.content.{i}.content.{j}", b) for j, b in enumerate(block.content)
                )
    return found


def _source(block: Any) -> Any:
    if isinstance(block, BaseModel):
        return getattr(block, "source", None)
    return block.get("source") if isinstance(block, dict) else None


def _block(block: Any, path: str, store: FileStore | None) -> Any:
    if isinstance(block, DocumentBlockParam | ImageBlockParam) and _is_file_source(block.source):
        kind = "document" if isinstance(block, DocumentBlockParam) else "image"
        inlined = block.model_copy(update={"source": _inline(block.source, kind, f"{path}.source", store)})
        if isinstance(inlined, DocumentBlockParam):
            inlined._file_id = block.source.get("file_id")  # its citations name the file
        return inlined
    if isinstance(block, ToolResultBlockParam) and isinstance(block.content, list):
        content = [
            {**item, "source": _inline(item["source"], item["type"], f"{path}.content.{j}.source", store)}
            if isinstance(item, dict)
            and item.get("type") in ("document", "image")
            and _is_file_source(item.get("source"))
            else item
            for j, item in enumerate(block.content)
        ]
        inlined_result = block.model_copy(update={"content": content})
        inlined_result._file_ids = {
            j: item["source"]["file_id"]
            for j, item in enumerate(block.content)
            if isinstance(item, dict)
            and item.get("type") == "document"
            and _is_file_source(item.get("source"))
        }
        return inlined_result
    return block


def _inline(source: dict[str, Any], kind: str, path: str, store: FileStore | None) -> dict[str, Any]:
    extra = sorted(set(source) - {"type", "file_id"})
    if extra:
        raise InvalidRequestError(f"{path}.{extra[0]}: Extra inputs are not permitted")
    file_id = source.get("file_id")
    if not isinstance(file_id, str):
        raise InvalidRequestError(f"{path}.file_id: Field required")
    found = store.read(file_id) if store is not None else None
    if found is None:
        raise NotFoundError(f"{path}.file_id: no file with id {file_id!r}")
    record, data = found
    mime = record.mime_type
    if kind == "image":
        if mime not in IMAGE_TYPES:
            raise InvalidRequestError(
                f"{path}.file_id: file {file_id!r} is {mime}, not an image (JPEG, PNG, GIF or WebP)"
            )
        return {"type": "base64", "media_type": mime, "data": base64.b64encode(data).decode()}
    if mime == "application/pdf":
        return {"type": "base64", "media_type": mime, "data": base64.b64encode(data).decode()}
    if mime == "text/plain":
        try:
            return {"type": "text", "media_type": mime, "data": data.decode("utf-8")}
        except UnicodeDecodeError:
            raise InvalidRequestError(f"{path}.file_id: file {file_id!r} is not UTF-8 text") from None
    raise InvalidRequestError(
        f"{path}.file_id: file {file_id!r} is {mime}: a document block takes a PDF or plain text file"
    )
