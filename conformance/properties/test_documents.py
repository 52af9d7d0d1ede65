"""DOC-*: documents (text, custom content and base64 PDF sources) and their citations.

Where the target serves documents (the profile, or `capabilities.pdf_input`): documents are
accepted, count in count_tokens and usage, the 100-page limit holds, and a file that is not a
PDF is a 400 (never a 500). `citations: {enabled: true}` is never silently ignored: a target that
says it lacks citations refuses it, one that claims them accepts it; and where citations are
served (`capabilities.citations`), every citation points at what it quotes: `char_location`
for text, `content_block_location` for custom content, `page_location` for PDFs, with
`cited_text` taken verbatim from the source. The PDFs are written by conformance/generating/content.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.catalogue import Level, prop
from conformance.features import declared_in
from conformance.generating.content import (
    ask,
    b64,
    count_input_tokens,
    expect_accepted,
    expect_refused,
    pdf,
    pdf_block,
    squeeze,
    text_block,
)
from conformance.judging.checks import (
    Cases,
    ConformanceFailure,
    expect,
    expect_equal,
    expect_error,
    expect_no_schema_errors,
    json_object,
    not_judged,
    read,
    read_optional,
)
from conformance.judging.citing import Source, citations_deltas, citations_of, judge_all, streamed_citations
from conformance.judging.schemas import validate_event, validate_response
from conformance.wire.drivers import create_json, message_body, total_input_tokens
from conformance.wire.target import Target

# At and above this context window the documented page limit is 600, not 100.
LARGE_WINDOW = 1_000_000
PDF_SUPPORT = "build-with-claude/pdf-support"
CITATIONS = "build-with-claude/citations"
COUNTING = "build-with-claude/token-counting"
MESSAGE = "the Message"

LIGHTHOUSE = (
    "The lighthouse on the northern cape is painted green. "
    "Its keeper is a woman called Ada. "
    "The lamp turns once every nine seconds."
)
HARBOUR = (
    "The harbour has twelve moorings. ",
    "Fishing boats moor on the east quay. ",
    "Ferries leave at noon.",
)
PAGES = (
    "The island has one road and no cars.",
    "The lighthouse on the island is painted green.",
    "The island school has eleven pupils.",
)
QUESTION = "What colour is the lighthouse? Quote the sentence of the document that says so."
CITED = {"enabled": True}
# What a property that asks for citations, plain and streamed, exercises.
CITED_BOTH_WAYS = (
    "endpoint:POST /v1/messages",
    "request:stream",
    "block:document",
    "block:text",
    "delta:citations_delta",
)
CITING_MAX_TOKENS = 160  # room for a quoted sentence, and its citation, on any model


def text_document(data: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": data},
        **fields,
    }


def content_document(parts: tuple[str, ...], **fields: Any) -> dict[str, Any]:
    source = {"type": "content", "content": [text_block(part) for part in parts]}
    return {"type": "document", "source": source, **fields}


TEXT_SOURCE = Source("char_location", "The cape", (LIGHTHOUSE,))
CONTENT_SOURCE = Source("content_block_location", "The harbour", HARBOUR)
PDF_SOURCE = Source("page_location", "The island", PAGES)


@prop(
    "DOC-001",
    Level.MUST,
    "Text, content and PDF documents are accepted",
    url=f"{PDF_SUPPORT}#process-pdfs-with-claude",
    requirement="A document block with a plain-text source, a custom content source (text "
    "blocks) or a base64 PDF source, with a title and context, is accepted: a 200 and a Message.",
    source="docs and schema: OpenAPI RequestDocumentBlock; OpenAPI PlainTextSource; OpenAPI "
    "ContentBlockSource; OpenAPI Base64PDFSource; build-with-claude/pdf-support — "
    "RequestDocumentBlock.source oneOf Base64PDFSource | PlainTextSource | ContentBlockSource | "
    'URLPDFSource; title, context fields; "Claude works with any standard PDF."',
    requires=("documents",),
    covers=("endpoint:POST /v1/messages", "request:messages[].content", "block:document", "block:text"),
)
def test_doc_001_accepted(target: Target) -> None:
    cases = Cases()
    documents = {
        "text source": text_document(LIGHTHOUSE, title="The cape", context="A guide book."),
        "content source": content_document(HARBOUR, title="The harbour"),
        "base64 PDF source": pdf_block(PAGES, title="The island", context="A school project."),
    }
    for name, document in documents.items():
        with cases.case(name):
            expect_accepted(target, ask(target, document, question=QUESTION), f"a document with a {name}")
    cases.check()


@prop(
    "DOC-002",
    Level.MUST,
    "Documents count in count_tokens and usage",
    url=f"{COUNTING}#count-tokens-in-messages-with-pdfs",
    requirement="count_tokens counts documents like the rest of the prompt: a document adds "
    "input tokens, a longer text or a PDF with more pages adds more, and the create request's "
    "usage counts the document too.",
    source="docs: build-with-claude/token-counting; build-with-claude/pdf-support#estimate-your-costs — "
    '"The token counting endpoint accepts the same structured list of inputs for creating a '
    "message, including support for system prompts, tools, images, and PDFs. The response "
    'contains the total number of input tokens."',
    invariant=52,
    requires=("documents",),
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "endpoint:POST /v1/messages",
        "count_request:messages",
        "count_response:input_tokens",
        "response:usage.input_tokens",
        "block:document",
    ),
)
def test_doc_002_counted(target: Target) -> None:
    """count_tokens with no document, a short one and a longer one (text and PDF); usage with no
    document, with a text document and with a search result (a gateway that drops either answers
    with the usage of the bare question)."""
    cases = Cases()
    ladders = {
        "text documents": [text_document(LIGHTHOUSE), text_document(" ".join([LIGHTHOUSE] * 4))],
        "PDF documents": [pdf_block(PAGES[:1]), pdf_block(PAGES * 2)],
    }
    for name, (small, large) in ladders.items():
        with cases.case(f"count_tokens, {name}"):
            counts = [
                count_input_tokens(target, ask(target, *blocks, question=QUESTION))[0]
                for blocks in ([], [small], [large])
            ]
            expect(
                counts[0] < counts[1] < counts[2],
                "input_tokens: no document < a short one < a longer one",
                f"input_tokens {counts[0]}, {counts[1]}, {counts[2]}",
                reason="document-not-counted",
            )

    def used(*blocks: Any) -> int:
        message = create_json(target, ask(target, *blocks, question=QUESTION, max_tokens=1))
        return total_input_tokens(read(message, "usage", dict, where=MESSAGE), where="usage")

    without = None
    for name, block in (("document", ladders["text documents"][1]), ("search_result", SEARCH_RESULT)):
        with cases.case(f"usage, a {name} block"):
            without = used() if without is None else without
            with_it = used(block)
            expect(
                without < with_it,
                f"usage: more input tokens with the {name} block than without ({without})",
                with_it,
                reason="document-not-counted",
                subject=f"{'documents' if name == 'document' else 'search_result blocks'} accepted, not used",
            )
    cases.check()


# A search result of about the size of LIGHTHOUSE x 4 (DOC-002 judges that it reaches the model).
SEARCH_RESULT = {
    "type": "search_result",
    "source": "https://cape.example/lighthouse",
    "title": "The cape",
    "content": [{"type": "text", "text": " ".join([LIGHTHOUSE] * 4)}],
}


@prop(
    "DOC-003",
    Level.MUST,
    "More than 100 PDF pages in a request is a 400",
    url=f"{PDF_SUPPORT}#pdf-support-limitations",
    requirement="A request may hold at most 100 PDF pages (models with a context window under 1M "
    "tokens; the limit is 600 above): one PDF of 101 pages, or two PDFs of 101 pages together, is "
    "a 400 invalid_request_error.",
    source='docs: build-with-claude/pdf-support#check-pdf-requirements — stored page: "Maximum pages per'
    ' request | 100"; "Both limits are on the entire request payload". Later copies of the page '
    "(Sep 2026): 600 pages per request, 100 when the context window is under 1M tokens",
    requires=("documents",),
    covers=("endpoint:POST /v1/messages", "block:document", "error:invalid_request_error"),
)
def test_doc_003_page_limit(target: Target, model_info: dict[str, Any] | None) -> None:
    window = read_optional(model_info, "max_input_tokens", int, where="the ModelInfo")
    if window is not None and window >= LARGE_WINDOW:
        pytest.skip(f"the model's window is {window} tokens; the 100-page limit is for windows under 1M")
    cases = Cases()
    page = [f"Page {n} of the long report." for n in range(1, 102)]
    for name, documents in (
        ("one PDF of 101 pages", [pdf_block(page)]),
        ("two PDFs of 51 and 50 pages", [pdf_block(page[:51]), pdf_block(page[51:])]),
    ):
        with cases.case(name):
            expect_refused(target, ask(target, *documents, question="Summarise.", max_tokens=1), name)
    cases.check()


@prop(
    "DOC-004",
    Level.MUST,
    "A document that is not a valid PDF is a 400",
    url=f"{PDF_SUPPORT}#pdf-support-limitations",
    requirement="A base64 document source must be a standard PDF with media type application/pdf: "
    "data that is not a PDF, data that is not base64, or another media type is a 400 "
    "invalid_request_error (never a 500).",
    source="docs and schema: OpenAPI Base64PDFSource; "
    "build-with-claude/pdf-support#check-pdf-requirements — Base64PDFSource: data format byte, "
    'media_type const application/pdf; "Format | Standard PDF (no passwords/encryption)"',
    invariant=19,
    requires=("documents",),
    covers=("endpoint:POST /v1/messages", "block:document", "error:invalid_request_error"),
)
def test_doc_004_broken_pdf(target: Target) -> None:
    cases = Cases()
    good = b64(pdf(PAGES))
    for name, media_type, data in (
        ("data that is not a PDF", "application/pdf", b64(b"Plain words, not a PDF at all.")),
        ("data that is not base64", "application/pdf", "%%% not base64 %%%"),
        ("media type application/msword", "application/msword", good),
    ):
        document = {"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}}
        with cases.case(name):
            expect_refused(target, ask(target, document, question="Summarise.", max_tokens=1), name)
    cases.check()


@prop(
    "DOC-005",
    Level.SHOULD,
    "citations enabled is honoured or refused, never ignored",
    url=f"{CITATIONS}#how-citations-work",
    requirement="A document with citations {enabled: true}, and a question that asks for a quote of "
    "it, is answered with a citation, or refused with a 400 invalid_request_error (a model that "
    "lacks citations): never a 200 that silently drops the request for citations."
    " The docs do not say citations a model lacks are refused rather than ignored (DOC-006..008 judge "
    "citations where they are served), so this is a SHOULD.",
    requires=("documents",),
    detects=("citations",),
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:GET /v1/models/{model_id}",
        "model:capabilities.citations.supported",
        "block:document",
    ),
)
def test_doc_005_citations_never_ignored(target: Target, model_info: dict[str, Any] | None) -> None:
    """What the target does decides, not what it declares: the run's probe of citations
    (conformance/evidence.py) sent again. A 200 carries a citation; a refusal is the documented
    400. (`model_info` is the session's ModelInfo: a refusal of citations its capabilities say
    the model serves is judged here too.)"""
    body = ask(target, text_document(LIGHTHOUSE, title="The cape", citations=CITED), question=QUESTION)
    body["max_tokens"] = CITING_MAX_TOKENS
    response = target.request("POST", "/v1/messages", json_body=body)
    if response.status_code != 200:
        expect_error(response, 400, "invalid_request_error")
        expect(
            declared_in(model_info, "citations") is not True,
            "HTTP 200 with a citation: the capabilities say the model serves citations",
            f"HTTP {response.status_code}: {response.text[:300]}",
            reason="refused",
            subject="citations refused though the capabilities say they are served",
        )
        return
    message = json_object(response, MESSAGE)
    expect(
        bool(citations_of(message)),
        "a citation on the answer's text (citations enabled, a quote asked for), or a 400",
        f"HTTP 200 without a citation: {response.text[:300]}",
        reason="citations-ignored",
        subject=CITATIONS_IGNORED,
    )


CITATIONS_IGNORED = "citations accepted, not used"


@prop(
    "DOC-006",
    Level.MUST,
    "Citations of text and content documents quote them verbatim",
    url=f"{CITATIONS}#citable-vs-non-citable-content",
    requirement="Each citation names the cited document (document_index, document_title) and "
    "points at the text it quotes: char_location (0-based character range) for plain text, "
    "content_block_location (0-based block range) for custom content, cited_text verbatim from "
    "there; streamed, each arrives in a citations_delta.",
    source='docs: build-with-claude/citations#citable-vs-non-citable-content — "Because citations are '
    "parsed into the respective response formats and `cited_text` is extracted, citations are "
    'guaranteed to contain valid pointers to the provided documents."; char_location 0-indexed, '
    "exclusive end; …",
    invariant=59,
    requires=("documents", "citations"),
    covers=CITED_BOTH_WAYS,
)
def test_doc_006_text_citations(target: Target) -> None:
    """Judges the citations that come; whether any come is DOC-008's rule."""
    sources = [TEXT_SOURCE, CONTENT_SOURCE]
    body = ask(
        target,
        text_document(LIGHTHOUSE, title=TEXT_SOURCE.title, citations=CITED),
        content_document(HARBOUR, title=CONTENT_SOURCE.title, citations=CITED),
        question="What colour is the lighthouse, and where do fishing boats moor? Quote both documents.",
        max_tokens=CITING_MAX_TOKENS,
    )
    plain = citations_of(create_json(target, body))
    streamed = streamed_citations(target, body)
    if not plain and not streamed:
        not_judged("no citation came, streamed or not", judged_by="DOC-008")
    cases = Cases()
    judge_all(plain, sources, "the Message", cases)
    judge_all(streamed, sources, "the stream", cases)
    cases.check()


