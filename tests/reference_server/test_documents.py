"""Document blocks: each source kind rendered to text, and every refusal a 400 naming its field."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest
from pypdf import PdfWriter

from reference_server.content import documents
from reference_server.content.documents import (
    MAX_PDF_PAGES,
    RenderedDocument,
    check_pdf_page_total,
    render_document,
)
from reference_server.errors import InvalidRequestError
from reference_server.protocol import DocumentBlockParam

PATH = "messages.0.content.2"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF, one Helvetica text line per input line, built by hand with a
    correct xref table (pypdf cannot draw text, and no other PDF writer is a dependency)."""
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for i, text in enumerate(pages):
        lines = " ".join(f"({_escape(line)}) Tj T*" for line in text.split("\n"))
        stream = f"BT /F1 12 Tf 14 TL 72 720 Td {lines} ET".encode("latin-1")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def encrypted_pdf() -> bytes:
    writer = PdfWriter(clone_from=io.BytesIO(make_pdf(["secret text"])))
    writer.encrypt(user_password="user", owner_password="owner")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def pdf_source(raw: bytes) -> dict[str, Any]:
    return {"type": "base64", "media_type": "application/pdf", "data": b64(raw)}


def block(source: dict[str, Any], **fields: Any) -> DocumentBlockParam:
    return DocumentBlockParam.model_validate({"type": "document", "source": source, **fields})


def refusal(source: dict[str, Any], **fields: Any) -> str:
    with pytest.raises(InvalidRequestError) as caught:
        render_document(block(source, **fields), PATH)
    assert caught.value.status_code == 400
    assert caught.value.error_type == "invalid_request_error"
    return caught.value.message


# --- rendering -------------------------------------------------------------------------------


def test_text_source_renders_title_context_then_text() -> None:
    source = {"type": "text", "media_type": "text/plain", "data": "The grass is green."}
    rendered = render_document(block(source, title="Facts", context="From a textbook"), PATH)
    assert rendered == RenderedDocument(
        text="Document: Facts\nContext: From a textbook\n\nThe grass is green.",
        pages=("The grass is green.",),
        kind="text",
        title="Facts",
    )


def test_untitled_document_gets_a_bare_header() -> None:
    rendered = render_document(block({"type": "text", "media_type": "text/plain", "data": "x y"}), PATH)
    assert rendered.text == "Document\n\nx y"


def test_content_source_keeps_one_page_per_text_block() -> None:
    source = {
        "type": "content",
        "content": [{"type": "text", "text": "First block."}, {"type": "text", "text": "Second."}],
    }
    rendered = render_document(block(source, title="Notes"), PATH)
    assert rendered.kind == "content"
    assert rendered.pages == ("First block.", "Second.")
    assert rendered.text == "Document: Notes\n\nFirst block.\n\nSecond."


def test_content_source_as_a_string_is_one_page() -> None:
    rendered = render_document(block({"type": "content", "content": "Just text."}), PATH)
    assert (rendered.kind, rendered.pages) == ("content", ("Just text.",))


def test_pdf_is_extracted_page_by_page() -> None:
    raw = make_pdf(["Hello from page one", "Page two says\ngoodbye"])
    rendered = render_document(block(pdf_source(raw), title="Report"), PATH)
    assert rendered.kind == "pdf"
    assert len(rendered.pages) == 2
    assert "Hello from page one" in rendered.pages[0]
    assert "Page two says" in rendered.pages[1]
    assert "goodbye" in rendered.pages[1]
    assert "Hello" not in rendered.pages[1]
    assert rendered.text.startswith("Document: Report\n\n--- Page 1 of 2 ---\nHello from page one")
    assert "\n\n--- Page 2 of 2 ---\nPage two says" in rendered.text


def test_pdf_at_the_page_limit_is_accepted() -> None:
    raw = make_pdf([f"page {n}" for n in range(1, MAX_PDF_PAGES + 1)])
    rendered = render_document(block(pdf_source(raw)), PATH)
    assert len(rendered.pages) == MAX_PDF_PAGES
    assert "page 100" in rendered.pages[-1]


# --- refusals --------------------------------------------------------------------------------


def test_pdf_over_the_page_limit_is_refused() -> None:
    raw = make_pdf([f"page {n}" for n in range(MAX_PDF_PAGES + 1)])
    assert refusal(pdf_source(raw)) == f"{PATH}.source.data: A maximum of 100 PDF pages may be provided."


def test_encrypted_pdf_is_refused() -> None:
    message = refusal(pdf_source(encrypted_pdf()))
    assert message.startswith(f"{PATH}.source.data: encrypted or password-protected PDFs")


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"%PDF-1.4\n1 0 obj garbage", id="garbage-after-header"),
        pytest.param(make_pdf(["cut short"])[:120], id="truncated"),
        pytest.param(b"%PDF-1.7\ntrailer\n<< /Root 9 0 R >>\n%%EOF", id="no-xref"),
    ],
)
def test_broken_pdf_is_a_400_not_a_500(raw: bytes) -> None:
    assert refusal(pdf_source(raw)).startswith(f"{PATH}.source.data: The PDF specified was not valid")


