"""Document content blocks turned into the plain text a text-only model can read.

Sources (spec: RequestDocumentBlock): `text` (plain text), `content` (text blocks), `base64`
(a PDF, text-extracted page by page with pypdf); `url` and `file` are refused, since this
server has no network and no Files API. Limits, from the PDF support guide
(https://platform.claude.com/docs/en/build-with-claude/pdf-support): 32 MB per request,
100 pages per request, standard PDFs only (no passwords or encryption).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import ValidationError
from pypdf import PdfReader

from reference_server.content.images import require_fields, source_type, strict_base64
from reference_server.errors import InvalidRequestError
from reference_server.protocol import DocumentBlockParam, SearchResultBlockParam, TextBlockParam

__all__ = [
    "MAX_PDF_BYTES",
    "MAX_PDF_PAGES",
    "MAX_TITLE_CHARS",
    "DocumentKind",
    "RenderedDocument",
    "check_pdf_page_total",
    "render_document",
    "render_search_result",
]

MAX_PDF_BYTES = 32 * 1024 * 1024  # the whole request's limit, so no single PDF may exceed it
MAX_PDF_PAGES = 100
MAX_TITLE_CHARS = 500  # spec: title 1..500 characters

DocumentKind = Literal["text", "pdf", "content", "search_result"]
_SOURCE_TAGS = ("base64", "text", "content", "url")
T = TypeVar("T")


@dataclass(frozen=True)
class RenderedDocument:
    """A document as the model reads it (`text`) and as its parts (`pages`: one per PDF page,
    one per content text block, or the single text), which citations point into; `cite_index`
    is its document_index when citations are enabled on it (else None)."""

    text: str
    pages: tuple[str, ...]
    kind: DocumentKind
    title: str | None = None
    cite_index: int | None = None
    source: str | None = None  # a search result's source (its URL or identifier)
    file_id: str | None = None  # the Files API file it was read from


def render_document(block: DocumentBlockParam, path: str, cite_index: int | None = None) -> RenderedDocument:
    """The block's text, or a 400 naming the field at fault; `path` is the block's own path
    (`messages.0.content.2`). With a `cite_index` the header tells the model how to quote it
    (citations/)."""
    _check_labels(block, path)
    source, source_path = block.source, f"{path}.source"
    kind = source_type(source, source_path, _SOURCE_TAGS)
    if kind == "url":
        raise InvalidRequestError(
            f"{source_path}: URL document sources are not supported: this server has no network "
            "access; send the PDF as base64 data or the text as a text source"
        )
    if kind == "file":
        raise InvalidRequestError(
            f"{source_path}: file sources need the Files API, which this server does not serve; "
            "send the document as base64 data or text"
        )
    if kind == "text":
        return _rendered(block, "text", _text_pages(source, source_path), cite_index)
    if kind == "content":
        return _rendered(block, "content", _content_pages(source, source_path), cite_index)
    return _rendered(block, "pdf", _pdf_pages(source, source_path), cite_index)


def render_search_result(block: SearchResultBlockParam, cite_index: int | None) -> RenderedDocument:
    """A search_result block as the model reads it: title, source, then its text blocks; with
    a `cite_index` (its search_result_index) the quoting syntax (tag `r<index>`)."""
    name = "Search result" if cite_index is None else f"Search result {cite_index}"
    lines = [f"{name}: {block.title}", f"Source: {block.source}"]
    if cite_index is not None:
        lines.append(f"Quote it as <cite r{cite_index}>its exact sentences</cite>.")
    pages = tuple(part.text for part in block.content)
    text = "\n".join(lines) + "\n\n" + "\n\n".join(pages)
    return RenderedDocument(text, pages, "search_result", block.title, cite_index, block.source)


def check_pdf_page_total(pages: int) -> None:
    """The 100-page limit holds for the whole request, summed over its PDFs."""
    if pages > MAX_PDF_PAGES:
        raise InvalidRequestError(
            f"A maximum of {MAX_PDF_PAGES} PDF pages may be provided. Found {pages} in this request."
        )


def _check_labels(block: DocumentBlockParam, path: str) -> None:
    """`title` and `context` length rules the request model does not carry."""
    if block.title is not None and not block.title:
        raise InvalidRequestError(f"{path}.title: String should have at least 1 character")
    if block.title is not None and len(block.title) > MAX_TITLE_CHARS:
        raise InvalidRequestError(f"{path}.title: String should have at most {MAX_TITLE_CHARS} characters")
    if block.context is not None and not block.context:
        raise InvalidRequestError(f"{path}.context: String should have at least 1 character")


def _rendered(
    block: DocumentBlockParam, kind: DocumentKind, pages: tuple[str, ...], cite_index: int | None
) -> RenderedDocument:
    body = _pdf_body(pages) if kind == "pdf" else "\n\n".join(pages)
    text = _with_header(block, body, cite_index)
    return RenderedDocument(text, pages, kind, block.title, cite_index, file_id=block._file_id)


def _with_header(block: DocumentBlockParam, body: str, cite_index: int | None) -> str:
    """`Document: <title>`, then `Context: <context>`, a blank line, then the body, so the
    model can tell the document from the turn's own words. A citable document is numbered,
    with the quoting syntax the answer's grammar allows (citations/grammar.py)."""
    name = "Document" if cite_index is None else f"Document {cite_index}"
    lines = [f"{name}: {block.title}" if block.title else name]
    if block.context:
        lines.append(f"Context: {block.context}")
    if cite_index is not None:
        lines.append(f"Quote it as <cite {cite_index}>its exact sentences</cite>.")
    return "\n".join(lines) + "\n\n" + body