@prop(
    "DOC-007",
    Level.MUST,
    "Citations of PDFs name the pages they quote",
    url=f"{CITATIONS}#citable-vs-non-citable-content",
    requirement="A citation of a PDF is a page_location: 1-based start_page_number, exclusive "
    "end_page_number within the document, and cited_text found verbatim on those pages.",
    source="docs: build-with-claude/citations#citable-vs-non-citable-content — page_location: "
    'start_page_number 1-indexed, end_page_number exclusive; "citations are guaranteed to contain'
    ' valid pointers to the provided documents"',
    requires=("documents", "citations"),
    covers=("endpoint:POST /v1/messages", "block:document", "block:text"),
)
def test_doc_007_pdf_citations(target: Target) -> None:
    body = ask(
        target,
        pdf_block(PAGES, title=PDF_SOURCE.title, citations=CITED),
        question=QUESTION,
        max_tokens=CITING_MAX_TOKENS,
    )
    citations = citations_of(create_json(target, body))
    if not citations:
        not_judged("no citation came", judged_by="DOC-008")
    cases = Cases()
    judge_all(citations, [PDF_SOURCE], "the Message", cases)
    cases.check()


@prop(
    "DOC-008",
    Level.SHOULD,
    "An answer quoting a cited document carries citations",
    url=f"{CITATIONS}#how-citations-work",
    requirement="With citations enabled, an answer that quotes the document, as asked, carries "
    "citations on its text blocks rather than plain text with none.",
    requires=("documents", "citations"),
    covers=("endpoint:POST /v1/messages", "block:document", "block:text"),
)
def test_doc_008_citations_returned(target: Target) -> None:
    body = ask(
        target,
        text_document(LIGHTHOUSE, title=TEXT_SOURCE.title, citations=CITED),
        question=QUESTION,
        max_tokens=CITING_MAX_TOKENS,
    )
    message = create_json(target, body)
    if not citations_of(message):
        raise ConformanceFailure(
            "at least one citation on the answer's text blocks",
            f"no citation: {read(message, 'content', list, where=MESSAGE)}",
            reason="no-citations",
        )


