"""The faults of the DOC-*, IMG-* and CTX-* properties (part of faults.fault_catalogue): how
servers and translators get documents, images, citations and context management wrong, plus the
extra faults test_content_proofs.py proves one by one.

Each works on the scripted content target (scripted_content.py) and on the reference server
(which serves documents, citations and context management, and refuses images): a fault
rewrites what either would answer, never relies on one of them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .fault_proxy import Fault, Request, Response
from .faults import (
    JSONDict,
    edit_payloads,
    error,
    fake_message,
    message_json,
    status_instead,
    strip,
    when_error,
)

__all__ = ["EXTRA_CONTENT_FAULTS", "content_fault_catalogue"]

COUNT_PATH = "/v1/messages/count_tokens"


def _blocks(body: Any) -> Iterator[JSONDict]:
    """The content blocks of a request's messages."""
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict):
                yield block


def _source(block: JSONDict) -> JSONDict:
    source = block.get("source")
    return source if isinstance(source, dict) else {}


def _refuse_when(
    predicate: Callable[[JSONDict], bool], message: str
) -> Callable[[Request], Request | Response]:
    """A 400 for any request holding a block for which `predicate` holds."""

    def apply(request: Request) -> Request | Response:
        if any(predicate(block) for block in _blocks(request.json)):
            return error(400, "invalid_request_error", message)
        return request

    return apply


def _uncounted(kind: str) -> Callable[[Request], Request]:
    """count_tokens that leaves the blocks of `kind` out of its count."""

    def apply(request: Request) -> Request:
        body = request.json
        if not request.path.startswith(COUNT_PATH) or not isinstance(body, dict):
            return request
        for message in body.get("messages") or []:
            if isinstance(message, dict) and isinstance(message.get("content"), list):
                message["content"] = [
                    b for b in message["content"] if not (isinstance(b, dict) and b.get("type") == kind)
                ]
        return request.with_json(body)

    return apply


def _asks_citations(body: Any) -> bool:
    return any(
        b.get("type") == "document" and isinstance(b.get("citations"), dict) and b["citations"].get("enabled")
        for b in _blocks(body)
    )


def _citations_flipped(request: Request, response: Response) -> Response:
    """Citations taken and dropped where refused, refused where served: wrong either way."""
    if not _asks_citations(request.json):
        return response
    if response.status >= 400:
        return fake_message(request)
    return error(400, "invalid_request_error", "citations are not supported")


def _citations(data: JSONDict) -> Iterator[JSONDict]:
    for block in data.get("content", []):
        if isinstance(block, dict) and isinstance(block.get("citations"), list):
            yield from (c for c in block["citations"] if isinstance(c, dict))


def _each_citation(change: Callable[[JSONDict], None]) -> Callable[[Request, Response], Response]:
    def apply(_: Request, data: JSONDict) -> None:
        for citation in _citations(data):
            change(citation)

    return message_json(apply)


def _misquote(citation: JSONDict) -> None:
    citation["cited_text"] = "A sentence that no document holds."


def _streamed_misquote(payload: JSONDict) -> None:
    delta = payload.get("delta")
    if isinstance(delta, dict) and isinstance(delta.get("citation"), dict):
        _misquote(delta["citation"])


def _no_file_id(citation: JSONDict) -> None:
    citation.pop("file_id", None)


def _streamed_no_file_id(payload: JSONDict) -> None:
    delta = payload.get("delta")
    if isinstance(delta, dict) and isinstance(delta.get("citation"), dict):
        _no_file_id(delta["citation"])


def _shift(keys: tuple[str, str], by: int) -> Callable[[JSONDict], None]:
    def change(citation: JSONDict) -> None:
        for key in keys:
            if isinstance(citation.get(key), int):
                citation[key] += by

    return change


def _tool_results_counted_last(citation: JSONDict) -> None:
    """DOC-010's request has the tool's search result (0) before a top-level one (1): a server
    that numbers top-level results first swaps them."""
    if citation.get("search_result_index") in (0, 1):
        citation["search_result_index"] = 1 - citation["search_result_index"]


def _drop_citations(_: Request, data: JSONDict) -> None:
    for block in data.get("content", []):
        if isinstance(block, dict) and block.get("type") == "text":
            block["citations"] = None


def _edits(data: JSONDict, kind: str) -> Iterator[JSONDict]:
    managed = data.get("context_management")
    edits = managed.get("applied_edits") if isinstance(managed, dict) else None
    for edit in edits if isinstance(edits, list) else []:
        if isinstance(edit, dict) and edit.get("type") == kind:
            yield edit