def _pdf_body(pages: Sequence[str]) -> str:
    total = len(pages)
    return "\n\n".join(f"--- Page {n} of {total} ---\n{page}" for n, page in enumerate(pages, 1))


def _text_pages(source: dict[str, Any], path: str) -> tuple[str, ...]:
    require_fields(source, path, ("type", "media_type", "data"))
    if source["media_type"] != "text/plain":
        raise InvalidRequestError(f"{path}.media_type: Input should be 'text/plain'")
    return (source["data"],)


def _content_pages(source: dict[str, Any], path: str) -> tuple[str, ...]:
    for key in source:
        if key not in ("type", "content"):
            raise InvalidRequestError(f"{path}.{key}: Extra inputs are not permitted")
    if "content" not in source:
        raise InvalidRequestError(f"{path}.content: Field required")
    content = source["content"]
    if isinstance(content, str):
        return (content,)
    if not isinstance(content, list):
        raise InvalidRequestError(f"{path}.content: Input should be a valid string or list")
    return tuple(_content_text(item, f"{path}.content.{i}") for i, item in enumerate(content))


def _content_text(item: Any, path: str) -> str:
    """One block of a `content` source: text is kept; images need a vision model."""
    kind = item.get("type") if isinstance(item, dict) else None
    if kind == "image":
        raise InvalidRequestError(
            f"{path}: image blocks inside a document's content are not supported by this server "
            "(the model is text-only)"
        )
    if kind != "text":
        raise InvalidRequestError(
            f"{path}: Input tag {kind!r} found using 'type' does not match any of the expected "
            "tags: 'text', 'image'"
        )
    try:
        return TextBlockParam.model_validate(item).text
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidRequestError(f"{path}.{where}: {first['msg']}" if where else first["msg"]) from None


def _pdf_pages(source: dict[str, Any], path: str) -> tuple[str, ...]:
    require_fields(source, path, ("type", "media_type", "data"))
    if source["media_type"] != "application/pdf":
        raise InvalidRequestError(f"{path}.media_type: Input should be 'application/pdf'")
    data: str = source["data"]
    if not data:
        raise InvalidRequestError(f"{path}.data: PDF cannot be empty")
    if len(data) > MAX_PDF_BYTES:
        raise InvalidRequestError(
            f"{path}.data: PDF exceeds the 32 MB request maximum: {len(data)} bytes > {MAX_PDF_BYTES} bytes"
        )
    return _extract_pages(strict_base64(data, f"{path}.data"), f"{path}.data")


def _extract_pages(raw: bytes, path: str) -> tuple[str, ...]:
    """Each page's text, in order, from a standard PDF of 1..100 pages."""
    reader = _open_pdf(raw, path)
    count = _unreadable_as_400(lambda: len(reader.pages), path)
    if count > MAX_PDF_PAGES:
        raise InvalidRequestError(f"{path}: A maximum of {MAX_PDF_PAGES} PDF pages may be provided.")
    if count == 0:
        raise InvalidRequestError(f"{path}: The PDF specified has no pages")
    return _unreadable_as_400(lambda: tuple(page.extract_text() for page in reader.pages), path)


def _open_pdf(raw: bytes, path: str) -> PdfReader:
    if not raw.lstrip().startswith(b"%PDF-"):
        raise InvalidRequestError(f"{path}: The PDF specified was not valid: missing %PDF- header")
    reader = _unreadable_as_400(lambda: PdfReader(io.BytesIO(raw)), path)
    if _unreadable_as_400(lambda: reader.is_encrypted, path):
        raise InvalidRequestError(
            f"{path}: encrypted or password-protected PDFs are not supported; send a standard PDF"
        )
    return reader


def _unreadable_as_400(read: Callable[[], T], path: str) -> T:
    """pypdf raises many kinds of exception on damaged files (its own, ValueError, KeyError,
    struct and zlib errors…): every one is the client's broken PDF, so a 400, never a 500."""
    try:
        return read()
    except Exception as exc:
        raise InvalidRequestError(f"{path}: The PDF specified was not valid: {exc}") from None