TIMETABLE = {
    "type": "search_result",
    "source": "https://harbour.example/timetable",
    "title": "The harbour timetable",
    "content": [text_block(part) for part in HARBOUR],
    "citations": CITED,
}


def judge_search_citations(citations: list[Any], results: list[dict[str, Any]]) -> None:
    """Each citation is a search_result_location naming, by its search_result_index, one of
    `results` (the request's search results in order), with that result's source and title and
    a block range of it whose text cited_text is."""
    cases = Cases()
    for n, citation in enumerate(citations):
        where = f"the Message: citation {n}"
        with cases.case(f"citation {n}"):
            kind = read(citation, "type", str, where=where)
            expect_equal(kind, "search_result_location", f"{where}: its type", reason="citation-type")
            index = read(citation, "search_result_index", int, where=where)
            expect(
                0 <= index < len(results),
                f"{where}: search_result_index one of the request's {len(results)} search results (0-based)",
                index,
                reason="index",
            )
            result = results[index]
            for key in ("source", "title"):
                expect_equal(
                    read(citation, key, str, where=where),
                    result[key],
                    f"{where}: search result {index}'s {key}",
                )
            blocks = [block["text"] for block in result["content"]]
            start = read(citation, "start_block_index", int, where=where)
            end = read(citation, "end_block_index", int, where=where)
            expect(
                0 <= start < end <= len(blocks),
                f"{where}: 0 <= start < end <= {len(blocks)} blocks",
                (start, end),
            )
            quoted = squeeze("".join(blocks[start:end]))
            cited_text = read(citation, "cited_text", str, where=where)
            expect(
                squeeze(cited_text) == quoted,
                f"{where}: cited_text (whitespace aside) the blocks it points at: {quoted!r}",
                cited_text,
                reason="cited-text",
            )
    cases.check()


