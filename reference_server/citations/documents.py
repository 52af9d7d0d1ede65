"""Citable documents as chunks, and a quote's place in them.

Chunking follows the citations guide (build-with-claude/citations): plain text and PDF text
in sentences, custom content in its own blocks with no further chunking. A quote is a run of
whole consecutive chunks of one group (the text; one PDF page; the content blocks), so its
location is exact: `char_location` (0-based, exclusive end) in the text, `page_location`
(1-based, exclusive end) for a PDF page, `content_block_location` (0-based, exclusive end).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reference_server.content import RenderedDocument

__all__ = ["CitableDocument", "CitationPlan", "plan_citations", "sentences"]

# A sentence ends at its closing punctuation (and any closing quote or bracket) with the
# whitespace after it, or at a line break: the whitespace stays with the sentence before.
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+|\n\s*")


def sentences(text: str) -> tuple[str, ...]:
    """`text` cut into sentences that join back to exactly `text`."""
    cuts = [0, *(m.end() for m in _SENTENCE_END.finditer(text)), len(text)]
    return tuple(text[a:b] for a, b in itertools.pairwise(cuts) if b > a)


@dataclass(frozen=True, slots=True)
class CitableDocument:
    """One document with citations enabled: its document_index, title, kind, and the groups
    of chunks a quote may be taken from (one group per PDF page; one for text or content)."""

    index: int
    title: str | None
    kind: str
    groups: tuple[tuple[str, ...], ...]
    source: str | None = None  # a search result's
    file_id: str | None = None  # a document read from the Files API

    @property
    def tag(self) -> str:
        """What the quote tag names it by: `N` for document N, `rN` for search result N."""
        return f"r{self.index}" if self.kind == "search_result" else str(self.index)

    @classmethod
    def of(cls, document: RenderedDocument) -> CitableDocument:
        assert document.cite_index is not None
        if document.kind in ("content", "search_result"):  # blocks are not cut further
            groups: tuple[tuple[str, ...], ...] = (document.pages,)
        else:  # text (one page) or PDF (one group per page)
            groups = tuple(sentences(page) for page in document.pages)
        return cls(
            document.cite_index, document.title, document.kind, groups, document.source, document.file_id
        )

    def quotable(self) -> tuple[tuple[str, ...], ...]:
        """The groups with something to quote (a blank page or text has none)."""
        return tuple(group for group in self.groups if "".join(group).strip())

    def citation(self, quote: str) -> dict[str, Any] | None:
        """The citation of `quote` (whole chunks of one group), or None if it is not one."""
        for number, group in enumerate(self.groups):
            span = _chunk_span(group, quote)
            if span is None:
                continue
            first, end = span
            if self.kind == "search_result":
                return {
                    "type": "search_result_location",
                    "cited_text": quote,
                    "search_result_index": self.index,
                    "source": self.source,
                    "title": self.title,
                    "start_block_index": first,
                    "end_block_index": end,
                }
            head: dict[str, Any] = {
                "type": _TYPES[self.kind],
                "cited_text": quote,
                "document_index": self.index,
                "document_title": self.title,
                "file_id": self.file_id,  # required by the schema: null unless read from a file
            }
            if self.kind == "content":
                return {**head, "start_block_index": first, "end_block_index": end}
            if self.kind == "pdf":
                return {**head, "start_page_number": number + 1, "end_page_number": number + 2}
            start = sum(len(chunk) for chunk in group[:first])
            return {**head, "start_char_index": start, "end_char_index": start + len(quote)}
        return None


_TYPES = {"text": "char_location", "pdf": "page_location", "content": "content_block_location"}


def _chunk_span(chunks: Sequence[str], quote: str) -> tuple[int, int] | None:
    """(first, end) such that chunks[first:end] join to `quote`, the earliest such run."""
    for first in range(len(chunks)):
        joined, end = "", first
        while end < len(chunks) and len(joined) < len(quote):
            joined += chunks[end]
            end += 1
            if joined == quote:
                return first, end
            if not quote.startswith(joined):
                break
    return None


@dataclass(frozen=True, slots=True)
class CitationPlan:
    """The citable documents and search results of a request."""

    documents: tuple[CitableDocument, ...]

    def document(self, tag: str) -> CitableDocument | None:
        """The one a quote tag names (`CitableDocument.tag`)."""
        return next((d for d in self.documents if d.tag == tag), None)


def plan_citations(documents: Sequence[RenderedDocument]) -> CitationPlan | None:
    """The plan for a request's rendered documents; None unless citations are enabled (on all
    of them: validation.py refuses a mix)."""
    cited = tuple(CitableDocument.of(d) for d in documents if d.cite_index is not None)
    return CitationPlan(cited) if cited else None
