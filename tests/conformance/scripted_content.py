"""A scripted target that also serves documents, images, citations and context management.

It wraps scripted_target.app (tools, structured outputs, thinking) without changing it: a
create or count_tokens request is first checked and rewritten here, then answered by
scripted_target as plain text, and its answer completed here.

- Documents (text, content, base64 PDF read with pypdf; 100 pages per request) and images
  (checked with Pillow as the API checks them: type, data of that type, 5 MB, 8000 px or 2000 px
  beyond 20 images, 100 per request) become text blocks whose size follows theirs (an image
  stands for width x height / 750 tokens), so count_tokens and usage grow with them.
- With citations enabled, the answer quotes the first sentence, block or page of each such
  document, with a real citation (char_location, content_block_location, page_location), also
  streamed as citations_delta.
- `context_management` (behind its beta): clear_thinking_20251015 drops the thinking of older
  assistant turns, clear_tool_uses_20250919 replaces the oldest tool results once its trigger is
  passed; the response reports both in `applied_edits` (the stream in its message_delta) and
  count_tokens gives `original_input_tokens`. compact_20260112 is refused: the capabilities say
  the model lacks it.
"""

from __future__ import annotations

import base64
import binascii
import copy
import io
import json
import math
from typing import Any

from PIL import Image, UnidentifiedImageError
from pypdf import PdfReader
from pypdf.errors import PyPdfError

from . import scripted_target as base
from .scripted_target import JSONDict, Refused

BETA = "context-management-2025-06-27"
IMAGE_TYPES = {"image/jpeg": "JPEG", "image/png": "PNG", "image/gif": "GIF", "image/webp": "WEBP"}
CLEARED = "[cleared]"

MODEL_INFO: JSONDict = copy.deepcopy(base.MODEL_INFO)
MODEL_INFO["display_name"] = "Scripted content target"
MODEL_INFO["capabilities"].update(
    citations={"supported": True},
    image_input={"supported": True},
    pdf_input={"supported": True},
    context_management={
        "supported": True,
        "clear_thinking_20251015": {"supported": True},
        "clear_tool_uses_20250919": {"supported": True},
        "compact_20260112": {"supported": False},
    },
)


class Document:
    """A document as sent: its kind, title and parts (the text; the blocks; the pages)."""

    def __init__(
        self, kind: str, title: str | None, parts: list[str], cite: bool, source: str | None = None
    ) -> None:
        self.kind, self.title, self.parts, self.cite, self.source = kind, title, parts, cite, source

    def citation(self, index: int) -> JSONDict:
        """A citation of the first sentence, block or page (`index`: document_index, or
        search_result_index for a search result)."""
        if self.kind == "search_result":
            place = {"type": "search_result_location", "start_block_index": 0, "end_block_index": 1}
            return {
                **place,
                "cited_text": self.parts[0],
                "search_result_index": index,
                "source": self.source,
                "title": self.title,
            }
        common = {"document_index": index, "document_title": self.title, "file_id": None}
        first = self.parts[0]
        if self.kind == "text":
            end = first.find(". ") + 1 or len(first)
            place = {"type": "char_location", "start_char_index": 0, "end_char_index": end}
            return {**place, "cited_text": first[:end], **common}
        if self.kind == "content":
            place = {"type": "content_block_location", "start_block_index": 0, "end_block_index": 1}
            return {**place, "cited_text": first, **common}
        place = {"type": "page_location", "start_page_number": 1, "end_page_number": 2}
        return {**place, "cited_text": first, **common}


def _decode(data: Any, path: str) -> bytes:
    if not isinstance(data, str) or not data:
        raise Refused(f"{path}: base64 data required")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise Refused(f"{path}: invalid base64 data") from None