@prop(
    "DOC-009",
    Level.MUST,
    "Citations of search results name the result and the blocks they quote",
    url="build-with-claude/search-results",
    requirement="A search_result block with citations enabled is accepted, and each citation of it "
    "is a search_result_location naming the result (search_result_index, source, title) and the "
    "0-based, exclusive range of its content blocks whose text cited_text is.",
    source="docs: build-with-claude/search-results — search_result_location: search_result_index "
    '"0-based", source and title "from the original search result", start_block_index / '
    "end_block_index; cited_text the cited content",
    requires=("documents", "citations"),
    covers=("endpoint:POST /v1/messages", "block:search_result", "block:text"),
)
def test_doc_009_search_result_citations(target: Target) -> None:
    body = ask(
        target,
        TIMETABLE,
        question="When do the ferries leave? Quote the search result.",
        max_tokens=CITING_MAX_TOKENS,
    )
    citations = citations_of(expect_accepted(target, body, "a search_result block with citations enabled"))
    if not citations:
        not_judged("no citation came", judged_by="DOC-008")
    judge_search_citations(citations, [TIMETABLE])


MOORINGS = {
    "type": "search_result",
    "source": "https://harbour.example/moorings",
    "title": "Moorings",
    "content": [text_block("The harbour has twelve moorings.")],
    "citations": CITED,
}
SEARCH_TOOL = {
    "name": "search_harbour",
    "description": "Searches the harbour's pages.",
    "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
}