def test_data_that_is_not_a_pdf_is_refused() -> None:
    message = refusal(pdf_source(b"hello, I am plain text"))
    assert message == f"{PATH}.source.data: The PDF specified was not valid: missing %PDF- header"


def test_pdf_without_pages_is_refused() -> None:
    assert refusal(pdf_source(make_pdf([]))) == f"{PATH}.source.data: The PDF specified has no pages"


def test_pdf_over_the_size_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    source = pdf_source(make_pdf(["small"]))
    monkeypatch.setattr(documents, "MAX_PDF_BYTES", len(source["data"]) - 1)
    message = refusal(source)
    assert message == (
        f"{PATH}.source.data: PDF exceeds the 32 MB request maximum: "
        f"{len(source['data'])} bytes > {len(source['data']) - 1} bytes"
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            {"type": "url", "url": "https://example.com/a.pdf"},
            f"{PATH}.source: URL document sources are not supported: this server has no network access",
            id="url",
        ),
        pytest.param(
            {"type": "file", "file_id": "file_123"},
            f"{PATH}.source: file sources need the Files API, which this server does not serve",
            id="file",
        ),
        pytest.param(
            {"media_type": "text/plain", "data": "x"},
            f"{PATH}.source: Unable to extract tag using discriminator 'type'",
            id="no-type",
        ),
        pytest.param(
            {"type": "html", "data": "x"},
            f"{PATH}.source: Input tag 'html' found using 'type' does not match any of the expected tags",
            id="unknown-type",
        ),
        pytest.param(
            {"type": "text", "media_type": "text/html", "data": "<p>x</p>"},
            f"{PATH}.source.media_type: Input should be 'text/plain'",
            id="text-wrong-media-type",
        ),
        pytest.param(
            {"type": "text", "media_type": "text/plain"},
            f"{PATH}.source.data: Field required",
            id="text-missing-data",
        ),
        pytest.param(
            {"type": "text", "media_type": "text/plain", "data": 5},
            f"{PATH}.source.data: Input should be a valid string",
            id="text-data-not-string",
        ),
        pytest.param(
            {"type": "text", "media_type": "text/plain", "data": "x", "encoding": "utf-8"},
            f"{PATH}.source.encoding: Extra inputs are not permitted",
            id="text-extra-field",
        ),
        pytest.param(
            {"type": "base64", "media_type": "image/png", "data": "AAAA"},
            f"{PATH}.source.media_type: Input should be 'application/pdf'",
            id="base64-not-pdf",
        ),
        pytest.param(
            {"type": "base64", "data": "AAAA"},
            f"{PATH}.source.media_type: Field required",
            id="base64-missing-media-type",
        ),
        pytest.param(
            {"type": "base64", "media_type": "application/pdf", "data": "not base64!"},
            f"{PATH}.source.data: invalid base64 data",
            id="bad-base64",
        ),
        pytest.param(
            {"type": "base64", "media_type": "application/pdf", "data": ""},
            f"{PATH}.source.data: PDF cannot be empty",
            id="empty-pdf",
        ),
        pytest.param(
            {"type": "content"},
            f"{PATH}.source.content: Field required",
            id="content-missing",
        ),
        pytest.param(
            {"type": "content", "content": 3},
            f"{PATH}.source.content: Input should be a valid string or list",
            id="content-wrong-type",
        ),
        pytest.param(
            {"type": "content", "content": [{"type": "text", "text": "ok"}, {"type": "image", "source": {}}]},
            f"{PATH}.source.content.1: image blocks inside a document's content are not supported",
            id="content-image",
        ),
        pytest.param(
            {"type": "content", "content": [{"type": "text"}]},
            f"{PATH}.source.content.0.text: Field required",
            id="content-text-missing-text",
        ),
        pytest.param(
            {"type": "content", "content": [{"type": "document"}]},
            f"{PATH}.source.content.0: Input tag 'document' found using 'type' does not match",
            id="content-unknown-block",
        ),
    ],
)
def test_bad_sources_are_refused_naming_the_field(source: dict[str, Any], expected: str) -> None:
    assert refusal(source).startswith(expected)


def test_data_url_gets_a_hint() -> None:
    source = {"type": "base64", "media_type": "application/pdf", "data": "data:application/pdf;base64,AAAA"}
    assert refusal(source).endswith("(send the bare base64 payload, not a data: URL)")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"title": ""}, f"{PATH}.title: String should have at least 1 character"),
        ({"title": "t" * 501}, f"{PATH}.title: String should have at most 500 characters"),
        ({"context": ""}, f"{PATH}.context: String should have at least 1 character"),
    ],
)
def test_title_and_context_lengths(fields: dict[str, str], expected: str) -> None:
    assert refusal({"type": "text", "media_type": "text/plain", "data": "x"}, **fields) == expected


def test_title_of_500_characters_is_accepted() -> None:
    source = {"type": "text", "media_type": "text/plain", "data": "x"}
    assert render_document(block(source, title="t" * 500), PATH).text.startswith("Document: " + "t" * 500)


def test_request_page_total() -> None:
    check_pdf_page_total(MAX_PDF_PAGES)
    with pytest.raises(InvalidRequestError) as caught:
        check_pdf_page_total(MAX_PDF_PAGES + 1)
    assert caught.value.message == "A maximum of 100 PDF pages may be provided. Found 101 in this request."
