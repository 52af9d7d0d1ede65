"""Judging citations: where each citation points, and whether it quotes what is there.

A citation names its document (`document_index`, `document_title`) and a place in it, by the
kind of document: a character range of plain text (`char_location`, 0-based, exclusive end), a
block range of custom content (`content_block_location`), a page range of a PDF
(`page_location`, 1-based, exclusive end). Its `cited_text` must be what that place holds
(whitespace aside). The DOC-*, FILES-* and SRVTOOL-* properties that ask for citations judge
them here, from the documents as they were sent, or as a target fetched them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.generating.content import squeeze
from conformance.judging.checks import Cases, expect, expect_equal, read, read_optional
from conformance.wire.drivers import StreamRun, expect_stream, stream_raw
from conformance.wire.target import Target

__all__ = [
    "Source",
    "citations_deltas",
    "citations_in",
    "citations_of",
    "delta_events",
    "judge_all",
    "judge_citation",
    "streamed_citations",
]


def citations_of(message: Any) -> list[Any]:
    """Every citation of the Message's text blocks."""
    found: list[Any] = []
    for n, block in enumerate(read(message, "content", list, where="the Message")):
        if isinstance(block, dict) and block.get("type") == "text":
            found += read_optional(block, "citations", list, where=f"text block {n}", default=[])
    return found


@dataclass(frozen=True, slots=True)
class Source:
    """A document as sent: its kind (the citation type it calls for), title and parts (the
    text; the content blocks; the pages)."""

    citation: str
    title: str
    parts: tuple[str, ...]


def citations_deltas(target: Target, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every citations_delta event of the streamed answer to `body`."""
    return delta_events(expect_stream(stream_raw(target, body)))


def delta_events(run: StreamRun) -> list[dict[str, Any]]:
    """Every citations_delta event of a stream."""
    return [
        event
        for event in run.of_type("content_block_delta")
        if isinstance(event.get("delta"), dict) and event["delta"].get("type") == "citations_delta"
    ]


def streamed_citations(target: Target, body: dict[str, Any]) -> list[Any]:
    """The citation of every citations_delta of the streamed answer to `body`."""
    return citations_in(expect_stream(stream_raw(target, body)))


def citations_in(run: StreamRun) -> list[Any]:
    """The citation of every citations_delta of a stream."""
    return [
        read(event, "delta.citation", dict, where="a citations_delta event") for event in delta_events(run)
    ]


def judge_citation(citation: Any, sources: list[Source], where: str) -> None:
    """One citation points into the document it names, at text it quotes verbatim."""
    kind = read(citation, "type", str, where=where)
    index = read(citation, "document_index", int, where=where)
    expect(0 <= index < len(sources), f"{where}: document_index in 0..{len(sources) - 1}", index)
    source = sources[index]
    expect_equal(
        kind, source.citation, f"{where}: the citation type for that document", reason="citation-type"
    )
    title = read_optional(citation, "document_title", str, where=where)
    expect(title in (None, source.title), f"{where}: document_title {source.title!r}", title, reason="title")
    cited_text = read(citation, "cited_text", str, where=where)
    cited = squeeze(cited_text)
    expect(bool(cited), f"{where}: a non-empty cited_text", repr(cited_text), reason="cited-text")
    if kind == "char_location":
        start = read(citation, "start_char_index", int, where=where)
        end = read(citation, "end_char_index", int, where=where)
        text = source.parts[0]
        expect(0 <= start < end <= len(text), f"{where}: 0 <= start < end <= {len(text)}", (start, end))
        quoted = text[start:end]
    elif kind == "content_block_location":
        start = read(citation, "start_block_index", int, where=where)
        end = read(citation, "end_block_index", int, where=where)
        count = len(source.parts)
        expect(0 <= start < end <= count, f"{where}: 0 <= start < end <= {count} blocks", (start, end))
        quoted = "".join(source.parts[start:end])
    else:
        start = read(citation, "start_page_number", int, where=where)
        end = read(citation, "end_page_number", int, where=where)
        pages = len(source.parts)
        expect(1 <= start < end <= pages + 1, f"{where}: 1 <= start < end <= {pages + 1}", (start, end))
        quoted = "".join(source.parts[start - 1 : end - 1])
        expect(
            cited in squeeze(quoted),
            f"{where}: cited_text found (whitespace aside) in pages {start}..{end - 1}: {quoted!r}",
            cited_text,
            reason="cited-text",
        )
        return
    expect(
        cited == squeeze(quoted),
        f"{where}: cited_text (whitespace aside) the text it points at: {quoted!r}",
        cited_text,
        reason="cited-text",
    )


def judge_all(citations: list[Any], sources: list[Source], what: str, cases: Cases) -> None:
    for n, citation in enumerate(citations):
        with cases.case(f"{what}, citation {n}"):
            judge_citation(citation, sources, f"{what}: citation {n}")