@prop(
    "DOC-010",
    Level.MUST,
    "Citations of search results a tool returned are numbered across messages and tool results",
    url="build-with-claude/search-results",
    requirement="Search results returned by a tool (search_result blocks inside a tool_result), with "
    "citations enabled, are accepted and citable; each citation is a search_result_location whose "
    "search_result_index counts every search_result block of the request in the order they appear "
    "across messages and tool results, naming the result it quotes (source, title, block range, "
    "cited_text) as DOC-009 judges it. Sent with tool_choice none, so the answer is text.",
    source="schema: OpenAPI RequestToolResultBlock content (text, image, search_result, document, "
    'tool_reference); ResponseSearchResultLocationCitation.search_result_index — "0-based index of '
    "the cited search result among all `search_result` content blocks in the request, in the order "
    'they appear across messages and tool results"',
    requires=("tools", "documents", "citations"),
    covers=(
        "endpoint:POST /v1/messages",
        "block:search_result",
        "block:tool_result",
        "block:tool_use",
        "block:text",
    ),
)
def test_doc_010_returned_search_results(target: Target) -> None:
    """A question, a call of a search tool, then a user turn with the tool's result (a search
    result: index 0) and another search result after it (index 1); the answer, quoting, is
    judged citation by citation."""
    call = {"type": "tool_use", "id": "toolu_01", "name": SEARCH_TOOL["name"], "input": {"query": "ferries"}}
    returned = {"type": "tool_result", "tool_use_id": "toolu_01", "content": [TIMETABLE]}
    question = "When do the ferries leave? Quote the search results."
    body = message_body(
        target,
        max_tokens=CITING_MAX_TOKENS,
        tools=[SEARCH_TOOL],
        tool_choice={"type": "none"},
        messages=[
            {"role": "user", "content": question},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [returned, MOORINGS]},
        ],
    )
    citations = citations_of(
        expect_accepted(target, body, "search results in a tool_result, citations enabled")
    )
    if not citations:
        not_judged("no citation came", judged_by="DOC-008")
    judge_search_citations(citations, [TIMETABLE, MOORINGS])