def _document(block: JSONDict, path: str) -> Document:
    source = block.get("source") or {}
    kind = source.get("type")
    cite = (block.get("citations") or {}).get("enabled") is True
    if kind == "text" and source.get("media_type") == "text/plain" and isinstance(source.get("data"), str):
        return Document("text", block.get("title"), [source["data"]], cite)
    if kind == "content":
        content = source.get("content")
        items = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(items, list) or not all(
            isinstance(b, dict) and b.get("type") == "text" for b in items
        ):
            raise Refused(f"{path}.source.content: text blocks only")
        return Document("content", block.get("title"), [str(b.get("text")) for b in items], cite)
    if kind == "base64":
        if source.get("media_type") != "application/pdf":
            raise Refused(f"{path}.source.media_type: Input should be 'application/pdf'")
        raw = _decode(source.get("data"), f"{path}.source.data")
        if not raw.startswith(b"%PDF-"):
            raise Refused(f"{path}.source.data: The PDF specified was not valid")
        try:
            reader = PdfReader(io.BytesIO(raw))
            pages = [page.extract_text() for page in reader.pages]
        except (PyPdfError, ValueError, KeyError, OSError):
            raise Refused(f"{path}.source.data: The PDF specified was not valid") from None
        if not pages:
            raise Refused(f"{path}.source.data: The PDF specified has no pages")
        return Document("pdf", block.get("title"), pages, cite)
    raise Refused(f"{path}.source: unsupported document source")


def _image(block: JSONDict, path: str, count: int) -> tuple[int, int]:
    source = block.get("source") or {}
    media_type = source.get("media_type")
    if source.get("type") != "base64" or media_type not in IMAGE_TYPES:
        raise Refused(f"{path}.source.media_type: Input should be {', '.join(IMAGE_TYPES)}")
    if len(str(source.get("data"))) > 5 * 1024 * 1024:
        raise Refused(f"{path}.source.data: image exceeds 5 MB maximum")
    raw = _decode(source.get("data"), f"{path}.source.data")
    try:
        with Image.open(io.BytesIO(raw)) as image:
            found, size = image.format, image.size
            image.verify()
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        raise Refused(f"{path}.source.data: Could not process image") from None
    if found != IMAGE_TYPES[media_type]:
        raise Refused(f"{path}.source: Image does not match the provided media type {media_type}")
    limit = 2000 if count > 20 else 8000
    if max(size) > limit:
        raise Refused(f"{path}.source.data: image dimensions exceed max allowed size: {limit} pixels")
    return size


def _as_text(text: str) -> JSONDict:
    return {"type": "text", "text": text}


def _blocks_in_order(content: list[Any]) -> list[tuple[list[Any], int, JSONDict, str]]:
    """A message's blocks, each with the list that holds it, in the order they appear: a
    tool_result's blocks (search results, documents) where the tool_result is."""
    found: list[tuple[list[Any], int, JSONDict, str]] = []
    for j, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        found.append((content, j, block, str(j)))
        inner = block.get("content") if block.get("type") == "tool_result" else None
        if isinstance(inner, list):
            found += [(inner, k, b, f"{j}.content.{k}") for k, b in enumerate(inner) if isinstance(b, dict)]
    return found


def read_content(body: JSONDict) -> tuple[JSONDict, list[Document]]:
    """The body with its documents and images as text, and its documents in order."""
    messages = copy.deepcopy(body.get("messages") or [])
    blocks = [
        (container, j, b, f"messages.{i}.content.{where}")
        for i, m in enumerate(messages)
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for container, j, b, where in _blocks_in_order(m["content"])
    ]
    images = sum(b.get("type") == "image" for _, _, b, _ in blocks)
    if images > 100:
        raise Refused(f"messages: A maximum of 100 images may be provided per request, found {images}")
    documents: list[Document] = []
    for container, j, block, path in blocks:
        if block.get("type") == "document":
            documents.append(_document(block, path))
            document = documents[-1]
            container[j] = _as_text(f"Document: {document.title}\n" + "\n".join(document.parts))
        elif block.get("type") == "search_result":
            parts = [str(b.get("text")) for b in block.get("content") or [] if isinstance(b, dict)]
            cite = (block.get("citations") or {}).get("enabled") is True
            documents.append(Document("search_result", block.get("title"), parts, cite, block.get("source")))
            container[j] = _as_text(f"Search result: {block.get('title')}\n" + "\n".join(parts))
        elif block.get("type") == "image":
            width, height = _image(block, path, images)
            container[j] = _as_text("image " + "x" * 4 * math.ceil(width * height / 750))
    pages = sum(len(d.parts) for d in documents if d.kind == "pdf")
    if pages > 100:
        raise Refused(f"A maximum of 100 PDF pages may be provided. Found {pages} in this request.")
    return {**body, "messages": messages}, documents