def _recount(kind: str, key: str) -> Callable[[Request, Response], Response]:
    """The edit's count one too high (it counts what it kept as well)."""

    def change(_: Request, data: JSONDict) -> None:
        for edit in _edits(data, kind):
            if isinstance(edit.get(key), int):
                edit[key] += 1

    return message_json(change)


def _no_edits(_: Request, data: JSONDict) -> None:
    """The edits applied to the prompt, but not reported."""
    data.pop("context_management", None)


def _no_streamed_edits(payload: JSONDict) -> None:
    payload.pop("context_management", None)


def _is_pdf(block: JSONDict) -> bool:
    return block.get("type") == "document" and _source(block).get("type") == "base64"


def _is_gif_or_webp(block: JSONDict) -> bool:
    return block.get("type") == "image" and _source(block).get("media_type") in ("image/gif", "image/webp")


def _many_images(request: Request) -> Request | Response:
    """The 2000 px limit of requests with more than 20 images applied to every such request."""
    if sum(b.get("type") == "image" for b in _blocks(request.json)) > 20:
        return error(400, "invalid_request_error", "too many images")
    return request


accept = when_error(fake_message)

# Faults proved one at a time besides the catalogue's (property id, fault).
EXTRA_CONTENT_FAULTS: dict[str, tuple[str, Fault]] = {
    "a 500 for a PDF over 100 pages": (
        "DOC-003",
        Fault("page limit crashes", response=status_instead(500, "api_error")),
    ),
    "character range off by one": (
        "DOC-006",
        Fault(
            "char_location one past the quote",
            response=_each_citation(_shift(("start_char_index", "end_char_index"), 1)),
        ),
    ),
    "more than 20 images refused outright": ("IMG-004", Fault("21 images refused", request=_many_images)),
    "cleared_thinking_turns counts the kept turn": (
        "CTX-001",
        Fault(
            "thinking turns miscounted",
            response=_recount("clear_thinking_20251015", "cleared_thinking_turns"),
        ),
    ),
    "tool uses cleared but not reported": (
        "CTX-003",
        Fault("no applied_edits", response=message_json(_no_edits)),
    ),
}


def content_fault_catalogue() -> dict[str, Fault]:
    """Property id → its fault, for DOC-*, IMG-* and CTX-*."""
    return {
        "DOC-001": Fault(
            "PDF documents refused (text documents only)", request=_refuse_when(_is_pdf, "PDF not supported")
        ),
        "DOC-002": Fault("documents left out of count_tokens", request=_uncounted("document")),
        "DOC-003": Fault("the 100-page limit not enforced", response=accept),
        "DOC-004": Fault("a broken PDF crashes the server (500)", response=status_instead(500, "api_error")),
        "DOC-005": Fault(
            "citations ignored where refused, refused where served", response=_citations_flipped
        ),
        "DOC-006": Fault(
            "cited_text not in the source",
            response=_each_citation(_misquote),
            frames=edit_payloads("content_block_delta", _streamed_misquote),
        ),
        "DOC-007": Fault(
            "page numbers 0-based",
            response=_each_citation(_shift(("start_page_number", "end_page_number"), -1)),
        ),
        "DOC-008": Fault("citations silently dropped", response=message_json(_drop_citations)),
        "DOC-009": Fault(
            "search_result_index 1-based",
            response=_each_citation(_shift(("search_result_index",), 1)),
        ),
        "DOC-010": Fault(
            "search results in tool results numbered after the top-level ones",
            response=_each_citation(_tool_results_counted_last),
        ),
        "DOC-011": Fault(
            "citations without their required file_id key",
            response=_each_citation(_no_file_id),
            frames=edit_payloads("content_block_delta", _streamed_no_file_id),
        ),
        "IMG-001": Fault(
            "GIF and WebP images refused", request=_refuse_when(_is_gif_or_webp, "unsupported image")
        ),
        "IMG-002": Fault("any media type taken", response=accept),
        "IMG-003": Fault("image data never checked against its media type", response=accept),
        "IMG-004": Fault("dimension limits not enforced", response=accept),
        "IMG-005": Fault("image count not limited", response=accept),
        "IMG-006": Fault("image size not limited", response=accept),
        "IMG-007": Fault("images left out of count_tokens", request=_uncounted("image")),
        "CTX-001": Fault("applied_edits missing from the Message", response=message_json(_no_edits)),
        "CTX-002": Fault(
            "applied_edits missing from the stream", frames=edit_payloads("message_delta", _no_streamed_edits)
        ),
        "CTX-003": Fault(
            "cleared_tool_uses counts the kept call",
            response=_recount("clear_tool_uses_20250919", "cleared_tool_uses"),
        ),
        "CTX-004": Fault("count_tokens ignores the edits", request=strip("context_management", COUNT_PATH)),
        "CTX-005": Fault("edits the model lacks silently ignored", response=accept),
    }