@prop(
    "DOC-011",
    Level.MUST,
    "A cited answer is a valid Message, each citation with every required field",
    url=f"{CITATIONS}#how-citations-work",
    requirement="With citations enabled on a text, a content and a PDF document, the Message is "
    "valid against the schema, its citations included (char_location, content_block_location and "
    "page_location each require file_id, null for an inline document), and so is each streamed "
    "citations_delta.",
    source="schema: OpenAPI ResponseCharLocationCitation, ResponseContentBlockLocationCitation, "
    "ResponsePageLocationCitation — required [cited_text, document_index, document_title, "
    "file_id, the range, type]; file_id string or null",
    requires=("documents", "citations"),
    covers=CITED_BOTH_WAYS,
)
def test_doc_011_citations_valid_by_schema(target: Target) -> None:
    """Judges whatever citations come, streamed and not (whether any come is DOC-008's rule)."""
    body = ask(
        target,
        text_document(LIGHTHOUSE, title=TEXT_SOURCE.title, citations=CITED),
        content_document(HARBOUR, title=CONTENT_SOURCE.title, citations=CITED),
        pdf_block(PAGES, title=PDF_SOURCE.title, citations=CITED),
        question="What colour is the lighthouse, where do boats moor, how many pupils? Quote the documents.",
        max_tokens=CITING_MAX_TOKENS,
    )
    message = create_json(target, body)
    deltas = citations_deltas(target, body)
    if not citations_of(message) and not deltas:
        not_judged("no citation came, streamed or not", judged_by="DOC-008")
    cases = Cases()
    with cases.case("the Message"):
        expect_no_schema_errors(validate_response("POST /v1/messages", 200, message), "the cited Message")
    for n, event in enumerate(deltas):
        with cases.case(f"citations_delta {n}"):
            expect_no_schema_errors(validate_event(event), f"citations_delta event {n}")
    cases.check()
