"""Citations of fetched pages: a web_fetch tool with `citations: {"enabled": true}`.

Each page such a tool fetches in a turn is a document of the request (its result block's
document says `citations: {"enabled": true}`), numbered after the request's own documents:
`document_index` counts the request's documents in order, then this turn's fetched ones in
the order they were fetched. The model reads it with the header of a citable document
(content/documents.py), and the generation right after it opens with a quote of one of the
turn's fetched pages, as an answer about cited documents does (citations/grammar.py); it may go
on with text, more quotes, and calls of the turn's tools (a quote never holds the call tag).
Later generations, after other tools' results, are free again.

A fetched page in an earlier turn's history is read as text: it is not citable there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from reference_server.citations import CitableDocument, CitationPlan, citation_grammar
from reference_server.content import RenderedDocument, render_document
from reference_server.prepared import PreparedMessage
from reference_server.protocol import ServerToolResultBlock, WebFetchToolResultBlock
from reference_server.tools.definitions import ToolDefinition
from reference_server.tools.grammar import call_rules

from .results import fetched_document

__all__ = ["CITABLE", "citable_fetch", "cited_generation"]

CITABLE = {"enabled": True}  # the fetched document's `citations`


def citable_fetch(block: ServerToolResultBlock, index: int, path: str) -> RenderedDocument | None:
    """The document of a successful fetch with citations on, read as citable document `index`;
    None for any other result (an error, a tool without citations, a page with no text)."""
    if not isinstance(block, WebFetchToolResultBlock) or block.content.get("type") != "web_fetch_result":
        return None
    document = fetched_document(block.content)
    if document is None or document.citations != CITABLE:
        return None
    return render_document(document, f"{path}.content.content", index)


def cited_generation(
    prepared: PreparedMessage,
    cited: Sequence[RenderedDocument],
    tools: Sequence[ToolDefinition],
    parallel: bool,
    special: frozenset[str] = frozenset(),
) -> PreparedMessage:
    """`prepared` (the turn's next generation) quoting the turn's fetched pages: it opens with a
    quote and may end with calls of `tools`; as it was when nothing was fetched to cite."""
    if not cited:
        return prepared
    plan = CitationPlan(tuple(CitableDocument.of(document) for document in cited))
    grammar = citation_grammar(
        plan, call_rules(tools, parallel=parallel, special=special) if tools else (), special
    )
    if grammar is None:  # nothing quotable on the pages
        return prepared
    return replace(prepared, request=replace(prepared.request, constraint=grammar), citations=plan)