# ------------------------------------------------------------------ context management


def _turns_with_thinking(messages: list[JSONDict]) -> list[int]:
    return [
        n
        for n, m in enumerate(messages)
        if m.get("role") == "assistant"
        and isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and b.get("type") == "thinking" for b in m["content"])
    ]


def _clear_thinking(body: JSONDict, edit: JSONDict) -> tuple[JSONDict, JSONDict]:
    if (body.get("thinking") or {}).get("type") in (None, "disabled"):
        raise Refused("context_management.edits.0: clear_thinking_20251015 requires thinking")
    keep = edit.get("keep", {"type": "thinking_turns", "value": 1})
    turns = _turns_with_thinking(body["messages"])
    kept = len(turns) if keep in ("all", {"type": "all"}) else int(keep["value"])
    cleared = turns[: max(0, len(turns) - kept)]
    messages = [
        {**m, "content": [b for b in m["content"] if b.get("type") != "thinking"]} if n in cleared else m
        for n, m in enumerate(body["messages"])
    ]
    edited = {**body, "messages": messages}
    saved = base._prompt_tokens(body) - base._prompt_tokens(edited)
    return edited, {
        "type": "clear_thinking_20251015",
        "cleared_thinking_turns": len(cleared),
        "cleared_input_tokens": saved,
    }


def _clear_tool_uses(body: JSONDict, edit: JSONDict) -> tuple[JSONDict, JSONDict | None]:
    trigger = edit.get("trigger", {"type": "input_tokens", "value": 100_000})
    keep = int((edit.get("keep") or {"value": 3})["value"])
    uses = [
        b.get("id")
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    measured = len(uses) if trigger.get("type") == "tool_uses" else base._prompt_tokens(body)
    older = set(uses[: max(0, len(uses) - keep)])
    if measured < int(trigger["value"]) or not older:
        return body, None
    messages = [
        {
            **m,
            "content": [
                {**b, "content": CLEARED}
                if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") in older
                else b
                for b in m["content"]
            ],
        }
        if isinstance(m.get("content"), list)
        else m
        for m in body["messages"]
    ]
    edited = {**body, "messages": messages}
    saved = base._prompt_tokens(body) - base._prompt_tokens(edited)
    return edited, {
        "type": "clear_tool_uses_20250919",
        "cleared_tool_uses": len(older),
        "cleared_input_tokens": saved,
    }


def manage(body: JSONDict, betas: set[str]) -> tuple[JSONDict, list[JSONDict] | None]:
    """The body as the edits leave it, and the applied edits (None: no edits were asked for)."""
    config = body.pop("context_management", None)
    if not config or not config.get("edits"):
        return body, None
    if BETA not in betas:
        raise Refused(f"context_management: requires the anthropic-beta: {BETA} header")
    applied: list[JSONDict] = []
    for n, edit in enumerate(config["edits"]):
        if edit.get("type") == "clear_thinking_20251015":
            body, report = _clear_thinking(body, edit)
            applied.append(report)
        elif edit.get("type") == "clear_tool_uses_20250919":
            body, found = _clear_tool_uses(body, edit)
            applied += [found] if found else []
        else:
            raise Refused(f"context_management.edits.{n}: {edit.get('type')} is not supported")
    return body, applied


# ------------------------------------------------------------------ answers


def _cite(message: JSONDict, documents: list[Document]) -> None:
    """Replace the plain answer by a quote of each cited document, with its citation."""
    results = [d for d in documents if d.kind == "search_result"]
    sources = [d for d in documents if d.kind != "search_result"]
    cited = [(n, d) for group in (sources, results) for n, d in enumerate(group) if d.cite]
    texts = [b for b in message["content"] if b.get("type") == "text"]
    if not cited or len(texts) != 1 or message["stop_reason"] != "end_turn":
        return
    blocks: list[JSONDict] = [{"type": "text", "text": "The documents say: ", "citations": None}]
    for n, document in cited:
        citation = document.citation(n)
        blocks.append({"type": "text", "text": citation["cited_text"], "citations": [citation]})
    position = message["content"].index(texts[0])
    message["content"][position : position + 1] = blocks


def _stream(message: JSONDict, applied: list[JSONDict] | None) -> bytes:
    """scripted_target's events, with citations as citations_delta and the applied edits in the
    message_delta."""
    plain = copy.deepcopy(message)
    plain.pop("context_management", None)  # reported in the message_delta, not message_start
    for block in plain["content"]:
        if block.get("type") == "text" and block.get("citations"):
            block["citations"] = None
    out: list[JSONDict] = []
    for event in base.events(plain):
        index = event.get("index")
        if event["type"] == "content_block_stop" and message["content"][index].get("citations"):
            out += [
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "citations_delta", "citation": c},
                }
                for c in message["content"][index]["citations"]
            ]
        if event["type"] == "message_delta" and applied is not None:
            event["context_management"] = {"applied_edits": applied}
        out.append(event)
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in out).encode()


def _betas(headers: dict[str, str]) -> set[str]:
    return {beta.strip() for beta in headers.get("anthropic-beta", "").split(",") if beta.strip()}


def route(method: str, path: str, raw: bytes, headers: dict[str, str]) -> tuple[int, str, bytes]:
    """(status, content type, body); what this module does not serve goes to scripted_target."""
    path = path.split("?", 1)[0]
    if method == "GET" and path == "/v1/models":
        listing = {"data": [MODEL_INFO], "has_more": False, "first_id": base.MODEL, "last_id": base.MODEL}
        return 200, "application/json", json.dumps(listing).encode()
    if method == "GET" and path == f"/v1/models/{base.MODEL}":
        return 200, "application/json", json.dumps(MODEL_INFO).encode()
    if method != "POST" or path not in ("/v1/messages", "/v1/messages/count_tokens"):
        return base.route(method, path, raw)
    try:
        body = json.loads(raw)
    except ValueError:
        return base.route(method, path, raw)
    if not isinstance(body, dict):
        return base.route(method, path, raw)
    try:
        body, documents = read_content(body)
        original = base._prompt_tokens(body)
        body, applied = manage(body, _betas(headers))
        if path.endswith("count_tokens"):
            counted: JSONDict = {"input_tokens": base._prompt_tokens(body)}
            if applied is not None:
                counted["context_management"] = {"original_input_tokens": original}
            return 200, "application/json", json.dumps(counted).encode()
        message = base.answer(body)
    except Refused as refused:
        return base._error(400, "invalid_request_error", str(refused))
    _cite(message, documents)
    if applied is not None:
        message["context_management"] = {"applied_edits": applied}
    if body.get("stream"):
        return 200, "text/event-stream", _stream(message, applied)
    return 200, "application/json", json.dumps(message).encode()


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI app (run with fault_proxy.running_proxy)."""
    if scope["type"] != "http":
        return
    raw = await base.read_body(receive)
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    await base.respond(send, *route(scope["method"], scope["path"], raw, headers))
